"""The queue's clock floor: dropped by hand after a server clock that ran ahead
was set back (``lua/reset_clock.lua``; docs/leases-and-fencing.md)."""

from __future__ import annotations

from typing import Any

from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = ["reset_clock", "reset_clock_call"]


def reset_clock_call(queue: QueueSettings) -> Call[tuple[float | None, float]]:
    """Drop the queue's clock floor (after a server clock ran ahead and was
    set back): returns (the floor dropped, or None; the server time), epoch s."""

    def parse(r: list[Any]) -> tuple[float | None, float]:
        floor = int(r[0])
        return (None if floor < 0 else floor / 1000.0), int(r[1]) / 1000.0

    return SCRIPTS["reset_clock"].call(queue.keys, parse)


def reset_clock(queue: QueueSettings) -> Op[tuple[float | None, float]]:
    """Drop the queue's clock floor after a server clock that ran ahead was
    set back; returns (the floor dropped or None, server time), epoch seconds."""
    dropped: tuple[float | None, float] = yield reset_clock_call(queue)
    return dropped
