"""``leaseq.aio.ShardedQueue``: ``leaseq.ShardedQueue`` with ``async def``.

The same ``leaseq.store.sharded_ops.ShardedOps`` as the sync sharded queue, awaited on a
``redis.asyncio`` client; see ``leaseq.sharded`` and docs/scaling.md.
"""

from __future__ import annotations

from typing import Any

from leaseq.aio.queue import Queue, connect
from leaseq.queue import AsyncQueueAPI
from leaseq.sharded import ShardedBase

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
