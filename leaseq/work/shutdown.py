"""What a worker does with its held jobs once a stop's grace has run out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

H = TypeVar("H")


def past_grace(held: Iterable[H], returned: Callable[[H], bool]) -> tuple[list[H], list[H]]:
    """What a worker does with its held jobs once a stop's grace has run out, the one
    rule both follow: ``(running, finished)``. Handlers still running are stopped
    (cancelled, or for a thread, its outcome discarded) and their jobs released.
    Those that have ``returned`` are not running: their outcome is written, though
    the worker may not have picked it up yet (an outcome set but not queued; a job
    task not resumed, or its write in flight). Released, a finished job would run
    again; cut off mid-write, it would stay active and run again after expiry."""
    running: list[H] = []
    finished: list[H] = []
    for item in held:
        (finished if returned(item) else running).append(item)
    return running, finished
