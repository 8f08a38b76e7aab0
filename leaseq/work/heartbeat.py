"""Heartbeats: what an extend's answer means for the job held under it.

Both workers extend the leases they hold every ``ttl / 3`` in one fenced
``extend_many`` call and hand each answer to :func:`heard`, the one place
that says what it means: a new deadline, a lease lost (reaped after a stall,
taken over) or a job cancelled while it runs (``Queue.cancel``). A handler
learns of the last two through its ``current_job()``: ``cancelled`` is set
before ``lost``, so a handler that waits for ``lost`` and then reads
``cancelled`` (or polls either) finds the job cancelled.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal

from leaseq.errors import LeaseLost, LeaseqError
from leaseq.handler import JobContext
from leaseq.types import Lease
from leaseq.work.held import Task
from leaseq.work.log import log_job

Heard = Literal["renewed", "lost", "cancelled"]


def heard(ctx: JobContext, result: Lease | LeaseLost) -> Heard:
    """Apply one extend answer to the lease held under ``ctx``: ``renewed`` (its
    new deadline in ``ctx.lease``), ``cancelled`` (the job was cancelled: both
    ``ctx.cancelled`` and ``ctx.lost`` set, in that order) or ``lost``
    (``ctx.lost`` set). The handler's outcome is discarded from then on."""
    if not isinstance(result, LeaseLost):
        ctx.lease = result
        return "renewed"
    if result.state == "cancelled":
        ctx.cancelled.set()  # first: whoever sees lost must find cancelled already set
        ctx.lost.set()
        return "cancelled"
    ctx.lost.set()
    return "lost"


def extend_due(queue: Any, due: list[Task], now: float, ttl: float, every: float) -> None:
    """The threaded worker's heartbeat: extend every lease in ``due`` in one fenced
    call; each answer goes through :func:`heard`, a renewed lease gets its next beat.
    Prefetched leases whose handler has started since are flagged, so the server
    stops counting them as unstarted (a crash from now on spends the attempt)."""
    if not due:
        return
    news = [t.prefetched and t.started and not t.reported for t in due]
    results = queue.extend_many([t.lease for t in due], ttl, news if any(news) else None)
    for task, result, new in zip(due, results, news, strict=True):
        if heard(task.ctx, result) == "renewed":
            task.lease = task.ctx.lease
            task.next_beat = now + every
            task.reported = task.reported or new
        else:
            log_job(queue.name, logging.WARNING, task, "heartbeat found the lease lost: %s", result)
            task.interrupt()  # an async def handler is cancelled: its outcome would be refused


class StartReports:
    """The server records a prefetched lease's start before its handler runs.

    A spare claimed ahead of a free slot is marked ``prefetched`` in its row,
    and a lease that expires so marked gets its attempt back: its worker died
    before the job began. That is true only if the mark is cleared *before*
    the handler starts: cleared by the next heartbeat instead, a worker killed
    in between (every job shorter than ``ttl / 3``) had its started jobs
    refunded as if they never ran. So a handler thread taking a spare calls
    ``report`` first; threads that start spares together share one
    ``extend_many`` (the first to come sends for all waiting, the others wait
    for its answer). A lease found lost there is not run (``ctx.lost`` set).
    While Redis does not answer the start goes unrecorded and the handler runs
    all the same (its heartbeat reports it later): only a crash in that outage
    can then refund a job that ran.
    """

    def __init__(self, queue: Any, ttl: float) -> None:
        self.queue, self.ttl = queue, ttl
        self._cond = threading.Condition()
        self._waiting: list[Task] = []
        self._sending = False

    def report(self, task: Task) -> None:
        """Block until ``task``'s start is recorded (or known lost, or unrecordable)."""
        with self._cond:
            self._waiting.append(task)
            while task in self._waiting and self._sending:
                self._cond.wait()
            if task not in self._waiting:  # another thread's call carried it
                return
            batch, self._waiting, self._sending = self._waiting, [], True
        try:
            self._send(batch)
        finally:
            with self._cond:
                self._sending = False
                self._cond.notify_all()

    def _send(self, batch: list[Task]) -> None:
        try:
            results = self.queue.extend_many(
                [t.lease for t in batch], self.ttl, [True] * len(batch)
            )
        except LeaseqError as exc:  # unrecorded: the heartbeat reports it once Redis answers
            log_job(self.queue.name, logging.DEBUG, None, "start not recorded: %s", exc)
            return
        for task, result in zip(batch, results, strict=True):
            if heard(task.ctx, result) == "renewed":
                task.lease = task.ctx.lease
                task.reported = True
