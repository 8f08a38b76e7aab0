"""leaseq over ``redis.asyncio``: the same Queue API with ``async def``, and
an asyncio Worker. Script calls are built and parsed by the same code as the
sync API (``leaseq._core``); only the transport differs."""

from .queue import Queue
from .worker import AsyncHandler, Worker

__all__ = ["AsyncHandler", "Queue", "Worker"]
