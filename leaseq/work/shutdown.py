"""When a worker's run may end, and what it does with its held jobs once a
stop's grace has run out."""

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


def may_end(held: int, stuck: int) -> bool:
    """Whether a run may end (a burst run with nothing left to claim, or a stop
    within its grace), the one rule both drivers follow: no lease is ``held`` and
    no handler thread is ``stuck`` past its timeout. A thread that cannot be
    killed still runs the handler's code (its writes, its files): returning
    under it would let the caller close the client or exit the process mid-step,
    so a run waits for it as for a running job. A stop bounds the wait by its
    grace; a thread that never returns is what process mode's kill is for
    (``on_stuck``). The asyncio driver's job task waits on its pool thread, so
    its held count covers its stuck threads."""
    return held == 0 and stuck == 0
