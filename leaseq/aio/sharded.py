"""``leaseq.aio.ShardedQueue``: ``leaseq.ShardedQueue`` with ``async def``.

The same ``leaseq._ops.ShardedOps`` as the sync sharded queue, awaited on a
``redis.asyncio`` client; see ``leaseq.sharded`` and docs/scaling.md.
"""

from __future__ import annotations

from typing import Any

from .._drive import AsyncDriver, async_op
from .._ops import ShardedOps
from ..sharded import ShardedBase
from .queue import Queue, connect

__all__ = ["ShardedQueue"]


class ShardedQueue(ShardedBase[Queue], AsyncDriver):
    """One logical queue over ``shards`` hash tags; the API of ``leaseq.aio.Queue``."""

    _queue_class = Queue

    @classmethod
    def from_url(cls, url: str, name: str, *, shards: int, **settings: Any) -> ShardedQueue:
        """A sharded queue on a new ``redis.asyncio`` client for ``url``."""
        queue = cls(name, shards=shards, redis=connect(url), **settings)
        queue._owns_client = True
        return queue

    async def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            await self.redis.aclose() if hasattr(self.redis, "aclose") else await self.redis.close()

    async def __aenter__(self) -> ShardedQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    enqueue = async_op(ShardedOps.enqueue)
    enqueue_many = async_op(ShardedOps.enqueue_many)
    claim = async_op(ShardedOps.claim)
    claim_many = async_op(ShardedOps.claim_many)
    claim_now = async_op(ShardedOps.claim_now)
    nudge = async_op(ShardedOps.nudge)
    wait_for_wake = async_op(ShardedOps.wait_for_wake)
    extend = async_op(ShardedOps.extend)
    extend_many = async_op(ShardedOps.extend_many)
    complete = async_op(ShardedOps.complete)
    complete_many = async_op(ShardedOps.complete_many)
    fail = async_op(ShardedOps.fail)
    release = async_op(ShardedOps.release)
    once = async_op(ShardedOps.once)
    reap = async_op(ShardedOps.reap)
    get = async_op(ShardedOps.get)
    ls = async_op(ShardedOps.ls)
    stats = async_op(ShardedOps.stats)
    shard_stats = async_op(ShardedOps.shard_stats)
    cancel = async_op(ShardedOps.cancel)
    retry_dead = async_op(ShardedOps.retry_dead)
    retry_all_dead = async_op(ShardedOps.retry_all_dead)
    purge = async_op(ShardedOps.purge)
