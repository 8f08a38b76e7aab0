"""Calls on an event loop that the asyncio worker makes in several places:
cancelling what may not end (``cut_off``), scheduling from another thread
(``soon``), and telling a cancel the Redis client swallowed (``cancel_lost``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from typing import Any


async def cut_off(futures: Collection[asyncio.Future[Any]]) -> None:
    """Cancel ``futures`` and wait for them briefly. A cancel can be lost inside
    the Redis client (seen on a server that stopped answering while a connection
    was being made: the call went on to a new handshake), so it is repeated; what
    still runs after that is left behind, its exception read when it ends."""
    for _ in range(3):
        if not futures:
            return
        for future in futures:
            future.cancel()
        _, futures = await asyncio.wait(futures, timeout=0.5)
    for future in futures:
        future.add_done_callback(lambda f: f.cancelled() or f.exception())


def soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` on ``loop`` from another thread; nothing once the loop is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def cancel_lost(task: asyncio.Task[Any] | None) -> bool:
    """Whether ``task`` was asked to cancel and yet runs on: redis-py 8 can swallow a
    cancel that lands while a command is in flight (the call returns as if none had
    come; ``cancelling()`` still counts it). Python 3.11+; False before."""
    cancelling = getattr(task, "cancelling", None)
    return cancelling is not None and cancelling() > 0
