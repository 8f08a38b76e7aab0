"""The worker core: one engine that both ``leaseq.Worker`` and ``leaseq.aio.Worker`` drive.

docs/workers.md, "The worker loop". Three kinds of thread share one table of
held leases (``leaseq.work.held``): the **claimer** claims as
``Prefetch.plan`` says and blocks on the queue's wake list when nothing is
there; ``concurrency`` **handler threads** run the handler, one job each;
the thread that called ``run`` is the **reporter**: it writes outcomes
(``leaseq.work.writes``, completions batched), extends leases every ``ttl /
3`` (``leaseq.work.heartbeat``), does the chores (``leaseq.work.chores``)
and drives shutdown. Only the reporter writes outcomes, so a lease a
heartbeat found lost is never completed or failed by this worker: its
outcome is discarded.

The two workers differ only in where coroutines run. An ``async def``
handler runs on an event loop of its handler thread under ``leaseq.Worker``,
and on the caller's loop under ``aio.Worker`` (``loop``), whose ``aio``
queue the core then calls through ``leaseq.work.loop_queue``. Either way
its handler thread waits for it, so ``concurrency`` counts both kinds, and
either way a lease lost, a timeout or a stop past its grace cancels it
(``leaseq.work.on_loop``); a plain handler's thread cannot be stopped and
is told through ``current_job()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import queue as queue_mod
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from leaseq.errors import LeaseqError
from leaseq.handler import JobContext, _set_current, as_handler
from leaseq.observe.health import HEALTH
from leaseq.observe.observer import JobObserver, installed
from leaseq.observe.tracing import JobTracer
from leaseq.protocols import members as members_of
from leaseq.types import Lease
from leaseq.work import signals as _signals
from leaseq.work.chores import Chores, leave, reap
from leaseq.work.claims import Prefetch, held_back, held_wait, log_handed_back
from leaseq.work.heartbeat import StartReports, extend_due
from leaseq.work.held import HeldTable, Task
from leaseq.work.job_runs import JobRuns
from leaseq.work.log import log_job, log_started, log_stopped
from leaseq.work.loop_slots import LoopSlots
from leaseq.work.on_loop import run_handler
from leaseq.work.outage import Backoff, Outage, error_kind, log_fatal
from leaseq.work.outcomes import check_worker, result_encoder
from leaseq.work.shutdown import may_end
from leaseq.work.timeouts import Timeouts
from leaseq.work.turns import OneAtATime
from leaseq.work.writes import OutcomeWriter, gather, unstarted

__all__ = ["Engine"]

logger = logging.getLogger("leaseq.worker")

Inbox = queue_mod.SimpleQueue[Task | None]
"""The handler threads' queue of leases to run, and the reporter's of those run."""

COUNTS = ("succeeded", "failed", "dead", "released", "suspended", "lost")
"""A worker's ``counts``, by outcome."""

MAX_IDLE_WAIT = 5.0
"""Longest single block on the wake list: a lost wake-up only delays a job this much."""


class Engine:
    """The worker core over ``queue`` (see the module doc; the options are
    ``leaseq.Worker``'s). ``calls``: what the core calls for ``queue`` and
    ``members`` for its queues (default: themselves; ``aio.Worker`` gives
    ``LoopQueue`` faces). ``loop``: where ``async def`` handlers run (None: an
    event loop of each handler thread)."""

    def __init__(
        self,
        served: Any,
        handler: Any,
        *,
        calls: Any = None,
        members: tuple[Any, ...] | None = None,
        concurrency: int = 4,
        ttl: float = 30.0,
        prefetch: int | None = None,
        grace: float = 30.0,
        reap_interval: float = 10.0,
        worker_id: str | None = None,
        handle_signals: bool = True,
        metrics: JobObserver | None = None,
        trace_parent: str = "link",
        timeout: float | None = None,
        on_stuck: Callable[[int], None] | None = None,
    ) -> None:
        handler = as_handler(handler)  # a dict of handlers by kind runs as one
        check_worker(handler, concurrency, ttl, grace, reap_interval, prefetch, timeout)
        self._tracer = JobTracer.make(served.name, worker_id or served.worker_id, trace_parent)
        """Spans for each job (``leaseq.observe.tracing``); None without opentelemetry."""
        self.queue = served
        direct = served if calls is None else calls  # a handler's own calls go straight there
        self._calls = OneAtATime(direct)  # the core's: claims, outcomes, beats (work.turns)
        self._members = members_of(served) if members is None else members
        self._report = getattr(direct, "progress", None)  # current_job().progress(value)
        self._aqueue = None if calls is None else served  # aio.Worker's: what astep awaits
        self.loop: asyncio.AbstractEventLoop | None = None
        """Where ``async def`` handlers run (None: each handler thread's own loop)."""
        self._slots: LoopSlots | None = None
        self.handler, self.concurrency, self.ttl = handler, concurrency, float(ttl)
        self.prefetch, self.grace, self.reap_interval = prefetch, float(grace), float(reap_interval)
        self.worker_id, self.handle_signals = worker_id or served.worker_id, handle_signals
        self.metrics = metrics if metrics is not None else installed()
        """Worker-local figures (``leaseq.observe.worker_metrics``); None records nothing."""
        if self.metrics is not None:
            self.metrics.slots(served.name, concurrency)
        self.beat_every = self.ttl / 3
        self.counts = dict.fromkeys(COUNTS, 0)
        """Outcomes this worker wrote (or, for ``lost``, discarded) since it was made."""
        self._cond = threading.Condition(threading.RLock())
        self._claim_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._held = HeldTable(self._cond)
        """The leases held (``leaseq.work.held``), emptied by each run."""
        self._writer = OutcomeWriter(self._calls, self.counts, self._held.holds, self._settle)
        self.starts = StartReports(self._calls, self.ttl)
        self._outage = Outage(served.name)
        self.timeout = None if timeout is None else float(timeout)
        self._timeouts = Timeouts(
            served.name, self._cond, self.timeout, lambda: self._done.put(None), on_stuck
        )
        encode = result_encoder(served)
        self.runs = JobRuns(
            served.name, self.ttl, self.metrics, self._tracer, encode, self._timeouts
        )
        self._clear_stop()
        self._reset()

    def _clear_stop(self) -> None:
        # Not part of _reset: a stop() that lands before run() has set up must hold.
        self._stopping = False
        self._hard = False
        self._stop_at = 0.0
        self._fatal: LeaseqError | None = None
        self.ending_at = math.inf
        """When a stop gives up on running handlers (``time.monotonic()`` seconds):
        ``grace`` after it, at once for a hard one; ``inf`` until a stop."""

    def _reset(self) -> None:
        self._held.reset()
        self._work: Inbox = queue_mod.SimpleQueue()
        self._done: Inbox = queue_mod.SimpleQueue()
        self._claimer_done = False
        self._carried: set[Task] = set()
        self._wake = threading.Event()
        self._prefetch = Prefetch(self.concurrency, self.prefetch, time.monotonic(), ttl=self.ttl)
        """Most leases held at once (``limit``); adaptive, it moves with the job rate."""
        self._timeouts.reset()

    def __repr__(self) -> str:
        return f"Worker({self.queue!r}, concurrency={self.concurrency}, ttl={self.ttl})"

    @property
    def limit(self) -> int:
        """Most leases held at once; with adaptive prefetch it moves with the job rate."""
        return self._prefetch.limit

    # -- public ------------------------------------------------------------

    def stop(self, now: bool = False) -> None:
        """Stop claiming; in-flight jobs get ``grace`` seconds (none if ``now``), then
        are released. Safe from a signal handler and from any thread. A stop before
        ``run()`` makes that run return at once; each ``run()`` consumes it."""
        with self._cond:
            if self._stopping:
                now = True
            if not self._stopping:
                self._stop_at = time.monotonic()
            self._stopping = True
            self._hard = self._hard or now
            at = time.monotonic() if self._hard else self._stop_at + self.grace
            self.ending_at = min(self.ending_at, at)
            self._cond.notify_all()
        self._wake.set()
        self._done.put(None)  # SimpleQueue.put is reentrant: fine in a signal handler

    def run(self, burst: bool = False) -> None:
        """Process jobs until ``stop()`` (or SIGTERM/SIGINT when run in the main thread;
        a second signal stops at once). ``burst``: return once nothing is pending or due
        and nothing is in flight (jobs scheduled for later do not hold it).

        Raises RuntimeError if this worker is already running (one run at a time),
        and the fatal leaseq error that ended it, if one did.
        """
        if not self._run_lock.acquire(blocking=False):
            raise RuntimeError(f"{self!r} is already running: one run() at a time")
        try:
            self._run(burst)
        finally:
            fatal = self._fatal
            self._clear_stop()
            self._run_lock.release()
        if fatal is not None:
            raise fatal

    def _run(self, burst: bool) -> None:
        self._reset()
        if self._stopping:  # stop() came first: the reporter need not wait to see it
            self._done.put(None)
        old = _signals.install(self.on_signal, self.handle_signals)
        log_started(self.queue.name, self.worker_id, self.concurrency, self.ttl, burst)
        HEALTH.running(self)
        # Each thread is bound to this run's queues: a handler still running after a
        # hard stop must never pick up work from a later run().
        self._carried = set(self._timeouts.stuck)  # see _may_take
        self._slots = slots = LoopSlots.for_run(self, self._slots, self._work, self._done)
        threads = [
            threading.Thread(
                target=self._handler_loop,
                args=(self._work, self._done, i),
                name=f"leaseq-handler-{i}",
                daemon=True,
            )
            for i in range(0 if slots else self.concurrency)
        ]
        claimer = threading.Thread(
            target=self._claim_loop, args=(burst,), name="leaseq-claimer", daemon=True
        )
        for t in (*threads, claimer):
            t.start()
        try:
            self._report_loop()
        finally:
            for _ in threads:
                self._work.put(None)
            self._join_claimer(claimer)
            if not self._timeouts.stuck:  # every handler returned: their threads end now
                for t in threads:
                    t.join(1.0)
            leave(self._calls, self.queue, self.worker_id)
            _signals.restore(old)
            HEALTH.stopped(self)
            log_stopped(self.queue.name, self.worker_id, self.counts)

    def _join_claimer(self, claimer: threading.Thread) -> None:
        """Let the claimer finish before run() returns, so no thread of this run
        still talks to Redis afterwards (the caller may close its client).

        An idle claimer sits in a BLPOP of up to MAX_IDLE_WAIT seconds: a token
        pushed to the wake list ends that wait at once (if another worker's
        BLPOP takes it instead, that worker just finds nothing to claim).
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._wake.set()
        if not claimer.is_alive():
            return
        with contextlib.suppress(LeaseqError):  # Redis down: the claimer's call fails
            self._calls.nudge()
        claimer.join(MAX_IDLE_WAIT + 1.0)

    # -- signals -----------------------------------------------------------

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """A stop signal (SIGTERM, SIGINT): stop, at once if a stop is under way."""
        second = self._stopping
        self._log(logging.WARNING, None, "%s", _signals.stop_line(signum, second, self.grace))
        self.stop(now=second)

    # -- the claimer thread ---------------------------------------------------

    def _claim_loop(self, burst: bool) -> None:
        backoff = Backoff()
        while True:
            planned = self._next_claim()
            if planned is None:
                return
            want, idle, gen = planned
            try:
                with self._claim_lock:
                    if self._stopping:
                        return
                    # Nothing marked at claim (started=want): a spare is marked by
                    # its first heartbeat if it still waits (heartbeat.extend_due).
                    leases, wait = self._calls.claim_now(want, self.ttl, self.worker_id, want)
                    if not self._admit(leases, idle):
                        self._writer.hand_back(leases)
                        return
                backoff.reset()
                self._outage.ok("claim")
                if not leases and not self._idle(burst, gen, wait):
                    return
            except LeaseqError as exc:
                if error_kind(exc) != "transient":
                    self._end_run(exc)
                    return
                self._wake.wait(self._outage.failed("claim", exc, backoff))
            except Exception:  # a bug must not kill the claimer silently
                logger.exception("queue=%s job=- attempt=- claim loop error", self.queue.name)
                self._wake.wait(backoff.next())

    def _next_claim(self) -> tuple[int, int, int] | None:
        """Wait until ``Prefetch.plan`` has room for a claim: its size, the slots
        whose leases start at once, and the settle count it was planned at
        (None once stopping)."""
        with self._cond:
            self._prefetch.adapt(self._held.finished, time.monotonic())
            while not self._stopping:
                busy = self._busy()
                plan = self._prefetch.plan(busy, self.concurrency - busy)
                if plan is not None:
                    return plan[0], plan[1], self._held.gen
                self._cond.wait()
                self._prefetch.adapt(self._held.finished, time.monotonic())
            return None

    def _context(self, lease: Lease) -> JobContext:
        return JobContext(lease, report=self._report, queue=self._calls.calls, aqueue=self._aqueue)

    def _idle(self, burst: bool, gen: int, wait: float | None) -> bool:
        """After a claim that got nothing: wait for a wake-up (at most as long as the
        claim says nothing changes by itself); False once the claimer is done."""
        if burst:
            return self._burst_wait(gen, wait)
        if self._stopping:
            # stop() nudges the wake list after it sets the flag; a claim
            # that ran in between may have cleared that token (an empty
            # queue's claim deletes the list), so look before blocking.
            return False
        self._calls.wait_for_wake(min(MAX_IDLE_WAIT, MAX_IDLE_WAIT if wait is None else wait))
        return True

    def _burst_wait(self, gen: int, wait: float | None) -> bool:
        """A burst run's claim got nothing: False (the run is done) once nothing is
        held, nothing settled since the claim and no limit holds pending jobs back."""
        with self._cond:
            if not self._may_end() or gen != self._held.gen:
                settled = self._settled_since(gen)
                self._cond.wait_for(lambda: settled() or self._may_end(), 1.0)
                return True
        if held_back(self._members):  # a limit holds pending jobs: not done yet
            self._wake.wait(held_wait(wait))
            return True
        with self._cond:
            if self._may_end() and gen == self._held.gen:
                self._claimer_done = True
                self._done.put(None)
                return False
        return True

    def _busy(self) -> int:
        """Leases held plus threads stuck past a timeout (call holding ``_cond``)."""
        return len(self._held.tasks) + len(self._timeouts.stuck)

    def _may_end(self) -> bool:
        """Whether run() may end now (``may_end``; call holding ``_cond``)."""
        return may_end(len(self._held.tasks), len(self._timeouts.stuck))

    def _settled_since(self, gen: int) -> Callable[[], bool]:
        return lambda: self._held.gen != gen or self._stopping

    def _end_run(self, exc: LeaseqError) -> None:
        """A leaseq error that retrying will not cure: stop now and let run() raise it."""
        with self._cond:
            first, self._fatal = self._fatal is None, self._fatal or exc
        if first:  # the claimer and the reporter may both meet it: one line
            log_fatal(self.queue.name, exc)
        self.stop(now=True)

    def _admit(self, leases: list[Lease], idle: int) -> bool:
        """Hand ``leases`` to the handler threads; False (nothing admitted) once
        stopping — the handler threads may be gone, so the caller hands them back."""
        if not leases:
            return True
        now = time.monotonic()
        beat = now + self.beat_every
        tasks = [
            Task(lease, self._context(lease), beat, prefetched=i >= idle, since=now)
            for i, lease in enumerate(leases)
        ]
        with self._cond:
            if self._stopping:
                return False
            sooner = self._held.add(tasks, beat)
        if sooner:  # the reporter may be asleep until a later time: wake it to re-plan
            self._done.put(None)
        for task in tasks:
            self._work.put(task)
        if self._slots is not None:
            self._slots.kick()
        return True

    # -- handler threads -------------------------------------------------------

    def _handler_loop(self, work: Inbox, done: Inbox, slot: int) -> None:
        loop: asyncio.AbstractEventLoop | None = None  # made for the first async handler
        try:
            while True:
                if self._carried:  # rare: see _may_take
                    with self._cond:
                        self._cond.wait_for(lambda: self._may_take(slot))
                task = work.get()
                if task is None:
                    return
                if self.begin(task, done):
                    loop = self._run_one(task, done, loop)
        finally:
            if loop is not None:
                loop.close()

    def _may_take(self, slot: int) -> bool:
        """Threads of an earlier run still running (handed back at a hard stop) hold
        their slots: until they return, as many of this run's threads wait."""
        return self._stopping or slot < self.concurrency - len(self._carried & self._timeouts.stuck)

    def begin(self, task: Task, done: Inbox) -> bool:
        """A handler thread took ``task``: True to run it; False if it went back
        unstarted (the worker is stopping, or the lease is lost) or was handed
        back while it waited (``Timeouts.begin``)."""
        timeouts = self._timeouts
        release = self._stopping or task.ctx.lost.is_set()
        if not timeouts.begin(task, release):  # handed back while it waited: done
            return False
        if release:  # claimed but not started: hand it back now
            done.put(task)
            return False
        if timeouts.default is not None or task.lease.timeout is not None:
            timeouts.arm(task)
        if logger.isEnabledFor(logging.DEBUG):
            self._log(logging.DEBUG, task, "started")
        return True

    def _run_one(
        self, task: Task, done: Inbox, loop: asyncio.AbstractEventLoop | None
    ) -> asyncio.AbstractEventLoop | None:
        """Run ``task``'s handler in this handler thread and ``finish`` it; returns
        this thread's event loop, if an async handler needed one."""
        _set_current(task.ctx)
        raised: BaseException | None = None
        value: Any = None
        told = self.runs.told(task)
        try:
            if task.prefetched:
                self.starts.gate(task)  # a marked spare's start is recorded first
            task.ctx.raise_if_lost()  # lost meanwhile: not run; its outcome is not written
            value = self.handler(task.ctx.lease)
            if value is not None and inspect.isawaitable(value):  # an async def handler
                if self.loop is None:  # leaseq.Worker: a loop of this thread's, kept
                    loop = loop or asyncio.new_event_loop()
                elif task.lease.attempt > 1:  # on aio.Worker's loop, sleep() reads no I/O
                    try:
                        task.ctx._steps = self._calls.recorded_steps(task.lease)
                    except LeaseqError as exc:  # read again by astep; a sleep raises it
                        task.ctx._unread = exc
                on = self.loop or loop
                assert on is not None
                value = run_handler(value, task.ctx, on, self.loop is None, task.on_interrupt)
        except BaseException as exc:  # SystemExit in a thread would hang the job
            raised = exc
        finally:
            _set_current(None)
        self.runs.finish(task, done, raised, value, told)
        return loop

    # -- the reporter (the thread that called run) -------------------------------

    def _report_loop(self) -> None:
        backoff = Backoff()
        unwritten: list[Task] = []
        chores = Chores(self.reap_interval, self.ttl, time.monotonic(), spread=True)
        retry_at = 0.0
        while True:
            now = time.monotonic()
            timeout = min(
                self._held.next_beat_at, chores.next_reap, chores.next_register, 1.0 + now
            )
            timeout = min(timeout, self._timeouts.next_at) - now
            if unwritten:
                timeout = min(timeout, retry_at - now)
            self._drain(unwritten, max(timeout, 0.0005))
            now = time.monotonic()
            if now >= retry_at:
                retry_at = self._report_pass(unwritten, chores, backoff, now)
            if self._stopping and self._shutdown_step(unwritten):
                return
            if self._claimer_done and not self._held.tasks and not unwritten:
                return

    def _report_pass(
        self, unwritten: list[Task], chores: Chores, backoff: Backoff, now: float
    ) -> float:
        """One pass of the reporter's calls: outcomes, heartbeats, chores. Returns
        when to try again after a transient error (0.0: at once)."""
        try:
            unwritten += self._timeouts.expire(self._held.tasks, now)
            self._writer.write(unwritten)
            self._writer.report_lost(self.metrics)
            if now >= self._held.next_beat_at:
                self._heartbeat(now)
                unwritten += self._timeouts.cancelled(self._held.tasks, now)
                unwritten += self._overdue(now)
            if chores.reap(now):
                reap(self._calls, self.queue.name)
            if chores.register(now):
                self._register(chores)
                chores.registered(now)
            if chores.tick(now, self.queue):
                self._calls.tick()
            backoff.reset()
            self._outage.ok("redis call")
        except LeaseqError as exc:
            if error_kind(exc) == "transient":
                return time.monotonic() + self._outage.failed("redis call", exc, backoff)
            self._end_run(exc)
        return 0.0

    def _drain(self, into: list[Task], timeout: float) -> None:
        others = len(self._held.tasks) > len(into) + 1 and not self._stopping
        gather(self._done, into, timeout, linger=others)

    def _shutdown_step(self, unwritten: list[Task]) -> bool:
        """True once every held lease is settled (or given up) and run() may return."""
        unwritten += unstarted(self._work)  # back now, not after the running ones
        if not (self._hard or time.monotonic() - self._stop_at >= self.grace):
            with self._cond:
                return self._may_end() and not unwritten
        # Out of time: hand back what is still running; its outcome will be discarded.
        # A handler that returned first is not running: its outcome is written, though
        # it may not have reached the done queue yet (set on the task, not put), so
        # the held tasks are read here, not the queue. (Wait briefly for a claim in
        # flight, so no lease arrives after we are gone.)
        got = self._claim_lock.acquire(timeout=2.0)
        try:
            with self._cond:
                running, finished = self._timeouts.hand_back(self._held.tasks)
        finally:
            if got:
                self._claim_lock.release()
        self._writer.release_running(running)
        self._drain(unwritten, 0.0005)  # handed-back outcomes that landed: discarded
        queued = set(unwritten)
        unwritten += [t for t in finished if t not in queued]
        try:  # tried even so (one call: the first failure ends it), as a finished
            # job not written runs again
            self._writer.write(unwritten)
        except LeaseqError as exc:  # their leases simply expire and are reaped
            self._log(logging.WARNING, None, "outcomes not written at shutdown: %s", exc)
        return True

    def _overdue(self, now: float) -> list[Task]:
        """Spares that waited too long for a slot (``Prefetch.overdue``), to release
        now so another worker may run them; the claimer holds no spares until a
        slot frees. Checked at each heartbeat: a wait is bounded to within ttl / 3."""
        with self._cond:
            prefetch = self._prefetch
            due = self._timeouts.overdue(self._held.tasks, lambda t: prefetch.overdue(t.since, now))
            if due:
                prefetch.handed_back()
        if due:
            log_handed_back(self.queue.name, len(due), prefetch.max_wait)
        return due

    def _settle(self, tasks: list[Task]) -> None:
        stuck = False
        with self._cond:
            for task in self._held.forget(tasks):  # the rare case: settled() says if stuck
                stuck = self._timeouts.settled(task) or stuck
        if stuck:
            self._timeouts.report()

    def _heartbeat(self, now: float) -> None:
        due = self._held.beat_due(now)
        try:
            extend_due(self._calls, due, now, self.ttl, self.beat_every)
        finally:
            self._held.plan_beats()

    def _register(self, chores: Chores) -> None:
        """Refresh this worker's row in the queue's registry (``leaseq.store.registry``)."""
        if hasattr(self.queue, "register_worker"):
            c, running = self.counts, len(self._held.tasks)
            done = c["succeeded"] + c["failed"] + c["dead"]
            row = chores.row(self.concurrency, done, running)
            self._calls.register_worker(self.worker_id, **row)

    def _log(self, level: int, task: Task | None, msg: str, *args: Any) -> None:
        log_job(self.queue.name, level, task, msg, *args)
