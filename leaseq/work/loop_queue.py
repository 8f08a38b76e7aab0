"""An ``aio`` queue seen from the worker core's threads (``aio.Worker``).

The worker core (``leaseq.work.engine``) calls its queue from threads: the
claimer, the reporter, a handler's ``current_job().progress``. Under
``aio.Worker`` that queue is an ``aio`` one, whose client belongs to the
caller's event loop: :class:`LoopQueue` runs each call there (``OnLoop``) and
waits for it, so the core's calls are the same for both workers.

A call is bounded once the run is ending (``cut_at``): a server that stops
answering must not hold ``run()`` past its cleanup. Past that time the call
is cancelled, and once it has ended it raises ``ServerUnavailable``, which
the core treats as an outage (a release not made leaves its lease to expire,
a prefetched one unspent).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from leaseq.errors import ServerUnavailable
from leaseq.handler import close_unawaited
from leaseq.work.on_loop import OnLoop

__all__ = ["LoopQueue"]

SLICE = 0.25
"""Longest a waiting call goes without looking whether the run's end has cut it off."""
CANCEL_WAIT = 1.0
"""Longest a cut-off call is waited for to end (its ``finally`` to run)."""


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class LoopQueue:
    """``queue`` (an ``aio`` queue or set) with blocking methods, run on ``loop``
    (set before the first call); ``cut_at()`` is when calls stop waiting
    (``time.monotonic()`` seconds; ``inf`` while the run goes on)."""

    def __init__(self, queue: Any, cut_at: Callable[[], float] = lambda: math.inf) -> None:
        self.queue = queue
        self.cut_at = cut_at
        self.loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return repr(self.queue)

    def __getattr__(self, name: str) -> Any:
        # Read at each call, not kept: a method patched on the queue is the one called.
        attr = getattr(self.queue, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            made = attr(*args, **kwargs)
            return self.wait(made, name) if inspect.isawaitable(made) else made

        return call

    def wait(self, awaitable: Awaitable[Any], name: str) -> Any:
        """Run ``awaitable`` on the loop and wait for what it returns or raises."""
        loop = self.loop
        assert loop is not None, "LoopQueue used before its run set the loop"
        if _running_loop() is loop:
            close_unawaited(awaitable)  # never run
            raise RuntimeError(
                f"{name}() of an aio queue called from its own event loop's thread: "
                "await the queue's method there"
            )
        coro = awaitable if inspect.iscoroutine(awaitable) else _awaited(awaitable)
        run = OnLoop(loop, coro)
        while True:
            left = self.cut_at() - time.monotonic()
            if left <= 0:
                return self._cut(run, name)
            try:
                return run.result(min(left, SLICE))
            except concurrent.futures.TimeoutError:
                continue
            except concurrent.futures.CancelledError:  # the loop is shutting down
                raise ServerUnavailable(f"{name}: cancelled on the event loop") from None

    def _cut(self, run: OnLoop, name: str) -> Any:
        run.cancel()
        try:
            return run.result(CANCEL_WAIT)  # it may have answered meanwhile
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            pass
        raise ServerUnavailable(f"{name}: no answer before the run's end; given up")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
