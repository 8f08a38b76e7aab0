"""``leaseq.aio.ShardedQueue``: ``leaseq.ShardedQueue`` with ``async def``.

The same ``leaseq.store.sharded_ops.ShardedOps`` as the sync sharded queue, awaited on a
``redis.asyncio`` client; see ``leaseq.sharded`` and docs/scaling.md.
"""

from __future__ import annotations

from typing import Any

from leaseq._api import AsyncQueueAPI
from leaseq.aio.queue import Queue, connect
from leaseq.sharded import ShardedBase
from leaseq.store.sharded_ops import ShardedOps
from leaseq.transport.drive import async_op

__all__ = ["ShardedQueue"]


class ShardedQueue(ShardedBase[Queue], AsyncQueueAPI):
    """One logical queue over ``shards`` hash tags; the API of ``leaseq.aio.Queue``."""

    _queue_class = Queue

    @classmethod
    def from_url(cls, url: str, name: str, *, shards: int, **settings: Any) -> ShardedQueue:
        """A sharded queue on a new ``redis.asyncio`` client for ``url``."""
        queue = cls(name, shards=shards, redis=connect(url), **settings)
        queue._owns_client = True
        return queue

    shard_stats = async_op(ShardedOps.shard_stats)
