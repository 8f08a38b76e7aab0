"""``leaseq.Queue``: the synchronous API over redis-py.

Every operation is written once, without I/O, in ``leaseq._ops``; this
class runs them on its client (``leaseq._drive.SyncDriver``). The async
``leaseq.aio.Queue`` runs the very same operations on ``redis.asyncio``.
"""

from __future__ import annotations

from typing import Any

import redis as redis_lib

from . import _redis
from ._base import QueueBase
from ._drive import SyncDriver, sync_op
from ._memory import memory_client
from ._ops import QueueOps, list_queues
from .errors import InvalidArgument

__all__ = ["Queue", "connect"]


def connect(url: str) -> Any:
    """A redis-py client for ``url`` (``redis://``, ``rediss://``, ``unix://``, ``memory://``)."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"a Redis URL is needed, not {url!r}")
    if url.startswith("memory://"):
        return memory_client(url)
    try:
        return redis_lib.Redis.from_url(url)
    except ValueError as exc:
        raise InvalidArgument(f"bad Redis URL: {_redis.redact(str(exc))}") from None


class Queue(QueueBase, SyncDriver):
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

    def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            self.redis.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    enqueue = sync_op(QueueOps.enqueue)
    enqueue_many = sync_op(QueueOps.enqueue_many)
    claim = sync_op(QueueOps.claim)
    claim_many = sync_op(QueueOps.claim_many)
    claim_now = sync_op(QueueOps.claim_now)
    nudge = sync_op(QueueOps.nudge)
    wait_for_wake = sync_op(QueueOps.wait_for_wake)
    extend = sync_op(QueueOps.extend)
    extend_many = sync_op(QueueOps.extend_many)
    complete = sync_op(QueueOps.complete)
    complete_many = sync_op(QueueOps.complete_many)
    fail = sync_op(QueueOps.fail)
    release = sync_op(QueueOps.release)
    once = sync_op(QueueOps.once)
    reap = sync_op(QueueOps.reap)
    get = sync_op(QueueOps.get)
    ls = sync_op(QueueOps.ls)
    stats = sync_op(QueueOps.stats)
    cancel = sync_op(QueueOps.cancel)
    retry_dead = sync_op(QueueOps.retry_dead)
    retry_all_dead = sync_op(QueueOps.retry_all_dead)
    purge = sync_op(QueueOps.purge)

    @staticmethod
    def queues(redis: Any, prefix: str = "leaseq") -> list[str]:
        """Names (hash tags) of the queues under ``prefix`` on this server (SCAN of
        meta keys; on a cluster, of every primary)."""
        return _Scanner(redis)._drive(list_queues(prefix))


class _Scanner(SyncDriver):
    """A driver for the key-less operations (``queues``), on any client."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._checked = True
