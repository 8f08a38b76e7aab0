"""The worker drivers behind one synchronous interface, for the one worker
suite (no tests in here).

A worker case is written once and runs on every driver (the ``driver``
fixture of tests/worker/conftest.py):

- ``thread``: ``leaseq.Worker`` on a ``leaseq.Queue``;
- ``asyncio``: ``leaseq.aio.Worker`` on a ``leaseq.aio.Queue``, on an event
  loop of its own in a background thread, so the test's thread stays free to
  enqueue, read and wait as it does for the threaded worker.

Both work on the store of the test's client (fakeredis or a real
redis-server). Only the workers' public API is used, so the suite holds
whatever their insides become. Where the two public APIs differ, this module
maps them, and says so:

- ``processed``: the asyncio worker's own count; for the threaded worker the
  outcomes it wrote (``succeeded + failed + dead`` of its ``counts``).
- ``stop``: the asyncio worker's must be called on its loop (a signal handler
  of ``loop.add_signal_handler`` is); the threaded worker's from any thread.
- ``handle_signals=False`` is passed to the threaded worker (the asyncio
  worker installs no handlers).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

import pytest

import leaseq
import leaseq.aio
from tests.support.backends import async_client

DRIVERS = ("thread", "asyncio")
"""Every worker driver: the ``driver`` fixture runs each worker case on each."""

RUN_LIMIT = 60.0
"""Longest a burst run or a join may take before the test fails (seconds)."""

QUEUE = {
    "keep_succeeded": 60.0,
    "backoff": leaseq.Backoff(base=1.0, cap=10.0, jitter=0.0),
}
"""The settings of the default queue ``emails``: those of the suite's ``q`` fixture."""


class Run:
    """One worker of a driver, driven from the test's thread: ``run`` in the
    foreground, or ``start`` in the background, then ``stop`` and ``join``."""

    worker: Any
    """The worker itself (``leaseq.Worker`` or ``leaseq.aio.Worker``): public API only."""

    def run(self, burst: bool = True) -> None:
        """Run the worker (by default in burst mode) until it returns; raises what it raised."""
        raise NotImplementedError

    def start(self, burst: bool = False) -> None:
        """Start ``run`` in the background."""
        raise NotImplementedError

    def stop(self, now: bool = False) -> None:
        """Ask the run to stop: in-flight jobs get the grace (none with ``now``)."""
        raise NotImplementedError

    def join(self, timeout: float = RUN_LIMIT) -> None:
        """Wait until the background run has returned; raise what it raised.
        Fails the test if it is still running after ``timeout`` seconds."""
        raise NotImplementedError

    @property
    def running(self) -> bool:
        """The background run has not returned yet."""
        raise NotImplementedError

    @property
    def processed(self) -> int:
        """Jobs whose outcome this worker wrote (completed, failed, retried or dead)."""
        raise NotImplementedError

    @property
    def counts(self) -> dict[str, int]:
        """The worker's outcome counts: succeeded, failed, dead, released, lost."""
        return dict(self.worker.counts)


class ThreadRun(Run):
    def __init__(self, queue: Any, handler: Any, options: dict[str, Any]) -> None:
        options.setdefault("handle_signals", False)
        self.worker = leaseq.Worker(queue, handler, **options)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def run(self, burst: bool = True) -> None:
        self.worker.run(burst=burst)

    def start(self, burst: bool = False) -> None:
        def target() -> None:
            try:
                self.worker.run(burst=burst)
            except BaseException as exc:  # re-raised by join, in the test's thread
                self._error = exc

        self._thread = threading.Thread(target=target, name="worker-run", daemon=True)
        self._thread.start()

    def stop(self, now: bool = False) -> None:
        self.worker.stop(now=now)

    def join(self, timeout: float = RUN_LIMIT) -> None:
        assert self._thread is not None, "join before start"
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"run() still running after {timeout} s"
        error, self._error = self._error, None
        if error is not None:
            raise error

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def processed(self) -> int:
        c = self.worker.counts
        return int(c["succeeded"] + c["failed"] + c["dead"])


class AsyncioRun(Run):
    def __init__(self, driver: Driver, queue: Any, handler: Any, opts: Any) -> None:
        self._driver = driver
        self.worker = driver.call(_made(leaseq.aio.Worker, queue, handler, **opts))
        self._task: asyncio.Task[int] | None = None

    def run(self, burst: bool = True) -> None:
        self._join(self._begin(burst), RUN_LIMIT)

    def start(self, burst: bool = False) -> None:
        self._task = self._begin(burst)

    def _begin(self, burst: bool) -> asyncio.Task[int]:
        async def begin() -> asyncio.Task[int]:
            return asyncio.ensure_future(self.worker.run(burst=burst))

        task: asyncio.Task[int] = self._driver.call(begin())
        return task

    def stop(self, now: bool = False) -> None:
        self._driver.loop.call_soon_threadsafe(self.worker.stop, now)

    def join(self, timeout: float = RUN_LIMIT) -> None:
        assert self._task is not None, "join before start"
        self._join(self._task, timeout)

    def _join(self, task: asyncio.Task[int], timeout: float) -> None:
        async def ended() -> bool:
            await asyncio.wait({task}, timeout=timeout)
            return task.done()

        assert self._driver.call(ended(), timeout + 10.0), f"run() still running after {timeout} s"
        if task.cancelled():
            return  # stop(now=True): the run ends with its cancellation
        error = task.exception()
        if error is not None:
            raise error

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def processed(self) -> int:
        return int(self.worker.processed)


async def _made(make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``make(*args, **kwargs)`` on the driver's loop (what it makes may bind to it)."""
    return make(*args, **kwargs)


class Calls:
    """Counts a worker's calls of some queue methods: ``Driver.worker(wrap=calls)``
    hands the worker's queue (sync, or its ``aio.Queue`` twin) through it, and
    each call of one of ``names`` adds one to ``count`` on its way to the real
    method (a coroutine method's call returns its coroutine, as before)."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.count = 0
        self.inner: Any = None

    def __call__(self, queue: Any) -> Calls:
        self.inner = queue
        return self

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.names:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return attr(*args, **kwargs)

        return counted


def differs(request: pytest.FixtureRequest, driver: Driver, on: str, reason: str) -> None:
    """Mark the running case xfail (strict) on the driver ``on``: a behaviour the
    two workers do not share yet. ``reason`` says what differs; once the
    workers share it the case passes there, strict xfail fails, and this call goes."""
    assert on in DRIVERS, on
    if driver.name == on:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{on}: {reason}"))


class Driver:
    """The queues and workers of one driver on the store of ``client`` (a sync
    redis-py or fakeredis client): queues are made as ``leaseq.Queue``\\ s, for
    the test to enqueue and read with; the asyncio driver runs its worker on
    an ``aio.Queue`` of the same name and settings, on the same store."""

    def __init__(self, name: str, client: Any) -> None:
        assert name in DRIVERS, name
        self.name = name
        self.redis = client
        self._settings: dict[int, tuple[str, dict[str, Any]]] = {}
        self._aio: dict[int, leaseq.aio.Queue] = {}
        self._clients: list[Any] = []
        self._runs: list[Run] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.q = self.queue("emails", **QUEUE)
        """The default queue, as the suite's ``q`` fixture makes it."""

    def __repr__(self) -> str:
        return f"Driver({self.name!r})"

    def queue(self, name: str, **settings: Any) -> leaseq.Queue:
        """A ``leaseq.Queue`` named ``name`` on this driver's store; a worker of
        this driver made on it serves that queue."""
        q = leaseq.Queue(name, redis=self.redis, **settings)
        self._settings[id(q)] = (name, settings)
        return q

    def worker(
        self,
        handler: Any,
        queue: leaseq.Queue | None = None,
        wrap: Callable[[Any], Any] | None = None,
        **options: Any,
    ) -> Run:
        """A worker of this driver running ``handler`` on ``queue`` (default ``q``)
        with the worker ``options`` both workers take (``concurrency``, ``ttl``,
        ``prefetch``, ``grace``, ``timeout``, ``metrics``...). ``wrap`` gets the
        queue the worker will use (the sync one, or its ``aio.Queue`` twin) and
        returns what the worker gets instead (a queue whose calls fail, say).
        Raises what the worker's constructor raises (bad settings)."""
        queue = self.q if queue is None else queue
        served: Any = queue if self.name == "thread" else self._twin(queue)
        if wrap is not None:
            served = wrap(served)
        run: Run
        if self.name == "thread":
            run = ThreadRun(served, handler, options)
        else:
            run = AsyncioRun(self, served, handler, options)
        self._runs.append(run)
        return run

    # -- the asyncio driver's loop ----------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="worker-loop", daemon=True
            )
            self._thread.start()
        return self._loop

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = RUN_LIMIT) -> Any:
        """Run ``coro`` on the loop and return its result (from the test's thread)."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def _twin(self, queue: leaseq.Queue) -> leaseq.aio.Queue:
        """The ``aio.Queue`` of ``queue``'s name and settings on the same store."""
        key = id(queue)
        if key not in self._aio:
            assert key in self._settings, "make the worker's queue with driver.queue()"
            name, settings = self._settings[key]
            client = self.call(_made(async_client, self.redis))
            self._clients.append(client)
            self._aio[key] = self.call(_made(leaseq.aio.Queue, name, redis=client, **settings))
        return self._aio[key]

    def close(self) -> None:
        """Stop every run still going (at once), close the clients, end the loop."""
        for run in self._runs:
            if run.running:
                run.stop(now=True)
                with contextlib.suppress(Exception):  # the test has failed: it says why
                    run.join(10.0)
        if self._loop is None:
            return

        async def close_clients() -> None:
            for client in self._clients:
                await client.aclose()

        self.call(close_clients(), 10.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10.0)
        self._loop.close()
        _collect_fake_blocking()


def _collect_fake_blocking() -> None:
    """Collect what the asyncio driver left, here and now.

    fakeredis's asyncio socket leaves a blocking call's coroutine (the worker's
    BLPOP for a wake-up, cancelled at stop) that raises StopIteration when it is
    finalized. Left to the garbage collector, that can happen inside whatever
    runs next, once inside pytest's own parsing of a source file (an internal
    error of the whole session). Collected here, in the driver's teardown, and
    that one error (a coroutine of fakeredis's own) dropped; any other
    unraisable error goes to the hook as before.
    """
    hook = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        if not _fake_blocking(unraisable):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook


def _fake_blocking(unraisable: Any) -> bool:
    code = getattr(unraisable.object, "cr_code", None)
    return code is not None and "fakeredis" in code.co_filename
