"""Coroutines the worker core runs on an event loop, waited for by a thread.

The worker core is threads (``leaseq.work.engine``). Two things in it are
coroutines: an ``async def`` handler's run, and, under ``aio.Worker``, every
call of the ``aio`` queue. :class:`OnLoop` runs one as an asyncio task on the
loop that owns it and lets a thread wait for it, or cancel it. It waits for
the *task* to end, not for a cancel to be asked: a handler that swallows its
cancellation keeps its thread (and so its handler slot) until it really
returns, and a cancelled queue call has run its ``finally`` before its waiter
goes on. :func:`run_handler` is the one way a handler thread runs a
coroutine: on the given loop (``aio.Worker``: the caller's) or on an event
loop of the thread's own (``leaseq.Worker``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from leaseq.handler import JobContext, _set_current_task

__all__ = ["Exited", "OnLoop", "run_handler"]


class Exited(Exception):
    """A handler's SystemExit or KeyboardInterrupt, carried out of its task as an
    ordinary exception: asyncio would let it out of the loop and end the worker
    (releasing every lease it holds, refunding the attempt: a job that calls
    ``sys.exit`` would run again on every start, without bound)."""

    def __init__(self, exit: BaseException) -> None:
        super().__init__(exit)
        self.exit = exit


async def _as_job(awaitable: Awaitable[Any], ctx: JobContext) -> Any:
    _set_current_task(ctx)  # this task's own context: current_job() in async handlers
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        raise Exited(exc) from None


class OnLoop:
    """``coro`` run as a task on ``loop``, which another thread runs. Made in any
    thread; ``result`` waits for the task's end; ``cancel`` cancels it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> None:
        self.loop = loop
        self.done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        try:
            # The task is made in a copy of this thread's context (the handle's), so
            # a span current here is current in the handler too.
            loop.call_soon_threadsafe(self._start, coro)
        except RuntimeError:  # the loop is closed: nothing will run it
            coro.close()
            raise

    def _start(self, coro: Coroutine[Any, Any, Any]) -> None:
        if self._cancelled:  # before it began: it never runs (closed, not left unawaited)
            coro.close()
            self.done.set_exception(concurrent.futures.CancelledError())
            return
        task = self._task = self.loop.create_task(coro)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self.done.set_exception(concurrent.futures.CancelledError())
        elif (exc := task.exception()) is not None:
            self.done.set_exception(exc)
        else:
            self.done.set_result(task.result())

    def cancel(self) -> None:
        """Cancel the task (from any thread); its waiter goes on once it has ended."""
        self._cancelled = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: it ran already
            self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def result(self, timeout: float | None = None) -> Any:
        """What the task returned; raises what it raised (``CancelledError`` if it
        was cancelled), TimeoutError after ``timeout`` seconds."""
        return self.done.result(timeout)


def run_handler(
    awaitable: Awaitable[Any],
    ctx: JobContext,
    loop: asyncio.AbstractEventLoop,
    own: bool,
    interrupt: Callable[[Callable[[], None]], None],
) -> Any:
    """Run an ``async def`` handler's ``awaitable`` from its handler thread, on
    ``loop``: the caller's, which another thread runs, or (``own``) this
    thread's, run here; give ``interrupt`` the way to cancel it (a lost lease, a
    timeout, a stop past its grace). Returns its value; raises what it raised (a
    SystemExit as itself, not out of the loop; a cancel as asyncio's)."""
    try:
        if not own:
            run = OnLoop(loop, _as_job(awaitable, ctx))
            interrupt(run.cancel)
            return run.result()
        task = loop.create_task(_as_job(awaitable, ctx))
        interrupt(lambda: _cancel_on(loop, task))
        return loop.run_until_complete(task)
    except Exited as exc:
        raise exc.exit from None
    except concurrent.futures.CancelledError:  # the same end, whichever loop ran it
        raise asyncio.CancelledError() from None


def _cancel_on(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
    with contextlib.suppress(RuntimeError):  # closed: the task is over
        loop.call_soon_threadsafe(task.cancel)
