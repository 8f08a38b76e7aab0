"""Handler time limits of the threaded worker (docs/workers.md, Timeouts).

A job's limit is its own ``timeout`` (``enqueue(..., timeout=)``), else the
worker's (``Worker(..., timeout=)``); it runs from the moment its handler
starts (time spent prefetched does not count). Once it passes, the reporter
fails the attempt through the normal outcome path (``leaseq.work.outcomes.decide`` of a
``HandlerTimeout``: "timed out after N s", retried or dead-lettered by the
usual rules), which releases the lease at once; heartbeats stop extending it.

A Python thread cannot be killed. The handler thread runs on; what it
returns or raises later is discarded (logged), and until it returns its
slot stays busy: the thread is **stuck**, and the worker claims that much
less. ``on_stuck(n)`` hears every change of the number of stuck threads;
``leaseq worker --processes`` uses it to SIGKILL (and replace) a child whose
handler is still stuck after a grace period.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from leaseq.observe.health import HEALTH, stuck_text
from leaseq.work.held import Task
from leaseq.work.log import log_job
from leaseq.work.outcomes import OVERDUE, RELEASE, HandlerTimeout, decide, job_timeout
from leaseq.work.shutdown import past_grace

__all__ = ["Timeouts"]


class Timeouts:
    """The time limits of one worker's running handlers and its stuck threads.

    Handler threads call ``arm`` as a handler starts and ``returned`` when it
    is done; the reporter calls ``expire`` (the tasks whose time is up, their
    outcome set) and, as the worker forgets a task, ``settled``. State is
    guarded by the worker's condition ``cond``.
    """

    def __init__(
        self,
        queue: str,
        cond: threading.Condition,
        default: float | None,
        wake: Callable[[], None],
        on_stuck: Callable[[int], None] | None,
    ) -> None:
        self.queue = queue
        self.cond = cond
        self.default = default
        self.wake = wake
        """Wakes the reporter to re-plan (a limit sooner than it sleeps)."""
        self.on_stuck = on_stuck
        self.stuck: set[Task] = set()
        """Timed-out tasks whose handler thread has not returned."""
        self.next_at = math.inf
        self._told = threading.Lock()
        self._decided = threading.Lock()
        """Whose outcome a task gets, the handler's, its timeout's or the shutdown's
        hand-back, and whether a spare runs or goes back (``begin``, ``overdue``):
        taken (inside ``cond`` on the reporter's side) wherever
        ``timed_out``, ``handed_back`` or ``outcome`` is set, or read to choose.
        A plain lock, not ``cond``: the handler threads take it twice a job (as it
        starts and as it returns), uncontended but for the rare choice."""

    def reset(self) -> None:
        """A new run(): no limits armed. ``stuck`` stays: a thread of an earlier run
        still running (handed back at a hard stop, say) holds its slot in this
        one too, or the run would start ``concurrency`` more beside it."""
        with self.cond:
            self.next_at = math.inf

    def arm(self, task: Task) -> None:
        """Start ``task``'s clock, if it has a limit (handler thread, as the handler starts)."""
        limit = job_timeout(task.lease, self.default)
        if limit is None:
            return
        at = time.monotonic() + limit
        with self.cond:
            task.limit, task.timeout_at = limit, at
            sooner = at < self.next_at
            if sooner:
                self.next_at = at
        if sooner:
            self.wake()

    def begin(self, task: Task, release: bool) -> bool:
        """A handler thread took ``task`` off the work queue: True, and it is marked
        started (or, with ``release``, given the RELEASE outcome: the worker is
        stopping or the lease is lost, so it goes back unstarted); False if the
        reporter handed it back while it waited (``overdue``): it is released
        already, and must be neither run nor released again."""
        with self._decided:
            if task.handed_back:
                return False
            if release:
                task.outcome = RELEASE
            else:
                task.started = True
            return True

    def overdue(self, tasks: Mapping[Any, Task], waited: Callable[[Task], bool]) -> list[Task]:
        """The held tasks not started yet for which ``waited`` says they waited too
        long (reporter, holding ``cond``), each marked ``handed_back`` with the
        ``OVERDUE`` release as its outcome for the writer. Chosen under the lock
        ``begin`` marks the start under, so a task a handler thread takes meanwhile
        is either run or released, never both."""
        with self._decided:
            due = [
                t
                for t in tasks.values()
                if not t.started and t.outcome is None and not t.ctx.lost.is_set() and waited(t)
            ]
            for task in due:
                task.handed_back = True
                task.outcome = OVERDUE
        return due

    def returned(self, task: Task, outcome: Any) -> bool:
        """The handler of ``task`` is done with ``outcome``: True if it is to be
        written; False if the task had timed out (the outcome is discarded)."""
        with self._decided:
            task.returned = True
            if not task.timed_out:
                task.outcome = outcome
                if not task.handed_back:
                    return True
        with self.cond:
            was_stuck = task in self.stuck
            self.stuck.discard(task)
            self.cond.notify_all()  # the claimer may use the slot again
        if not task.timed_out:  # handed back at a stop: the writer discards it
            if was_stuck:
                self.report()
            return True
        late = time.monotonic() - task.timeout_at
        if task.ctx.cancelled.is_set():
            log_job(
                self.queue, logging.WARNING, task, "cancelled handler returned %.1fs later", late
            )
        else:
            log_job(
                self.queue,
                logging.WARNING,
                task,
                "handler returned %.1fs after its timeout of %gs: outcome discarded",
                late,
                task.limit or 0.0,
            )
        if was_stuck:
            self.report()
        return False

    def expire(self, tasks: Mapping[Any, Task], now: float) -> list[Task]:
        """The running tasks whose time is up, each given its timeout outcome (reporter)."""
        if now < self.next_at:
            return []
        with self.cond, self._decided:
            due = [
                t
                for t in tasks.values()
                if t.timeout_at <= now and t.outcome is None and not t.ctx.lost.is_set()
            ]
            for task in due:
                task.timed_out = True
                task.given_up = "timeout"
                task.outcome = decide(HandlerTimeout(task.limit or 0.0))
                task.interrupt()
            self.next_at = min(
                (t.timeout_at for t in tasks.values() if t.outcome is None), default=math.inf
            )
        for task in due:
            log_job(
                self.queue,
                logging.WARNING,
                task,
                "handler passed its timeout of %gs: failing the attempt; an async def "
                "handler is cancelled, a thread cannot be killed and keeps its slot "
                "until it returns",
                task.limit or 0.0,
            )
        return due

    def cancelled(self, tasks: Mapping[Any, Task], now: float) -> list[Task]:
        """The running tasks a heartbeat found cancelled (``ctx.cancelled``), handled
        as a timeout that passed now: what the handler does later is discarded, and
        a thread still running once the task is forgotten counts as stuck, so
        ``--processes`` stops its child as it stops one stuck past a timeout.
        Returns them for the writer, which discards them (the lease is lost)."""
        with self.cond, self._decided:
            due = [
                t
                for t in tasks.values()
                if t.ctx.cancelled.is_set() and t.started and not t.returned and not t.timed_out
            ]
            for task in due:
                task.timed_out = True
                task.given_up = "cancelled"  # no timeout passed: say so when it runs on
                task.timeout_at = now
                task.outcome = decide(HandlerTimeout(0.0))
                task.interrupt()
        for task in due:
            log_job(
                self.queue,
                logging.WARNING,
                task,
                "job cancelled while its handler runs: outcome discarded; an async def "
                "handler is cancelled, a thread cannot be killed and keeps its slot "
                "until it returns",
            )
        return due

    def hand_back(self, tasks: Mapping[Any, Task]) -> tuple[list[Task], list[Task]]:
        """Past the shutdown grace (reporter, holding ``cond``): the held tasks still
        running, each marked ``handed_back`` and lost (what its handler returns
        later is discarded), and those with an outcome to write (the handler
        returned, the task timed out or never started). Chosen under the lock
        ``returned`` sets the outcome under, so a handler returning meanwhile is
        in one list, never both: released and also completed, or neither."""
        with self._decided:
            running, done = past_grace(tasks.values(), lambda t: t.outcome is not None)
            for task in running:
                task.handed_back = True  # counted released, not lost, when it returns
                task.given_up = "stop"
                task.ctx.lost.set()
                task.interrupt()
        return running, done

    def settled(self, task: Task) -> bool:
        """``task`` was written (or discarded) and forgotten: a timed-out one whose
        thread still runs becomes stuck, and so does one handed back at a stop
        while it ran (its thread holds a slot, in the next run() too). Call
        holding ``cond``; True if the stuck count changed (then call ``report``
        once the lock is let go)."""
        running = task.started and not task.returned
        if not (task.timed_out or (task.handed_back and running)):
            return False
        task.ctx.lost.set()  # current_job().lost: the handler may notice and return
        with self._decided:  # returned() decides under it whether it saw the task stuck
            if task.returned:
                return False
            self.stuck.add(task)
        return True

    def report(self) -> None:
        """Tell ``on_stuck`` how many threads are stuck now (after a change; not
        holding ``cond``). Counted and told under one lock, so the hook hears
        the changes in order."""
        with self._told:
            with self.cond:
                why = Counter(t.given_up for t in self.stuck)
            self._tell(why)

    def _tell(self, why: Counter[str]) -> None:
        """Say how many threads run on and why each was given up on (the log
        line, the liveness verdict), and tell ``on_stuck`` how many."""
        HEALTH.stuck(self, why)
        count = sum(why.values())
        if count:
            log_job(self.queue, logging.WARNING, None, "%s", stuck_text(why))
        if self.on_stuck is not None:
            try:
                self.on_stuck(count)
            except Exception:  # a broken hook must not stop the worker
                logging.getLogger("leaseq.worker").exception("on_stuck hook failed")
