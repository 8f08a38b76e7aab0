"""``leaseq.aio.ShardedQueue``: ``leaseq.ShardedQueue`` with ``async def``.

The same ``leaseq.store.sharded_ops.ShardedOps`` as the sync sharded queue, awaited on a
``redis.asyncio`` client; see ``leaseq.sharded`` and docs/scaling.md.
"""

from __future__ import annotations

from leaseq.aio.queue import Queue
from leaseq.queue import AsyncQueueAPI
from leaseq.sharded import ShardedBase

__all__ = ["ShardedQueue"]


class ShardedQueue(ShardedBase[Queue], AsyncQueueAPI):
    """One logical queue over ``shards`` hash tags; the API of ``leaseq.aio.Queue``."""

    _queue_class = Queue
