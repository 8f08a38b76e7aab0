"""The asyncio worker's job runs: one task per job, as ``leaseq.aio.Worker`` drives them.

:class:`AsyncJobs` runs a claimed lease's handler (an ``async def`` one on the
loop, a plain one in a thread of its own pool), applies its time limit,
hands it back when a stop's grace runs out, drops the outcome of a lease
lost meanwhile, and writes the outcome ``decide`` makes of the rest
(completions batched, ``leaseq.work.completions``; failures one fenced call
each, retried through an outage). The decisions are the worker core's
(``decide``, ``heard``, ``past_grace``); this is how the asyncio driver
carries them out.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from leaseq.errors import AlreadyFinished, LeaseLost, LeaseqError
from leaseq.handler import JobContext, Kinds, _set_current, _set_current_task
from leaseq.observe.observer import JobObserver
from leaseq.observe.tracing import JobTracer
from leaseq.protocols import AsyncQueueLike
from leaseq.types import Lease
from leaseq.work.completions import Completions
from leaseq.work.heartbeat import heard
from leaseq.work.log import log_job, log_written
from leaseq.work.outage import Backoff, Outage, error_kind
from leaseq.work.outcomes import Encode, HandlerTimeout, Outcome, decide, job_timeout
from leaseq.work.told import Told

_COUNTED = {"complete": "succeeded", "retry": "failed", "dead": "dead"}
"""The ``counts`` entry of a replayed write, by its outcome's kind."""


def is_async_handler(handler: Any) -> bool:
    # A function, a partial of one, or an object whose __call__ is async def.
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__
    )


def run_sync(handler: Callable[[Lease], Any], ctx: JobContext) -> Any:
    _set_current(ctx)
    try:
        return handler(ctx.lease)
    except KeyboardInterrupt as exc:
        # A pool thread gets no signals: this is the handler's own, not a Ctrl-C.
        # Let out of the loop it would end the worker (as SystemExit would, _call).
        raise Exited(exc) from None
    finally:
        _set_current(None)


class Exited(Exception):
    """A handler's SystemExit (or a plain handler's KeyboardInterrupt), carried as an
    ordinary exception out of its task: the job's failure, not the worker's end."""

    def __init__(self, exit: SystemExit | KeyboardInterrupt) -> None:
        super().__init__(exit)
        self.exit = exit


@dataclass(eq=False, slots=True)
class Held:
    """A lease this worker holds: running (``job`` is its handler's future) or
    prefetched and not started yet (``job`` None)."""

    ctx: JobContext
    job: asyncio.Future[Any] | None = None
    report: bool = False
    """Prefetched, started since, and the server not told yet (the next heartbeat
    tells it: from then on a crash spends the attempt)."""
    since: float = 0.0
    """When it was claimed, the loop's clock (seconds): how long a spare has waited."""
    handed_back: bool = False
    """A stop past its grace cancelled the handler while it ran: the job is released."""
    slot: bool = False
    """It holds one of the ``concurrency`` handler slots: from its start until its
    handler has returned (and a plain one's thread too), not while its outcome
    is written, so the next job starts meanwhile."""


class AsyncJobs:
    """The running jobs of one ``aio.Worker`` and what they share: the heartbeat's
    table (``beats``), the plain handlers' pool and threads, the completions."""

    def __init__(
        self,
        queue: AsyncQueueLike,
        handler: Callable[[Lease], Any],
        *,
        concurrency: int,
        ttl: float,
        timeout: float | None,
        metrics: JobObserver | None,
        tracer: JobTracer | None,
        encode: Callable[[Lease], Encode | None],
        outage: Outage,
        end: Callable[[LeaseqError], None],
        on_stuck: Callable[[int], None] | None = None,
        freed: Callable[[], None] = lambda: None,
    ) -> None:
        self.queue, self.handler, self.concurrency = queue, handler, concurrency
        self.ttl, self.timeout, self.metrics, self.tracer = ttl, timeout, metrics, tracer
        self.encode, self.outage, self.end = encode, outage, end
        """``end(exc)``: a fatal error of a write; the worker stops with it."""
        self.is_async = is_async_handler(handler)
        self.counts = {"succeeded": 0, "failed": 0, "dead": 0, "released": 0, "lost": 0}
        """Outcomes written (or, for ``lost``, discarded) since the worker was made."""
        self.on_stuck = on_stuck
        self.freed = freed
        """Called as a job gives its handler slot back (``Held.slot``)."""
        self.orphans: set[Future[Any]] = set()
        """Pool threads still running whose job task has ended (``_orphan``)."""
        self.orphan_returned: Callable[[], None] = lambda: None
        """Called, from the pool thread, as one of ``orphans`` returns."""
        self.stuck = 0
        """Plain handlers' threads still running past their job's timeout."""
        self.completions = Completions(queue, lambda: len(self.beats), self.counts)
        self.failing: set[asyncio.Future[Any]] = set()  # fail calls of write in flight
        self.beats: dict[int, Held] = {}
        """The leases the heartbeat extends, by id() of their JobContext: every
        prefetched one, and every running job's until its outcome is written
        (or it timed out: then never again)."""
        self.pool: ThreadPoolExecutor | None = None
        self.threads: dict[int, Future[Any]] = {}
        """The pool thread of each running plain handler, by id() of its JobContext."""

    @property
    def processed(self) -> int:
        """Jobs whose outcome was written: completed, failed (to retry) or dead."""
        c = self.counts
        return c["succeeded"] + c["failed"] + c["dead"]

    def _stuck(self, change: int) -> None:
        """One more (or fewer) thread stuck past its timeout: ``on_stuck`` hears the count."""
        self.stuck += change
        if self.on_stuck is not None:
            try:
                self.on_stuck(self.stuck)
            except Exception:  # a hook's bug must not end the job's task
                logging.getLogger("leaseq.worker").exception("on_stuck hook failed")

    def _orphan(self, thread: Future[Any]) -> None:
        """A plain handler's thread runs on after its job was handed back (a stop
        past its grace, run() cancelled): it keeps a handler slot until it returns,
        in this run and the next (``orphans``), so ``concurrency`` holds."""
        self.orphans.add(thread)

        def returned(f: Future[Any]) -> None:  # in the pool thread
            self.orphans.discard(f)
            self.orphan_returned()

        thread.add_done_callback(returned)

    def _free(self, held: Held) -> None:
        if held.slot:
            held.slot = False
            self.freed()

    def close(self) -> None:
        """At the end of a run: let the pool's threads go (those running finish alone)."""
        if self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None

    async def _call(self, ctx: JobContext) -> Any:
        try:
            return await self._run_handler(ctx)
        except SystemExit as exc:
            # asyncio lets a SystemExit out of the loop: the whole worker would end,
            # releasing every lease it holds, this job's too, and a release refunds the
            # attempt, so a job that calls sys.exit would run again on every start,
            # without bound. As in the threaded worker, it is this job's failure.
            raise Exited(exc) from None

    async def _run_handler(self, ctx: JobContext) -> Any:
        handler = self.handler
        _set_current_task(ctx)  # this task's own context: current_job() in async handlers
        if isinstance(handler, Kinds):  # async or not, per kind
            handler = handler.pick(ctx.lease)  # UnknownKind: a failure, by decide()
            if is_async_handler(handler):
                return await handler(ctx.lease)
        elif self.is_async:
            return await handler(ctx.lease)
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="leaseq-aio")
        if self.tracer is None:
            thread = self.pool.submit(run_sync, handler, ctx)
        else:  # the job's span is current in the pool thread too
            thread = self.pool.submit(contextvars.copy_context().run, run_sync, handler, ctx)
        self.threads[id(ctx)] = thread
        value = await asyncio.wrap_future(thread)
        if inspect.isawaitable(value):  # a plain def that returned a coroutine
            value = await value
        return value

    async def process(self, held: Held) -> None:
        """Run one job with a heartbeat; write its outcome under its lease."""
        ctx = held.ctx
        if ctx.lost.is_set():  # a prefetched lease the heartbeat found lost: not ours to run
            return
        told = Told(self.queue.name, self.metrics, ctx.lease, self.ttl, self.tracer)
        job = asyncio.ensure_future(self._call(ctx))  # the span is current in its context
        told.detach()
        held.job = job
        self.beats[id(ctx)] = held
        limit = job_timeout(ctx.lease, self.timeout)
        cancelled = False
        try:
            try:
                finished, _ = await asyncio.wait({job}, timeout=limit)
                if held.handed_back and job.cancelled():
                    # A stop past its grace cancelled the running handler (the
                    # worker's _drain):
                    # hand the job back, as when this task itself is cancelled.
                    raise asyncio.CancelledError
                if not finished:
                    told.span_end(decide(HandlerTimeout(limit or 0.0)), None, lost=False)
                    await self._timed_out(ctx, job, limit or 0.0)
                    return
            except asyncio.CancelledError:
                if not held.handed_back and self.returned(held) and not job.done():
                    # Its thread has returned; the task that awaits it resumes next.
                    await asyncio.wait({job}, timeout=1.0)
                if held.handed_back or not job.done() or not self.returned(held):
                    # This task was cancelled (a fatal error, run() cancelled, a
                    # handler ignoring its cancellation past the grace) or its
                    # handler was (stop past its grace): hand the job back.
                    await self._hand_back(ctx, job, told)
                    raise
                # Cancelled (run() cancelled, say) after its handler had returned or
                # raised, before this task resumed: the handler has run, so its
                # outcome is written as usual (released, the job would run again;
                # run()'s cleanup waits for the write, within its bound), and then
                # the cancel goes on.
                cancelled = True
            if ctx.lost.is_set():
                await self._discard(ctx, told)
                return
            raised, outcome = self._outcome(ctx, job)
            told.finished(outcome.kind, ctx.lease)
            told.span_end(outcome, raised, lost=False)
            self._free(held)  # its handler has returned: the next job may start
            await self._write(ctx, outcome)
            if cancelled:
                raise asyncio.CancelledError
        finally:
            thread = self.threads.pop(id(ctx), None)
            if thread is not None and not thread.done():
                self._orphan(thread)
            self._free(held)
            self.beats.pop(id(ctx), None)
            told.span_end(None, None, lost=False)  # a bug of the worker's own: still end it

    def _outcome(
        self, ctx: JobContext, job: asyncio.Future[Any]
    ) -> tuple[BaseException | None, Outcome]:
        """What the handler raised (None) and the outcome ``decide`` makes of it."""
        if job.cancelled():  # the handler cancelled itself: a failure
            cancelled = asyncio.CancelledError()
            return cancelled, decide(cancelled)
        raised = job.exception()
        if isinstance(raised, Exited):
            raised = raised.exit
        return raised, decide(raised, None if raised else job.result(), self.encode(ctx.lease))

    async def _hand_back(self, ctx: JobContext, job: asyncio.Future[Any], told: Told) -> None:
        """Stop the handler and release its job (unless the lease was lost before)."""
        job.cancel()
        ours = not ctx.lost.is_set()
        ctx.lost.set()  # a handler thread still running learns it is over
        told.finished("release", ctx.lease)  # the handler is no longer busy
        told.span_end(None, None, lost=not ours)  # released (or lost before)
        if ours:
            with contextlib.suppress(LeaseqError):
                await self.queue.release(ctx.lease)
                self.counts["released"] += 1

    async def _discard(self, ctx: JobContext, told: Told) -> None:
        """The lease was lost while the handler ran: its outcome is dropped."""
        log_job(self.queue.name, logging.WARNING, ctx.lease, "lease lost: outcome discarded")
        self.counts["lost"] += 1
        told.finished("lost", ctx.lease)
        if told.observer is not None:
            told.observer.lost(self.queue.name)
        told.span_end(None, None, lost=True)
        thread = self.threads.get(id(ctx))
        if thread is not None and not thread.done():
            # A plain handler's thread cannot be cancelled: it keeps its pool
            # slot, so this job keeps its handler slot until it returns (else
            # the next job would wait for a thread, its timeout running).
            returned = asyncio.wrap_future(thread)
            returned.add_done_callback(lambda f: f.cancelled() or f.exception())
            await asyncio.wait({returned})

    async def _timed_out(self, ctx: JobContext, job: asyncio.Future[Any], limit: float) -> None:
        """``ctx``'s handler ran past ``limit`` s: cancel it, fail the attempt (the
        lease is freed now, not heartbeated on), discard whatever it does later."""
        self.beats.pop(id(ctx), None)  # the lease is never extended again
        thread = self.threads.get(id(ctx))
        job.cancel()
        # A handler that swallows the cancellation, or a thread that returns late:
        # its outcome is read here (so asyncio does not warn) and dropped.
        job.add_done_callback(lambda f: f.cancelled() or f.exception())
        log_job(
            self.queue.name,
            logging.WARNING,
            ctx.lease,
            "handler passed its timeout of %gs: %s",
            limit,
            "cancelled" if thread is None else "its thread cannot be cancelled",
        )
        outcome = decide(HandlerTimeout(limit))
        if self.metrics is not None:
            self.metrics.finished(self.queue.name, outcome.kind, limit, ctx.lease)
        await self._write(ctx, outcome)
        ctx.lost.set()  # current_job().lost: a plain handler may notice and return
        running = job if thread is None else asyncio.wrap_future(thread)
        if not running.done():
            # A thread cannot be cancelled, and a coroutine may swallow its
            # cancellation: either keeps its slot, so this job does, until it ends.
            self._stuck(+1)
            try:
                await asyncio.wait({running})
            finally:
                self._stuck(-1)
        if thread is not None:
            log_job(
                self.queue.name,
                logging.WARNING,
                ctx.lease,
                "handler thread returned after its timeout: outcome discarded",
            )

    async def _write(self, ctx: JobContext, outcome: Outcome) -> None:
        """Write ``outcome`` under the lease; a transient error is retried with backoff
        while the lease may still hold (the heartbeat goes on meanwhile)."""
        backoff = Backoff()
        while not ctx.lost.is_set():
            try:
                if outcome.kind == "complete":  # counted where it lands (Completions)
                    await self.completions.complete(ctx.lease, outcome.result)
                else:
                    dead = outcome.kind == "dead"
                    call = asyncio.ensure_future(
                        self.queue.fail(
                            ctx.lease,
                            outcome.error,
                            outcome.retry_in,
                            dead=dead,
                            traceback=outcome.traceback or None,
                        )
                    )
                    # Shielded, as completions are (Completions): its handler has run,
                    # so a cancel of run() must not cut the write off (the job would
                    # stay active and run again once its lease expired). run()'s
                    # cleanup waits for it, within its bound.
                    self.failing.add(call)
                    call.add_done_callback(functools.partial(self._failed, outcome))
                    state = await asyncio.shield(call)
                    log_written(self.queue.name, ctx.lease, outcome, state.value)
                self.outage.ok("outcome")
                return
            except AlreadyFinished:  # a replay: our own write landed (counted there)
                self.outage.ok("outcome")
                return
            except LeaseqError as exc:
                kind = error_kind(exc)
                if kind == "transient":
                    await asyncio.sleep(self.outage.failed("outcome", exc, backoff))
                    continue
                if kind == "fatal":
                    self.end(exc)
                else:  # answered: someone else holds or finished the job
                    self.outage.ok("outcome")
                # Our outcome does not count.
                log_job(self.queue.name, logging.WARNING, ctx.lease, "outcome dropped: %s", exc)
                return

    def _failed(self, outcome: Outcome, call: asyncio.Future[Any]) -> None:
        """A ``fail`` call of ``_write`` ended: counted here, where it lands (its job
        task may have been cancelled meanwhile), and its error read, so asyncio
        does not warn."""
        self.failing.discard(call)
        if call.cancelled():
            return
        exc = call.exception()
        if exc is None:
            self.counts["dead" if call.result().value == "dead" else "failed"] += 1
        elif isinstance(exc, AlreadyFinished):  # a replay: our own write landed
            self.counts[_COUNTED.get(outcome.kind, "failed")] += 1
        elif isinstance(exc, LeaseqError) and error_kind(exc) == "job":
            self.counts["lost"] += 1

    def returned(self, held: Held) -> bool:
        """Whether ``held``'s handler has returned (or raised): its job future is done
        and, for a plain handler, its thread too (a job cancelled on a timeout or a
        lost lease while its thread runs on is still running)."""
        if held.job is None or not held.job.done():
            return False
        thread = self.threads.get(id(held.ctx))
        return thread is None or thread.done()

    def bridge(self) -> Callable[[Lease, Any], Any] | None:
        """``current_job().progress`` for a plain handler in the thread pool: runs
        the queue's ``progress`` on this loop and waits for it."""
        report = getattr(self.queue, "progress", None)
        if report is None:
            return None
        loop = asyncio.get_running_loop()

        def bridge(lease: Lease, value: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(report(lease, value), loop).result()

        return bridge

    def lost(self, held: Held, result: LeaseLost, spare: deque[Held]) -> None:
        """A heartbeat found ``held``'s lease lost (or its job cancelled): ``heard``
        marks its context; a running handler is cancelled, a spare never starts
        (it leaves ``spare``, the worker's prefetched leases)."""
        ctx = held.ctx
        self.beats.pop(id(ctx), None)
        if held.job is not None and held.job.done():
            # Its outcome is being written, and that call hears its own
            # answer: this beat may have run just after it landed (the row
            # succeeded under this very token), or a reply was lost and its
            # retry will find AlreadyFinished. Not a lost lease.
            return
        verdict = heard(ctx, result)
        if held.job is None:  # prefetched: it never starts (process() looks first)
            with contextlib.suppress(ValueError):  # unless just taken to start
                spare.remove(held)
            log_job(self.queue.name, logging.INFO, ctx.lease, "prefetched lease lost: %s", result)
            return
        if verdict == "cancelled":
            log_job(
                self.queue.name,
                logging.INFO,
                ctx.lease,
                "the job was cancelled while running; cancelling its handler",
            )
        else:
            log_job(
                self.queue.name,
                logging.WARNING,
                ctx.lease,
                "heartbeat found the lease lost (%s); cancelling its handler",
                result,
            )
        held.job.cancel()

    async def give_back(self, leases: deque[Held], what: str) -> LeaseqError | None:
        """Release ``leases`` (unstarted) from the head, each leaving the deque once
        its release has answered. A lease lost meanwhile, or a damaged row, costs
        that lease only. Any other error gives up the rest, returned: they expire
        and are refunded as unstarted, rather than each hold the caller for a
        failing call in an outage."""
        while leases:
            held = leases[0]
            self.beats.pop(id(held.ctx), None)
            try:
                await self.queue.release(held.ctx.lease)
                self.counts["released"] += 1
            except LeaseqError as exc:
                if error_kind(exc) != "job":
                    log_job(
                        self.queue.name,
                        logging.WARNING,
                        None,
                        "could not release %d %s leases (%s); they expire, unspent",
                        len(leases),
                        what,
                        exc,
                    )
                    for left in leases:
                        self.beats.pop(id(left.ctx), None)
                    leases.clear()
                    return exc
            if leases and leases[0] is held:  # (run()'s cleanup may have taken it)
                leases.popleft()
        return None
