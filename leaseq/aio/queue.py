"""``leaseq.aio.Queue``: the same API as ``leaseq.Queue`` with ``async def``.

The operations are those of ``leaseq.store.queue_ops.QueueOps``, the very ones the sync queue
runs, through the same method table (``leaseq.queue.QueueAPI``); this class
only awaits their steps on ``redis.asyncio``. Works on ``redis.asyncio.Redis``,
``redis.asyncio.cluster.RedisCluster`` and ``memory://``.
"""

from __future__ import annotations

from typing import Any

from leaseq.queue import AsyncQueueAPI, QueueBase, connect_asyncio
from leaseq.store.queue_ops import list_queues
from leaseq.transport.drive import AsyncDriver

__all__ = ["Queue", "connect"]


connect = connect_asyncio


class Queue(QueueBase, AsyncQueueAPI):
    """One named queue on one ``redis.asyncio`` client (or async RedisCluster).

    Settings are those of ``leaseq.Queue``, keyword-only and checked here.
    Durations are seconds (float); every method raises what its sync twin does.
    """

    _kind = "aio.Queue"

    @staticmethod
    async def queues(redis: Any, prefix: str = "leaseq") -> list[str]:
        """Names (hash tags) of the queues under ``prefix`` (SCAN of the keys a queue
        keeps besides its job rows; on a cluster, of every primary)."""
        return await _Scanner(redis)._drive(list_queues(prefix))


class _Scanner(AsyncDriver):
    """A driver for the key-less operations (``queues``), on any async client."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._checked = True
