"""Reaping: expired leases handed back to pending, or dead-lettered once their
attempts are spent (``lua/reap.lua``). A claim reaps a bounded number itself;
this is the sweep of them all (``Queue.reap``, a worker's reaper)."""

from __future__ import annotations

from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = ["REAP_LIMIT", "reap", "reap_call"]

REAP_LIMIT = 1000
"""Most expired leases one reap call hands back."""


def reap_call(queue: QueueSettings, limit: int = REAP_LIMIT) -> Call[tuple[int, int, bool]]:
    """One reap call: (returned to pending, dead-lettered, more left)."""
    return SCRIPTS["reap"].call(
        queue.keys, lambda r: (int(r[0]), int(r[1]), int(r[2]) == 1), limit=limit
    )


def reap(queue: QueueSettings) -> Op[tuple[int, int]]:
    """Hand back every expired lease, and dead-letter every job past its start-by
    deadline (``expires=``): (returned to pending, dead-lettered)."""
    requeued = died = 0
    while True:
        r, d, more = yield reap_call(queue)
        requeued, died = requeued + r, died + d
        if not more:
            return requeued, died
