"""leaseq over ``redis.asyncio``: the same Queue API with ``async def``, and
an asyncio Worker. The operations are the sync API's (``leaseq.store.queue_ops``),
awaited; only the transport differs."""

from leaseq.aio.queue import Queue
from leaseq.aio.sharded import ShardedQueue
from leaseq.aio.worker import AsyncHandler, Worker
from leaseq.queue_set import AsyncQueueSet as QueueSet

__all__ = ["AsyncHandler", "Queue", "QueueSet", "ShardedQueue", "Worker"]
