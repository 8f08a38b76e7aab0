"""``leaseq.aio.Queue``: the same API as ``leaseq.Queue`` with ``async def``.

The operations are those of ``leaseq._ops``, the very ones the sync queue
runs; this class only awaits their steps on ``redis.asyncio``
(``leaseq._drive.AsyncDriver``). Works on ``redis.asyncio.Redis``,
``redis.asyncio.cluster.RedisCluster`` and ``memory://``.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from .. import _redis
from .._base import QueueBase
from .._drive import AsyncDriver, async_op
from .._memory import async_memory_client
from .._ops import QueueOps, list_queues
from ..errors import InvalidArgument

__all__ = ["Queue", "connect"]


def connect(url: str) -> Any:
    """A ``redis.asyncio`` client for ``url`` (``redis://``, ``rediss://``,
    ``unix://``, ``memory://``)."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"a Redis URL is needed, not {url!r}")
    if url.startswith("memory://"):
        return async_memory_client(url)
    try:
        return aioredis.Redis.from_url(url)
    except ValueError as exc:
        raise InvalidArgument(f"bad Redis URL: {_redis.redact(str(exc))}") from None


class Queue(QueueBase, AsyncDriver):
    """One named queue on one ``redis.asyncio`` client (or async RedisCluster).

    Settings are those of ``leaseq.Queue``, keyword-only and checked here.
    Durations are seconds (float); every method raises what its sync twin does.
    """

    _kind = "aio.Queue"

    @classmethod
    def from_url(cls, url: str, name: str, **settings: Any) -> Queue:
        """A queue on a new ``redis.asyncio`` client for ``url``; settings as for ``Queue``."""
        queue = cls(name, redis=connect(url), **settings)
        queue._owns_client = True
        return queue

    async def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            await self.redis.aclose() if hasattr(self.redis, "aclose") else await self.redis.close()

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    enqueue = async_op(QueueOps.enqueue)
    enqueue_many = async_op(QueueOps.enqueue_many)
    claim = async_op(QueueOps.claim)
    claim_many = async_op(QueueOps.claim_many)
    claim_now = async_op(QueueOps.claim_now)
    nudge = async_op(QueueOps.nudge)
    wait_for_wake = async_op(QueueOps.wait_for_wake)
    extend = async_op(QueueOps.extend)
    extend_many = async_op(QueueOps.extend_many)
    complete = async_op(QueueOps.complete)
    complete_many = async_op(QueueOps.complete_many)
    fail = async_op(QueueOps.fail)
    release = async_op(QueueOps.release)
    once = async_op(QueueOps.once)
    reap = async_op(QueueOps.reap)
    get = async_op(QueueOps.get)
    ls = async_op(QueueOps.ls)
    stats = async_op(QueueOps.stats)
    cancel = async_op(QueueOps.cancel)
    retry_dead = async_op(QueueOps.retry_dead)
    retry_all_dead = async_op(QueueOps.retry_all_dead)
    purge = async_op(QueueOps.purge)

    @staticmethod
    async def queues(redis: Any, prefix: str = "leaseq") -> list[str]:
        """Names (hash tags) of the queues under ``prefix`` (SCAN of meta keys; on a
        cluster, of every primary)."""
        return await _Scanner(redis)._drive(list_queues(prefix))


class _Scanner(AsyncDriver):
    """A driver for the key-less operations (``queues``), on any async client."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._checked = True
