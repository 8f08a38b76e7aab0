"""``leaseq.aio.Worker``: runs a handler on claimed jobs, as asyncio tasks.

Concurrency is the number of handler tasks in flight. One heartbeat task
extends every running job's lease every ``ttl / 3`` seconds, all in one
call; if an extend finds a lease gone (reaped after a stall, or taken over),
that job's handler task is cancelled, because its outcome would be refused
anyway. What a
handler's return value or exception does to the job is decided by
``leaseq.work.outcomes.decide``, the very policy ``leaseq.Worker`` uses.

An ``async def`` handler runs on the loop. A plain ``def`` handler is run in
a thread of the worker's own pool (``concurrency`` threads), so it never
blocks the loop; ``leaseq.current_job()`` works inside it as in the threaded
worker. Cancelling such a job (lease lost, stop past ``grace``) cannot stop
its thread: the job is released (or left to its new holder), ``current_job().lost``
is set, and what the thread returns later is discarded; a lost job's slot stays
busy until its thread returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from leaseq.errors import LeaseLost, LeaseqError, ServerUnavailable
from leaseq.handler import Handlers, JobContext, as_handler
from leaseq.observe.observer import JobObserver, installed
from leaseq.observe.tracing import JobTracer
from leaseq.protocols import AsyncQueueLike
from leaseq.queue_set import members, queue_set
from leaseq.store.schedules import TICK_INTERVAL
from leaseq.types import Lease
from leaseq.work.async_jobs import AsyncJobs, Held
from leaseq.work.chores import Chores
from leaseq.work.claims import Prefetch, held_back_async, held_wait, log_handed_back
from leaseq.work.heartbeat import heard
from leaseq.work.log import log_job, log_started, log_stopped
from leaseq.work.loop_calls import cancel_lost, cut_off, soon
from leaseq.work.outage import Backoff, Outage, error_kind, log_fatal
from leaseq.work.outcomes import check_worker, result_encoder
from leaseq.work.shutdown import may_end, past_grace

__all__ = ["AsyncHandler", "Worker"]

AsyncHandler = Callable[[Lease], Any]
"""An ``async def`` handler, or a plain one (run in a thread)."""

_IDLE_SLICE = 5.0
"""Longest idle wait between claims when nothing wakes the worker."""
_CLAIM_WAIT = 5.0
"""Longest a cancelled run() waits for its claim in flight, to release its leases."""
_CLEANUP_WAIT = 5.0
"""Longest run()'s cleanup may take (releases, the registry) once it ends or is
cancelled: a server that stops answering must not hold run() forever."""
_WRITE_WAIT = 5.0
"""Longest a stop past its grace waits for the outcomes of handlers that returned
to be written (a server that does not answer must not hold run() forever)."""


class Worker:
    """Claims jobs from ``queue`` and runs ``handler(lease)`` on each, ``concurrency`` at a time.

    ``ttl`` is the lease length in seconds; heartbeats extend it every
    ``ttl / 3``. ``prefetch``: leases claimed ahead of the free handler slots,
    as in ``leaseq.Worker`` (``leaseq.work.claims.Prefetch``: by default about
    50 ms of work at the rate jobs finish); they are heartbeated while they
    wait and handed back at once by ``stop()``, and a crash before they start
    spends no attempt. ``reap_interval``: seconds between full reaps of the
    expired leases of crashed workers (10, as ``leaseq.Worker``). ``grace`` is how
    long ``stop()`` lets in-flight handlers finish before cancelling them and
    releasing their jobs back to pending (one that has returned by then has its
    outcome written, ``leaseq.work.shutdown.past_grace``). ``worker_id``: the
    name in the registry and on each lease (default: the queue's). ``trace_parent``: as in
    ``leaseq.Worker`` (``leaseq.observe.tracing``). ``timeout``: seconds a handler may
    run when its job has no ``timeout`` of its own (None: no limit). Past it an
    ``async def`` handler is cancelled and the attempt fails with "timed out
    after N s" (retried or dead by the usual rules), its lease freed at once; a
    plain handler's thread cannot be cancelled: the attempt fails alike, what
    the thread returns is discarded, and its slot stays busy until it returns
    (``on_stuck(n)`` hears how many are stuck, as in ``leaseq.Worker``).
    ``queue`` may be a list of queues with ``weights`` as for ``leaseq.Worker``.
    The figures are ``leaseq.Worker``'s: ``counts`` by outcome, ``processed``, ``limit``.
    """

    def __init__(
        self,
        queue: AsyncQueueLike | Sequence[AsyncQueueLike],
        handler: AsyncHandler | Handlers,
        *,
        weights: Sequence[int] | None = None,
        concurrency: int = 4,
        ttl: float = 30.0,
        prefetch: int | None = None,
        reap_interval: float = 10.0,
        grace: float = 30.0,
        worker_id: str | None = None,
        metrics: JobObserver | None = None,
        trace_parent: str = "link",
        timeout: float | None = None,
        on_stuck: Callable[[int], None] | None = None,
    ) -> None:
        handler = as_handler(handler)  # a dict of handlers by kind: picked per job
        served: AsyncQueueLike = queue_set(queue, weights, asynchronous=True)  # several: a QueueSet
        check_worker(handler, concurrency, ttl, grace, reap_interval, prefetch, timeout)
        self.prefetch = prefetch
        self.timeout = None if timeout is None else float(timeout)
        self.worker_id = worker_id or served.worker_id
        self._tracer = JobTracer.make(served.name, self.worker_id, trace_parent)
        """Spans for each job (``leaseq.observe.tracing``); None without opentelemetry."""
        self.queue = served
        self.handler = handler
        self.concurrency = concurrency
        self.ttl = float(ttl)
        self.reap_interval = float(reap_interval)
        self.grace = float(grace)
        self.metrics = metrics if metrics is not None else installed()
        """Worker-local figures (``leaseq.observe.worker_metrics``); None records nothing."""
        if self.metrics is not None:
            self.metrics.slots(served.name, concurrency)
        self._outage = Outage(served.name)
        self._jobs = AsyncJobs(
            served,
            handler,
            concurrency=concurrency,
            ttl=self.ttl,
            timeout=self.timeout,
            metrics=self.metrics,
            tracer=self._tracer,
            encode=result_encoder(served),
            outage=self._outage,
            end=self._end,
            on_stuck=on_stuck,
            freed=self._freed,
        )
        self._held()
        self._prefetch = Prefetch(concurrency, prefetch, 0.0)  # made afresh by each run()
        self._stop = asyncio.Event()
        self._now = asyncio.Event()
        """A hard stop (``stop(now=True)``, or a second stop): no grace."""
        self._wake: asyncio.Future[bool] | None = None
        """This run's wait on the wake list, kept across passes (``_idle``)."""
        self._fatal: LeaseqError | None = None
        self._running = False

    def _held(self) -> None:
        """The tables of the leases held, empty (each run() leaves them so)."""
        self._tasks: dict[asyncio.Task[None], Held] = {}
        """The job task of each running lease (``AsyncJobs.process``), until its
        outcome is written."""
        self._busy = 0
        """Handler slots taken (``Held.slot``): jobs whose handler has not returned."""
        self._slot_freed: asyncio.Future[None] | None = None
        """What ``_idle`` waits on for a slot to free, if it waits."""
        self._spare: deque[Held] = deque()
        """Prefetched leases, in claim order, waiting for a free handler slot."""
        self._handing: deque[Held] = deque()
        """Overdue spares on their way back (``_release_overdue``), each until its
        release has answered: a run() that ends meanwhile releases them too."""
        self._in_flight: asyncio.Future[tuple[list[Lease], float | None]] | None = None
        """The claim call in flight when run() was cancelled (``_claim``)."""
        self._serving = False
        """run()'s loop is taking work: a freed slot may start a spare."""

    @property
    def processed(self) -> int:
        """Jobs whose outcome this worker wrote: completed, failed (to retry) or dead."""
        return self._jobs.processed

    @property
    def counts(self) -> dict[str, int]:
        """Outcomes this worker wrote (or, for ``lost``, discarded) since it was made:
        ``succeeded``, ``failed`` (to retry), ``dead``, ``released``, ``lost``."""
        return self._jobs.counts

    @property
    def limit(self) -> int:
        """Most leases held at once; with adaptive prefetch it moves with the job rate."""
        return self._prefetch.limit

    def __repr__(self) -> str:
        return f"aio.Worker({self.queue!r}, concurrency={self.concurrency}, ttl={self.ttl})"

    def stop(self, now: bool = False) -> None:
        """Ask ``run`` to stop claiming and return once in-flight jobs are done
        (or after ``grace`` seconds, releasing the rest; at once with ``now``, or
        at a second stop). Call it on the worker's loop (a signal handler installed
        with ``loop.add_signal_handler`` is). A stop before ``run()`` makes that
        run return at once; each ``run()`` consumes it."""
        if now or self._stop.is_set():
            self._now.set()
        self._stop.set()

    async def run(self, *, burst: bool = False) -> int:
        """Work until ``stop()``; with ``burst=True`` return once nothing is pending
        or due and nothing is in flight (future retries do not hold it).

        Returns how many jobs this worker processed. Transient Redis errors
        (``ServerUnavailable`` and subclasses: an outage, a failover) are retried
        with backoff; any other leaseq error of the worker's own calls ends the
        run with that error, its jobs released. Handler errors are job failures.
        Raises RuntimeError if this worker is already running.
        """
        if self._running:
            raise RuntimeError(f"{self!r} is already running: one run() at a time")
        self._running = True
        try:
            processed = await self._run(burst)
        finally:
            fatal, self._fatal = self._fatal, None
            self._stop.clear()
            self._now.clear()
            self._running = False
            self._jobs.close()
            log_stopped(self.queue.name, self.worker_id, self.counts)
        if fatal is not None:
            raise fatal
        return processed

    async def _run(self, burst: bool) -> int:
        log_started(self.queue.name, self.worker_id, self.concurrency, self.ttl, burst)
        loop = asyncio.get_running_loop()
        stop_wait = asyncio.ensure_future(self._stop.wait())
        beater = asyncio.ensure_future(self._heartbeat())
        self._wake = None
        chores = Chores(self.reap_interval, self.ttl, loop.time(), spread=False)
        self._prefetch = Prefetch(
            self.concurrency, self.prefetch, loop.time(), self.processed, ttl=self.ttl
        )
        backoff = Backoff()
        self._serving = True
        self._jobs.orphan_returned = lambda: soon(loop, self._freed, 0)
        try:
            me = asyncio.current_task()
            while not self._stop.is_set():
                if cancel_lost(me):
                    raise asyncio.CancelledError
                try:
                    leases, hint, held = await self._claim_pass(chores, burst)
                    backoff.reset()
                    self._outage.ok("claim")
                except LeaseqError as exc:
                    if error_kind(exc) != "transient":
                        self._end(exc)
                        break
                    delay = self._outage.failed("claim", exc, backoff)
                    await asyncio.wait({stop_wait}, timeout=delay)
                    continue
                if (leases or self._spare) and self._free_slots() > 0:
                    continue  # there may be more right away
                if held:
                    await asyncio.wait({stop_wait}, timeout=held_wait(hint))
                    continue
                held_now = len(self._tasks) + len(self._spare)
                if burst and not leases and may_end(held_now, len(self._jobs.orphans)):
                    return self.processed
                await self._idle(chores, hint, stop_wait)
            self._serving = False
            await self._release_spare()
            if self._fatal is None:
                await self._drain()
            return self.processed
        finally:
            self._serving = False
            leftovers: list[asyncio.Future[Any]] = [stop_wait, beater, *self._tasks]
            leftovers += [self._wake] if self._wake is not None else []
            await self._unwind(leftovers, dict(self._tasks))

    async def _claim_pass(
        self, chores: Chores, burst: bool
    ) -> tuple[list[Lease], float | None, bool]:
        """The chores that are due, spares started in free slots, then a claim if
        ``Prefetch.plan`` has room, its leases started or kept as spares. Returns
        them, the claim's hint (seconds until something falls due by itself) and
        whether a burst run waits for pending jobs a limit holds back."""
        loop = asyncio.get_running_loop()
        if chores.reap(loop.time()):
            await self.queue.reap()
        if chores.tick(loop.time(), self.queue):
            await self.queue.tick()
        if chores.register(loop.time()):
            await self._register(chores)
            chores.registered(loop.time())
        free = self._start_spare()
        leases: list[Lease] = []
        hint: float | None = None
        self._prefetch.adapt(self.processed, loop.time())
        plan = self._prefetch.plan(len(self._tasks) + len(self._spare), free)
        if plan is not None:
            leases, hint = await self._claim(*plan)
            self._admit(leases, free)
        held = burst and not leases and not self._tasks and not self._spare
        held = held and await held_back_async(members(self.queue))
        return leases, hint, held

    def _admit(self, leases: list[Lease], free: int) -> None:
        """Start the first ``free`` leases; keep the rest as spares, heartbeated from
        now and started as slots free."""
        report = self._jobs.bridge() if leases else None  # one bridge serves the claim
        now = asyncio.get_running_loop().time()
        for i, lease in enumerate(leases):
            held = Held(JobContext(lease, report=report), since=now)
            if i < free:
                self._start(held)
            else:
                self._jobs.beats[id(held.ctx)] = held
                self._spare.append(held)

    async def _idle(
        self, chores: Chores, hint: float | None, stop_wait: asyncio.Future[Any]
    ) -> None:
        """Sleep until a slot frees, a job is enqueued, something falls due by
        itself, or stop() is called."""
        loop = asyncio.get_running_loop()
        self._slot_freed = freed = loop.create_future()
        # A slot freed, or a job task ended (its outcome written: room to claim).
        waiters: set[asyncio.Future[Any]] = {stop_wait, freed, *self._tasks}
        timeout = min(_IDLE_SLICE if hint is None else hint, _IDLE_SLICE, TICK_INTERVAL)
        timeout = min(timeout, chores.next_register - loop.time())
        if self._free_slots() > 0:
            if self._wake is None or self._wake.done():
                # Kept across iterations: cancelling a BLPOP costs a reconnect.
                self._wake = asyncio.ensure_future(self.queue.wait_for_wake(timeout))
                # An outage's error may land while no one looks (a claim in
                # flight) and the next pass replaces it: read it here, or
                # asyncio logs "Task exception was never retrieved".
                self._wake.add_done_callback(lambda f: f.cancelled() or f.exception())
            waiters.add(self._wake)
        await asyncio.wait(waiters, timeout=max(timeout, 0.001), return_when="FIRST_COMPLETED")
        self._slot_freed = None
        freed.cancel()
        wake = self._wake
        if wake is not None and wake.done() and not wake.cancelled():
            with contextlib.suppress(ServerUnavailable):
                wake.result()

    async def _unwind(
        self, leftovers: list[asyncio.Future[Any]], jobs: dict[asyncio.Task[None], Held]
    ) -> None:
        """Cancel what this run started and clean up (``_clean_up``), shielded: a
        second cancel (another Ctrl-C, a wait_for around the task) still lets the
        leases go back, within the cleanup's own bound, and then goes on."""
        for future in leftovers:
            future.cancel()
        cleanup = asyncio.ensure_future(self._clean_up(leftovers, jobs))
        again = False
        while not cleanup.done():
            try:
                await asyncio.shield(cleanup)
            except asyncio.CancelledError:
                again = True
        if again:
            raise asyncio.CancelledError

    async def _clean_up(
        self, leftovers: list[asyncio.Future[Any]], jobs: dict[asyncio.Task[None], Held]
    ) -> None:
        """run()'s last steps, within ``_CLEANUP_WAIT`` s whatever the server does:
        let the cancelled tasks unwind (a cancelled BLPOP drops its connection, a
        cancelled job releases its lease, or writes its outcome if its handler
        had returned), send the completions of handlers that
        have returned (``Completions.finish``) and wait for their failures on the
        wire (``AsyncJobs.failing``), then hand back the prefetched leases and
        those of a claim that was in flight, and leave the registry. On a server
        that stops answering, what is left past the bound is cut off: those leases
        expire (a prefetched one unspent) and the registry row ages out."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + _CLEANUP_WAIT
        if leftovers:
            _, late = await asyncio.wait(leftovers, timeout=_CLEANUP_WAIT)
            await cut_off(late)  # a release the server does not answer
        for task, held in jobs.items():
            if held.job is None and task.cancelled():
                # Cancelled before its first step (a spare a freed slot started just
                # as run() was cancelled): it never ran, so it goes back as a spare.
                self._busy -= 1
                self._spare.append(held)
        await self._jobs.completions.finish(max(0.0, give_up - loop.time()))
        if self._jobs.failing:  # failures on the wire: their handlers have run too
            _, late = await asyncio.wait(
                set(self._jobs.failing), timeout=max(0.0, give_up - loop.time())
            )
            await cut_off(late)
        await self._claimed_in_flight(max(0.0, min(_CLAIM_WAIT, give_up - loop.time())))
        rest = asyncio.ensure_future(self._leave())
        done, _ = await asyncio.wait({rest}, timeout=max(0.001, give_up - loop.time()))
        await cut_off({rest} - done)

    async def _leave(self) -> None:
        await self._release_spare()
        if hasattr(self.queue, "unregister_worker"):
            with contextlib.suppress(LeaseqError):  # else the row simply expires
                await self.queue.unregister_worker(self.worker_id)

    async def _claim(self, want: int, free: int) -> tuple[list[Lease], float | None]:
        """``claim_now``, shielded from run()'s cancellation. Cancelled while the call
        is in flight, the claim script may already have run: its leases would be
        this worker's, and nobody else's until they expire. So the call goes on and
        run()'s cleanup waits for it (``_claimed_in_flight``) to hand them back."""
        call = asyncio.ensure_future(
            self.queue.claim_now(want, ttl=self.ttl, worker=self.worker_id, started=free)
        )
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            self._in_flight = call
            raise

    async def _claimed_in_flight(self, timeout: float = _CLAIM_WAIT) -> None:
        """After run() was cancelled during a claim: wait (at most ``timeout`` s)
        for that claim and add its leases to the spare ones, which are released
        next. A claim that fails, or takes longer, leaves its leases (if any) to
        expire: a prefetched one unspent."""
        call, self._in_flight = self._in_flight, None
        if call is None:
            return
        done, _ = await asyncio.wait({call}, timeout=timeout)
        if not done:
            call.cancel()
            call.add_done_callback(lambda f: f.cancelled() or f.exception())
            return
        if call.cancelled() or call.exception() is not None:
            return
        leases, _ = call.result()
        for lease in leases:
            self._spare.append(Held(JobContext(lease)))

    async def _register(self, chores: Chores) -> None:
        """Refresh this worker's row in the queue's registry (``leaseq.store.registry``)."""
        if hasattr(self.queue, "register_worker"):
            held = len(self._tasks) + len(self._spare)  # running or prefetched
            await self.queue.register_worker(
                self.worker_id, **chores.row(self.concurrency, self.processed, held)
            )

    def _end(self, exc: LeaseqError) -> None:
        """A leaseq error that retrying will not cure: stop now and let run() raise it."""
        if self._fatal is None:
            self._fatal = exc
            log_fatal(self.queue.name, exc)
        self._stop.set()

    async def _drain(self) -> None:
        """Graceful stop: let handlers finish for ``grace`` s; then, by ``past_grace``,
        cancel those still running (their jobs are released) and let those that
        have returned write their outcomes, for at most ``_WRITE_WAIT`` s more.
        Cancelling every job task instead would release a job whose handler had
        returned but whose task had not resumed yet (it would run again), and cut
        off a completion on the wire (the job stays active and runs again once its
        lease expires)."""
        if not self._tasks:
            return
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.grace
        hard = asyncio.ensure_future(self._now.wait())
        try:  # until they are done, the grace is over, or a hard stop comes (a pass
            # at least: a handler that has just returned gets its task resumed)
            while True:
                left = max(0.0, give_up - loop.time())
                await asyncio.wait(
                    {hard, *self._tasks}, timeout=left, return_when="FIRST_COMPLETED"
                )
                if not self._tasks or self._now.is_set() or loop.time() >= give_up:
                    break
        finally:
            hard.cancel()
        running, _ = past_grace(self._tasks.items(), lambda item: self._jobs.returned(item[1]))
        for task, held in running:
            held.handed_back = True  # process() releases the job once its handler ends
            if held.job is None or not held.job.cancel():
                task.cancel()  # its handler is over (timed out, lost): only a thread is awaited
        if not self._tasks:
            return
        _, late = await asyncio.wait(set(self._tasks), timeout=_WRITE_WAIT)
        # A write the server does not answer (the job stays active until its lease
        # expires), or a handler that ignores its cancellation: its job task, cancelled,
        # releases the job, and on a server that does not answer that release hangs
        # too. So the wait is bounded (cut_off); run()'s cleanup cuts off what is left.
        await cut_off(late)

    def _free_slots(self) -> int:
        """Handler slots free: ``concurrency`` less the handlers running, and less the
        plain handlers' threads that run on after their job was handed back."""
        return self.concurrency - self._busy - len(self._jobs.orphans)

    def _freed(self, taken: int = 1) -> None:
        """A handler returned (``taken`` 0: an orphan thread did): its slot takes
        the next spare at once (a handler must not wait for the run loop, which
        may be awaiting a claim), and an idle run loop wakes."""
        self._busy -= taken
        if self._serving and not self._stop.is_set():
            self._start_spare()
        waiting = self._slot_freed
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    def _start(self, held: Held) -> None:
        held.slot = True
        self._busy += 1
        task = asyncio.ensure_future(self._jobs.process(held))
        self._tasks[task] = held
        task.add_done_callback(self._finished)

    def _start_spare(self) -> int:
        """Start prefetched leases in the free handler slots; returns the slots still free."""
        free = self._free_slots()
        while free > 0 and self._spare:
            held = self._spare.popleft()
            held.report = True  # the next heartbeat tells the server it started
            self._start(held)
            free -= 1
        return free

    async def _release_spare(self) -> None:
        """At stop (or when run() is cancelled): hand the prefetched leases back at
        once (unstarted: no attempt spent). Overdue spares the heartbeat was handing
        back go too (released twice, the second is refused)."""
        self._spare.extendleft(reversed(self._handing))
        self._handing.clear()
        await self._jobs.give_back(self._spare, "prefetched")

    async def _release_overdue(self) -> None:
        """Hand back the spares that waited too long for a slot (``Prefetch.overdue``:
        every slot busy that long, hung handlers say), so another worker may run
        them; hold no spares until a slot frees. Unstarted, so no attempt is spent."""
        now = asyncio.get_running_loop().time()
        due: list[Held] = []
        while self._spare and self._prefetch.overdue(self._spare[0].since, now):
            held = self._spare.popleft()  # oldest first: claim order
            self._jobs.beats.pop(id(held.ctx), None)  # the heartbeat never extends it again
            held.ctx.lost.set()  # never ours to run again
            due.append(held)
        if not due:
            return
        self._prefetch.handed_back()
        log_handed_back(self.queue.name, len(due), self._prefetch.max_wait)
        # Each stays in _handing until its release answers: cancelled meanwhile (run()
        # ends), the heartbeat leaves it and the rest to run()'s cleanup to release.
        self._handing.extend(due)
        failed = await self._jobs.give_back(self._handing, "overdue spare")
        if failed is not None and error_kind(failed) == "fatal":
            self._end(failed)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            # A bug in the worker itself: say so rather than lose it silently.
            log_job(self.queue.name, logging.ERROR, None, "job task failed: %r", task.exception())

    async def _heartbeat(self) -> None:
        """Every ``ttl / 3``, extend every running job's lease in one ``extend_many``
        call (one call for the worker, not one per job); a lease found lost gets its
        handler cancelled (its result would be refused anyway), and ``cancelled``
        set too when the job was cancelled. A transient error is retried sooner,
        with backoff; the leases hold ``ttl`` from their last extend meanwhile."""
        backoff = Backoff()
        every = self.ttl / 3
        delay = every
        while True:
            await asyncio.sleep(delay)
            delay = every
            await self._release_overdue()  # before the beat: it would only extend them
            beating = list(self._jobs.beats.values())
            if not beating:
                continue
            started = [held.report for held in beating]
            try:
                results = await self.queue.extend_many(
                    [held.ctx.lease for held in beating],
                    self.ttl,
                    started if any(started) else None,
                )
                backoff.reset()
                self._outage.ok("heartbeat")
            except LeaseqError as exc:
                kind = error_kind(exc)
                if kind == "fatal":
                    self._end(exc)
                    return
                if kind == "transient":
                    delay = min(every, self._outage.failed("heartbeat", exc, backoff))
                else:  # answered, with an error about one of the leases
                    self._outage.ok("heartbeat")
                    log_job(self.queue.name, logging.WARNING, None, "heartbeat: %s", exc)
                continue
            for held, result, told in zip(beating, results, started, strict=True):
                if self._jobs.beats.get(id(held.ctx)) is not held:  # finished (or timed out)
                    continue
                if isinstance(result, LeaseLost):
                    self._jobs.lost(held, result, self._spare)
                else:
                    heard(held.ctx, result)
                    held.report = held.report and not told
