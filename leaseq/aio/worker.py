"""``leaseq.aio.Worker``: the worker core driven from an event loop.

The asyncio face of the one worker core, ``leaseq.work.engine``: the same
claimer, heartbeats, prefetch, outcome writes, timeouts and shutdown as
``leaseq.Worker``, on the same threads, with two differences. An ``async
def`` handler runs on the loop that awaits ``run()`` (so it may use that
loop's clients), and the core's calls of the ``aio`` queue run there too
(``leaseq.work.loop_queue``). A plain handler runs in a handler thread, as
in ``leaseq.Worker``, so it never blocks the loop.

``run()`` awaits the core, which runs in a thread of its own; cancelling
``run()`` is a stop with no grace (``stop(now=True)``): the jobs still
running are handed back, those whose handler returned get their outcome
written, and the cancel is raised once that is done. On a server that stops
answering, no call of the run outlives ``_CLEANUP_WAIT`` seconds past the
point where the stop gives up on its handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from leaseq.handler import Handlers
from leaseq.observe.observer import JobObserver
from leaseq.protocols import AsyncQueueLike, members
from leaseq.queue_set import queue_set
from leaseq.types import Lease
from leaseq.work import signals as _signals
from leaseq.work.engine import Engine
from leaseq.work.loop_queue import LoopQueue

__all__ = ["AsyncHandler", "Worker"]

AsyncHandler = Callable[[Lease], Any]
"""An ``async def`` handler, or a plain one (run in a handler thread)."""

_CLEANUP_WAIT = 5.0
"""Longest any call of the run may take once a stop gives up on its handlers
(past the grace, at once when hard or cancelled): a server that stops
answering must not hold ``run()`` forever. What is not handed back by then
expires (a prefetched lease unspent)."""


class Worker:
    """Claims jobs from ``queue`` and runs ``handler(lease)`` on each, ``concurrency`` at a time.

    The options, the outcomes and the figures (``counts``, ``processed``,
    ``limit``) are ``leaseq.Worker``'s: ``ttl`` (extended every ``ttl / 3``),
    ``prefetch``, ``grace``, ``reap_interval``, ``worker_id``, ``metrics``,
    ``trace_parent``, ``timeout`` and ``on_stuck``; ``queue`` may be a list of
    ``aio`` queues with ``weights``. Past its time (or once its lease is lost,
    or a stop's grace ran out) an ``async def`` handler is cancelled; a plain
    handler's thread cannot be, and keeps its slot until it returns.
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
        handle_signals: bool = False,
    ) -> None:
        served = queue_set(queue, weights, asynchronous=True)  # several: a QueueSet
        faces = [LoopQueue(q, self._cut_at) for q in (served, *members(served))]
        self._faces = faces
        self._engine = Engine(
            served,
            handler,
            calls=faces[0],
            members=tuple(faces[1:]),
            concurrency=concurrency,
            ttl=ttl,
            prefetch=prefetch,
            grace=grace,
            reap_interval=reap_interval,
            worker_id=worker_id,
            handle_signals=False,
            metrics=metrics,
            trace_parent=trace_parent,
            timeout=timeout,
            on_stuck=on_stuck,
        )
        self.queue = served
        self.handler = self._engine.handler
        self.concurrency = concurrency
        self.ttl = self._engine.ttl
        self.worker_id = self._engine.worker_id
        self._handle_signals = handle_signals
        self._running = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"aio.Worker({self.queue!r}, concurrency={self.concurrency}, ttl={self.ttl})"

    def _cut_at(self) -> float:
        return self._engine.ending_at + _CLEANUP_WAIT  # read at each call: patchable

    @property
    def counts(self) -> dict[str, int]:
        """Outcomes this worker wrote (or, for ``lost``, discarded) since it was made:
        ``succeeded``, ``failed`` (to retry), ``dead``, ``released``, ``suspended``, ``lost``."""
        return self._engine.counts

    @property
    def processed(self) -> int:
        """Jobs whose outcome this worker wrote: completed, failed (to retry) or dead."""
        c = self._engine.counts
        return c["succeeded"] + c["failed"] + c["dead"]

    @property
    def limit(self) -> int:
        """Most leases held at once; with adaptive prefetch it moves with the job rate."""
        return self._engine.limit

    def stop(self, now: bool = False) -> None:
        """Ask ``run`` to stop claiming and return once in-flight jobs are done (or
        after ``grace`` seconds, releasing the rest; at once with ``now``, or at a
        second stop). Safe from any thread and from a signal handler. A stop before
        ``run()`` makes that run return at once; each ``run()`` consumes it."""
        self._engine.stop(now=now)

    async def run(self, *, burst: bool = False) -> int:
        """Work until ``stop()``; with ``burst=True`` return once nothing is pending
        or due and nothing is in flight (future retries do not hold it).

        Returns how many jobs this worker has processed. Transient Redis errors
        (``ServerUnavailable`` and subclasses: an outage, a failover) are retried
        with backoff; any other leaseq error of the worker's own calls ends the
        run with that error, its jobs released. Handler errors are job failures.
        Cancelling it stops the run at once (see the module doc), then raises
        the cancel. Raises RuntimeError if this worker is already running.
        """
        if self._running:
            raise RuntimeError(f"{self!r} is already running: one run() at a time")
        self._running = True
        # With handle_signals (leaseq worker --asyncio): SIGTERM/SIGINT stop it as
        # they stop leaseq.Worker, the second at once. Installed only from the
        # main thread; a signal handler runs there between the loop's steps.
        old = _signals.install(self._engine.on_signal, self._handle_signals)
        try:
            await self._run(burst)
        finally:
            _signals.restore(old)
            self._running = False
        return self.processed

    async def _run(self, burst: bool) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            # Its aio queue's client is bound to the loop of its first use.
            raise RuntimeError(
                f"{self!r} ran on another event loop before: its aio queue's client "
                "belongs to that loop; make the queue and the worker on the loop that runs them"
            )
        self._loop = loop
        self._engine.loop = loop
        for face in self._faces:
            face.loop = loop
        ended: asyncio.Future[BaseException | None] = loop.create_future()

        def target() -> None:
            try:
                self._engine.run(burst)
                outcome: BaseException | None = None
            except BaseException as exc:  # raised in run()'s task, not this thread
                outcome = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: no one waits
                loop.call_soon_threadsafe(_settle, ended, outcome)

        thread = threading.Thread(target=target, name="leaseq-aio-worker", daemon=True)
        thread.start()
        cancelled = False
        while not ended.done():
            try:
                await asyncio.shield(ended)
            except asyncio.CancelledError:
                cancelled = True  # a second cancel too: the stop is under way
                self._engine.stop(now=True)
        thread.join(1.0)  # it has only to return: none of the run's threads outlives it
        if cancelled:
            raise asyncio.CancelledError
        raised = ended.result()
        if raised is not None:
            raise raised


def _settle(ended: asyncio.Future[BaseException | None], outcome: BaseException | None) -> None:
    if not ended.done():
        ended.set_result(outcome)
