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


MARKS = threading.Condition()
"""Guards the spare marks of every worker's tasks (``Task.marking``, ``.marked``):
a heartbeat marks a spare only if its handler has not started, and a handler
that starts a spare being marked waits for the mark, then records its start."""


def _flags(due: list[Task]) -> tuple[list[bool], list[bool]]:
    """Per lease of ``due``: a marked spare that started (the start the handler
    could not record: Redis did not answer), and a spare still waiting (mark it,
    ``Task.marking`` set from here until the answer)."""
    with MARKS:
        started = [t.marked and t.started and not t.reported for t in due]
        waiting = []
        for t in due:
            wait = t.prefetched and not t.started and not t.marked and not t.marking
            t.marking = t.marking or wait
            waiting.append(wait)
    return started, waiting


def extend_due(queue: Any, due: list[Task], now: float, ttl: float, every: float) -> None:
    """The threaded worker's heartbeat: extend every lease in ``due`` in one fenced
    call; each answer goes through :func:`heard`, a renewed lease gets its next beat.
    A spare still waiting for a handler is marked (a crash from now on refunds
    its attempt: it provably never ran, ``StartReports``); one never waits long
    enough to be marked in a busy drain, which then pays nothing for this."""
    if not due:
        return
    started, waiting = _flags(due)
    try:
        results = queue.extend_many(
            [t.lease for t in due], ttl, started if any(started) else None,
            waiting if any(waiting) else None,
        )  # fmt: skip
    except BaseException:
        _marked(due, waiting, None)
        raise
    _marked(due, waiting, results)
    for task, result, new in zip(due, results, started, strict=True):
        if heard(task.ctx, result) == "renewed":
            task.lease = task.ctx.lease
            task.next_beat = now + every
            task.reported = task.reported or new
        else:
            log_job(queue.name, logging.WARNING, task, "heartbeat found the lease lost: %s", result)
            task.interrupt()  # an async def handler is cancelled: its outcome would be refused


def _marked(due: list[Task], waiting: list[bool], results: list[Any] | None) -> None:
    """The marking heartbeat answered (``results``) or failed (None): a spare is
    marked if its lease was renewed; a handler waiting to start it goes on."""
    with MARKS:
        for i, task in enumerate(due):
            if waiting[i]:
                task.marking = False
                task.marked = results is not None and not isinstance(results[i], LeaseLost)
        MARKS.notify_all()


class StartReports:
    """The server records a marked spare's start before its handler runs.

    A spare (a lease claimed ahead of a free handler) that still waits at its
    first heartbeat is marked ``prefetched`` in its row (``extend_due``), and
    a lease that expires so marked gets its attempt back: its worker died
    before the job began. That is true only if the mark is cleared *before*
    the handler starts: cleared by a later heartbeat instead, a worker killed
    in between had its started jobs refunded as if they never ran. So a
    handler taking a marked spare calls ``gate`` first; threads that start
    spares together share one ``extend_many`` (the first to come sends for all
    waiting, the others wait for its answer). A spare that starts before its
    first heartbeat (a busy drain: nearly all) was never marked and costs
    nothing here; a crash charges it like a running job. A lease found lost is
    not run (``ctx.lost`` set). While Redis does not answer the start goes
    unrecorded and the handler runs all the same (a heartbeat reports it
    later): only a crash in that outage can then refund a job that ran.
    """

    def __init__(self, queue: Any, ttl: float) -> None:
        self.queue, self.ttl = queue, ttl
        self._cond = threading.Condition()
        self._waiting: list[Task] = []
        self._sending = False

    @staticmethod
    def needs_gate(task: Task) -> bool:
        """Whether ``gate`` has work for ``task`` (without blocking: for a loop)."""
        with MARKS:
            return (task.marked or task.marking) and not task.reported

    def gate(self, task: Task) -> None:
        """Called as ``task``'s handler is about to run (``task.started`` set): if
        its spare is marked, or being marked, record its start first."""
        with MARKS:
            while task.marking:
                MARKS.wait()
            if not task.marked or task.reported:
                return
        self.report(task)

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
