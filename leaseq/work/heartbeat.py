"""Heartbeats: what an extend's answer means for the job held under it."""

from __future__ import annotations

import logging
from typing import Any

from leaseq.errors import LeaseLost
from leaseq.work.held import Task
from leaseq.work.log import log_job


def extend_due(queue: Any, due: list[Task], now: float, ttl: float, every: float) -> None:
    """The threaded worker's heartbeat: extend every lease in ``due`` in one fenced
    call; a lease found lost gets ``ctx.lost`` set (and ``ctx.cancelled`` when the
    job was cancelled), the others their next beat.
    Prefetched leases whose handler has started since are flagged, so the server
    stops counting them as unstarted (a crash from now on spends the attempt)."""
    if not due:
        return
    news = [t.prefetched and t.started and not t.reported for t in due]
    results = queue.extend_many([t.lease for t in due], ttl, news if any(news) else None)
    for task, result, new in zip(due, results, news, strict=True):
        if isinstance(result, LeaseLost):
            if result.state == "cancelled":
                task.ctx.cancelled.set()
            task.ctx.lost.set()
            log_job(queue.name, logging.WARNING, task, "heartbeat found the lease lost: %s", result)
        else:
            task.lease = task.ctx.lease = result
            task.next_beat = now + every
            task.reported = task.reported or new
