"""``leaseq.aio.Worker``: runs an async handler on claimed jobs, as asyncio tasks.

Concurrency is the number of handler tasks in flight. Each task has a
heartbeat that extends its lease every ``ttl / 3`` seconds; if an extend
finds the lease gone (reaped after a stall, or taken over), the handler
task is cancelled, because its outcome would be refused anyway. Outcomes:
a return value completes the job (stored as its result), ``leaseq.Retry``
retries it after its delay, ``leaseq.Dead`` dead-letters it now, any other
exception fails it (retry with backoff, or dead at ``max_attempts``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .. import _validate as v
from ..errors import LeaseLost, ServerUnavailable
from ..handler import Dead, Retry, describe_error
from ..schedules import TICK_INTERVAL
from ..types import Lease
from .queue import Queue

__all__ = ["AsyncHandler", "Worker"]

AsyncHandler = Callable[[Lease], Awaitable[Any]]

log = logging.getLogger("leaseq.aio")

_IDLE_SLICE = 5.0
"""Longest idle wait between claims when nothing wakes the worker."""


class Worker:
    """Claims jobs from ``queue`` and runs ``handler(lease)`` on each, ``concurrency`` at a time.

    ``ttl`` is the lease length in seconds; heartbeats extend it every
    ``ttl / 3``. ``reap_interval`` is how often (seconds) the worker reaps
    expired leases of crashed workers (default: ``ttl``). ``grace`` is how
    long ``stop()`` lets in-flight handlers finish before cancelling them and
    releasing their jobs back to pending.
    """

    def __init__(
        self,
        queue: Queue,
        handler: AsyncHandler,
        *,
        concurrency: int = 4,
        ttl: float = 30.0,
        reap_interval: float | None = None,
        grace: float = 30.0,
    ) -> None:
        v.worker_settings(concurrency, ttl, grace, reap_interval)
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.ttl = float(ttl)
        self.reap_interval = self.ttl if reap_interval is None else float(reap_interval)
        self.grace = float(grace)
        self.processed = 0
        """Jobs whose outcome this worker wrote (completed, failed or retried)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Ask ``run`` to stop claiming and return once in-flight jobs are done
        (or after ``grace`` seconds, releasing the rest). Safe from a signal handler
        installed with ``loop.add_signal_handler``."""
        self._stop.set()

    async def run(self, *, burst: bool = False) -> int:
        """Work until ``stop()``; with ``burst=True`` return once nothing is pending
        or due and nothing is in flight (future retries do not hold it).

        Returns how many jobs this worker processed. A Redis outage is retried
        with backoff, never raised; handler errors become job failures.
        """
        stop_wait = asyncio.ensure_future(self._stop.wait())
        wake: asyncio.Future[bool] | None = None
        loop = asyncio.get_running_loop()
        next_reap = next_tick = loop.time()
        outage = 0.0
        try:
            while not self._stop.is_set():
                try:
                    if loop.time() >= next_reap:
                        await self.queue.reap()
                        next_reap = loop.time() + self.reap_interval
                    if loop.time() >= next_tick and hasattr(self.queue, "tick"):
                        next_tick = loop.time() + TICK_INTERVAL  # see leaseq.schedules
                        await self.queue.tick()
                    free = self.concurrency - len(self._tasks)
                    leases: list[Lease] = []
                    hint: float | None = None
                    if free > 0:
                        leases, hint = await self.queue.claim_now(free, ttl=self.ttl)
                    outage = 0.0
                except ServerUnavailable as exc:
                    outage = min(max(outage * 2, 0.1), 5.0)
                    log.warning("leaseq worker: %s; retrying in %.1f s", exc, outage)
                    await asyncio.wait({stop_wait}, timeout=outage)
                    continue
                for lease in leases:
                    self._start(lease)
                if leases and len(self._tasks) < self.concurrency:
                    continue  # there may be more right away
                if burst and not leases and not self._tasks:
                    return self.processed
                # Sleep until a slot frees, a job is enqueued, something falls
                # due by itself, or stop() is called.
                waiters: set[asyncio.Future[Any]] = {stop_wait, *self._tasks}
                timeout = min(_IDLE_SLICE if hint is None else hint, _IDLE_SLICE, TICK_INTERVAL)
                if len(self._tasks) < self.concurrency:
                    if wake is None or wake.done():
                        # Kept across iterations: cancelling a BLPOP costs a reconnect.
                        wake = asyncio.ensure_future(self.queue.wait_for_wake(timeout))
                    waiters.add(wake)
                await asyncio.wait(
                    waiters, timeout=max(timeout, 0.001), return_when="FIRST_COMPLETED"
                )
                if wake is not None and wake.done() and not wake.cancelled():
                    with contextlib.suppress(ServerUnavailable):
                        wake.result()
            await self._drain()
            return self.processed
        finally:
            leftovers = [stop_wait, *self._tasks] + ([wake] if wake is not None else [])
            for future in leftovers:
                future.cancel()
            # Let them unwind (a cancelled BLPOP drops its connection) before
            # the loop may close.
            await asyncio.gather(*leftovers, return_exceptions=True)

    async def _drain(self) -> None:
        """Graceful stop: let handlers finish for ``grace`` s, then cancel and release."""
        if not self._tasks:
            return
        await asyncio.wait(set(self._tasks), timeout=self.grace)
        for task in set(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    def _start(self, lease: Lease) -> None:
        task = asyncio.ensure_future(self._process(lease))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, lease: Lease) -> None:
        """Run one job with a heartbeat; write its outcome under its lease."""
        job = asyncio.ensure_future(self.handler(lease))
        lost = asyncio.Event()
        beat = asyncio.ensure_future(self._heartbeat(lease, job, lost))
        try:
            try:
                await asyncio.wait({job})
            except asyncio.CancelledError:
                # This task was cancelled (stop() past its grace): hand the job back.
                job.cancel()
                if not lost.is_set():
                    with contextlib.suppress(LeaseLost, ServerUnavailable):
                        await self.queue.release(lease)
                raise
            if job.cancelled():
                if not lost.is_set():  # the handler cancelled itself: a failure
                    await self._outcome(lease, RuntimeError("handler was cancelled"), None)
                return
            exc = job.exception()
            if exc is None:
                await self._outcome(lease, None, job.result())
            elif isinstance(exc, Exception):
                await self._outcome(lease, exc, None)
            else:
                raise exc  # KeyboardInterrupt, SystemExit: not the job's failure
        finally:
            beat.cancel()

    async def _outcome(self, lease: Lease, exc: BaseException | None, result: Any) -> None:
        try:
            if exc is None:
                await self.queue.complete(lease, result)
            elif isinstance(exc, Retry):
                await self.queue.fail(lease, exc.reason, exc.in_)
            elif isinstance(exc, Dead):
                await self.queue.fail(lease, exc.reason, dead=True)
            else:
                await self.queue.fail(lease, describe_error(exc))
            self.processed += 1
        except LeaseLost as lost:
            # Someone else holds or finished the job: our outcome does not count.
            log.warning("leaseq worker: outcome of %s dropped: %s", lease.id, lost)
        except ServerUnavailable as down:
            # The lease runs out and the job comes back: at-least-once.
            log.warning("leaseq worker: outcome of %s not written: %s", lease.id, down)

    async def _heartbeat(self, lease: Lease, job: asyncio.Future[Any], lost: asyncio.Event) -> None:
        """Extend every ttl/3; on LeaseLost cancel the handler (its result would be refused)."""
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                lease = await self.queue.extend(lease, self.ttl)
            except LeaseLost:
                log.warning("leaseq worker: lease on %s lost; cancelling its handler", lease.id)
                lost.set()
                job.cancel()
                return
            except ServerUnavailable as exc:
                log.warning("leaseq worker: heartbeat for %s failed: %s", lease.id, exc)
