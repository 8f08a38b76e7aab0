"""``leaseq.Queue``: the synchronous API over redis-py.

Every operation is written once, without I/O, in ``leaseq.store.ops``; this
class runs them on its client (``leaseq._api.SyncQueueAPI``). The async
``leaseq.aio.Queue`` runs the very same operations on ``redis.asyncio``.
"""

from __future__ import annotations

from typing import Any

from leaseq._api import SyncQueueAPI
from leaseq._base import QueueBase
from leaseq.store.ops import list_queues
from leaseq.transport import connect as _connect
from leaseq.transport.drive import SyncDriver

__all__ = ["Queue", "connect"]


def connect(url: str) -> Any:
    """A redis-py client for ``url`` (``redis://``, ``rediss://``, ``unix://``, ``memory://``)."""
    return _connect.connect(url)


class Queue(QueueBase, SyncQueueAPI):
    """One named queue on one Redis (or Redis Cluster) client.

    Settings are keyword-only and checked here; an unknown one is a
    TypeError. Durations are seconds (float). See ``docs/design.md``.
    A queue made by ``from_url`` owns its client: ``close()`` (or a ``with``
    block) closes it; a client passed in stays the caller's to close.
    """

    @classmethod
    def from_url(cls, url: str, name: str, **settings: Any) -> Queue:
        """A queue on a new client for ``url``; ``settings`` as for ``Queue``."""
        queue = cls(name, redis=connect(url), **settings)
        queue._owns_client = True
        return queue

    @staticmethod
    def queues(redis: Any, prefix: str = "leaseq") -> list[str]:
        """Names (hash tags) of the queues under ``prefix`` on this server (SCAN of
        the keys a queue keeps besides its job rows; on a cluster, of every primary)."""
        return _Scanner(redis)._drive(list_queues(prefix))


class _Scanner(SyncDriver):
    """A driver for the key-less operations (``queues``), on any client."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._checked = True
