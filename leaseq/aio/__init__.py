"""leaseq over ``redis.asyncio``: the same Queue API with ``async def``, and
an asyncio Worker. The operations are the sync API's (``leaseq._ops``),
awaited; only the transport differs."""

from .queue import Queue
from .sharded import ShardedQueue
from .worker import AsyncHandler, Worker

__all__ = ["AsyncHandler", "Queue", "ShardedQueue", "Worker"]
