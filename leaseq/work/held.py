"""The threaded worker's held leases: one record per lease (:class:`Task`) and
the table of them (:class:`HeldTable`) that its threads share."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from leaseq.handler import JobContext
from leaseq.types import Lease
from leaseq.work.outcomes import Outcome


@dataclass(eq=False)
class Task:
    """One held lease of the threaded worker. ``outcome`` is set by the handler
    thread once it is done (or to RELEASE for a lease handed back unstarted)."""

    lease: Lease
    ctx: JobContext
    next_beat: float
    """When to extend next, ``time.monotonic()`` seconds."""
    outcome: Outcome | None = None
    prefetched: bool = False
    """Claimed as a spare, ahead of a free handler: once it has waited a heartbeat
    the server marks it (``marked``) and refunds its attempt if it expires unstarted."""
    started: bool = False
    """Its handler has begun (set by the handler thread)."""
    marking: bool = False
    """A heartbeat that marks it as a waiting spare is in flight (``heartbeat.MARKS``)."""
    marked: bool = False
    """The server holds its spare's mark: its start must be recorded before its
    handler runs (``StartReports``)."""
    reported: bool = False
    """The server has been told that it started (its mark cleared)."""
    limit: float | None = None
    """The handler's time limit, seconds (``job_timeout``), set when it starts."""
    since: float = 0.0
    """When it was claimed, ``time.monotonic()`` seconds (how long a spare has waited)."""
    timeout_at: float = float("inf")
    """When the handler's time is up, ``time.monotonic()`` seconds."""
    timed_out: bool = False
    """The reporter failed the attempt for its timeout; what the handler does later is discarded."""
    given_up: str = ""
    """Why the worker gave up on the handler while it ran (a key of
    ``leaseq.observe.health.GIVEN_UP``: its timeout passed, its job was
    cancelled, a stop's grace ran out); "" while it has not."""
    returned: bool = False
    """The handler thread has returned (or raised)."""
    handed_back: bool = False
    """Released by this worker (not lost to another): at shutdown while its handler
    ran, or unstarted, a spare that waited too long (no handler thread runs it then)."""
    interrupted: bool = False
    """Its handler is to stop: its lease was lost, its time is up, or a stop's grace ran out."""
    cancel: Callable[[], None] | None = None
    """Cancels its ``async def`` handler while that runs (a plain one cannot be stopped)."""

    def interrupt(self) -> None:
        """Stop its handler if it can be stopped (``async def``): its outcome no longer counts."""
        self.interrupted = True
        if self.cancel is not None:
            self.cancel()

    def on_interrupt(self, cancel: Callable[[], None]) -> None:
        """Its handler thread says how to cancel the handler now running (at once
        if ``interrupt`` came first)."""
        self.cancel = cancel
        if self.interrupted:
            cancel()

    @property
    def key(self) -> tuple[str, str, int, int, str]:
        """This lease among the worker's: queue, job id, attempt, the row's
        incarnation and the claim's fence (the queues of a set may hold one id;
        a job deleted and enqueued again under its id starts over at attempt 1;
        after a failover that lost a claim, this worker may be handed the same
        attempt again, under another fence, while the first still runs)."""
        lease = self.lease
        return lease.queue, lease.id, lease.attempt, lease.incarnation, lease.fence


class HeldTable:
    """The leases a threaded worker holds, by ``Task.key``, and what its threads
    read of them, all guarded by ``cond``: the claimer waits on it for room,
    handler threads and the reporter change it (``settle`` wakes the claimer).
    ``gen`` counts the settles (a burst claimer waits for one), ``finished``
    the tasks settled (``Prefetch.adapt``), ``next_beat_at`` is the soonest
    heartbeat due (``time.monotonic()`` seconds)."""

    def __init__(self, cond: threading.Condition) -> None:
        self.cond = cond
        self.tasks: dict[tuple[str, str, int, int, str], Task] = {}
        self.gen = 0
        self.finished = 0
        self.next_beat_at = math.inf

    def reset(self) -> None:
        """Empty, for a new run."""
        self.tasks = {}
        self.gen = 0
        self.finished = 0
        self.next_beat_at = math.inf

    def add(self, tasks: Iterable[Task], beat: float) -> bool:
        """Hold ``tasks``, first beat at ``beat`` (call holding ``cond``); True if
        that is sooner than the reporter planned to wake."""
        for task in tasks:
            self.tasks[task.key] = task
        sooner = beat < self.next_beat_at
        self.next_beat_at = min(self.next_beat_at, beat)
        return sooner

    def holds(self, task: Task) -> bool:
        """The lease of ``task`` is still this worker's (not lost, not settled)."""
        return not task.ctx.lost.is_set() and self.tasks.get(task.key) is task

    def forget(self, tasks: list[Task]) -> list[Task]:
        """Settle ``tasks`` (call holding ``cond``): no longer held, the claimer
        woken; returns those timed out or handed back at a stop, whose thread may
        run on (the caller asks ``Timeouts.settled``)."""
        timed_out = []
        for task in tasks:
            key = task.key
            if self.tasks.get(key) is task:
                del self.tasks[key]
            if task.timed_out or task.handed_back:
                timed_out.append(task)
        self.finished += len(tasks)
        self.gen += 1
        self.cond.notify_all()
        return timed_out

    def beat_due(self, now: float) -> list[Task]:
        """The leases to extend now: held, not lost, their beat due. A timed-out
        lease is being failed: never extended again."""
        with self.cond:
            tasks = [t for t in self.tasks.values() if not t.ctx.lost.is_set()]
        return [t for t in tasks if t.next_beat <= now and not t.timed_out]

    def plan_beats(self) -> None:
        """After a heartbeat: the soonest beat still due (leases admitted meanwhile
        carry their own, later, first beat)."""
        with self.cond:
            pending = [
                t.next_beat
                for t in self.tasks.values()
                if not t.ctx.lost.is_set() and not t.timed_out
            ]
            self.next_beat_at = min(pending, default=math.inf)
