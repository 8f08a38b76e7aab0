"""``leaseq.Queue``: one named queue on a redis-py client.

Every operation is written once, without I/O, in the ``leaseq.store`` module of
its concern, and named in the table ``leaseq.store.queue_ops.QueueOps`` (a
sharded queue's in ``leaseq.store.sharded_ops``). This module
declares, once, what every queue class shares: its settings (``QueueBase``)
and its public methods (``QueueAPI``, one ``Operation`` per operation). The
driver a class mixes in decides how they run: ``Queue`` here calls redis-py
(``SyncDriver``); ``leaseq.aio.Queue`` awaits ``redis.asyncio``
(``AsyncDriver``), with the very same table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from leaseq.errors import InvalidArgument
from leaseq.store.keys import QueueKeys
from leaseq.store.queue_ops import QueueOps, list_queues
from leaseq.store.settings import (
    DEFAULT_ENQUEUE_RETRY,
    DEFAULT_KEEP_SUCCEEDED_COUNT,
    QueueSettings,
)
from leaseq.store.steps import Command, Op
from leaseq.transport import connect as _connect
from leaseq.transport.drive import AsyncDriver, FeedOperation, Operation, SyncDriver
from leaseq.types import DEFAULT_BACKOFF, Backoff
from leaseq.work.tasks import TaskHost

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "AsyncQueueAPI",
    "Queue",
    "QueueAPI",
    "QueueBase",
    "SyncQueueAPI",
    "connect",
    "connect_asyncio",
]

S = TypeVar("S", bound="SyncQueueAPI")
A = TypeVar("A", bound="AsyncQueueAPI")


def connect(url: str) -> Any:
    """A redis-py client for ``url`` (``redis://``, ``rediss://``, ``unix://``, ``memory://``,
    ``redis+sentinel://``, ``rediss+sentinel://``: docs/high-availability.md)."""
    return _connect.connect(url)


def connect_asyncio(url: str) -> Any:
    """A ``redis.asyncio`` client for ``url`` (the same schemes as ``connect``)."""
    return _connect.connect(url, asyncio=True)


def _decodes_responses(client: Any) -> bool:
    try:
        return bool(client.get_encoder().decode_responses)
    except AttributeError:  # a client without redis-py's encoder: cannot tell
        return False


class QueueBase:
    """Settings, keys and worker id of one named queue on one client.

    Settings are keyword-only and checked at construction; an unknown one is
    a TypeError. Durations are seconds (float). ``shard`` is set by
    ``ShardedQueue`` only (keys under the hash tag ``{<name>#<shard>}``);
    ``durable`` and ``durable_timeout`` are described in docs/scale-out.md;
    ``enqueue_retry`` (seconds an enqueue is sent again while the server is
    unavailable, 0 = never) in docs/high-availability.md.
    """

    _kind = "Queue"
    _connector: Callable[[str], Any]
    """The client factory for a URL: redis-py's (``SyncQueueAPI``) or asyncio's."""

    @classmethod
    def from_url(cls, url: str, name: str, **settings: Any) -> Self:
        """A queue on a new client for ``url``; ``settings`` as for the class.
        The queue owns that client: ``close()`` (or a ``with`` block) closes it."""
        queue = cls(name, redis=cls._connector(url), **settings)
        queue._owns_client = True
        return queue

    def __init__(
        self,
        name: str,
        *,
        redis: Any,
        prefix: str = "leaseq",
        max_attempts: int = 5,
        backoff: float | Backoff = DEFAULT_BACKOFF,
        keep_succeeded: float | None = 3600.0,
        keep_succeeded_count: int | None = DEFAULT_KEEP_SUCCEEDED_COUNT,
        serializer: str = "json",
        payload_type: Any = None,
        max_payload_bytes: int = 1_048_576,
        lease_cap: float = 86_400.0,
        worker_id: str | None = None,
        shard: int | None = None,
        durable: int = 0,
        durable_timeout: float = 1.0,
        enqueue_retry: float = DEFAULT_ENQUEUE_RETRY,
    ) -> None:
        self._core = QueueSettings(
            name,
            prefix=prefix,
            max_attempts=max_attempts,
            backoff=backoff,
            keep_succeeded=keep_succeeded,
            keep_succeeded_count=keep_succeeded_count,
            serializer=serializer,
            payload_type=payload_type,
            max_payload_bytes=max_payload_bytes,
            lease_cap=lease_cap,
            worker_id=worker_id,
            shard=shard,
            durable=durable,
            durable_timeout=durable_timeout,
            enqueue_retry=enqueue_retry,
        )
        if redis is None:
            raise InvalidArgument(f"{self._kind} needs a redis client (or use from_url)")
        if serializer == "msgpack" and _decodes_responses(redis):
            # msgpack payloads are binary: a client that decodes every reply as
            # UTF-8 would fail on them at the first claim, far from the cause.
            raise InvalidArgument(
                "serializer='msgpack' needs a client made with decode_responses=False"
            )
        self.redis = redis
        self._checked = False
        self._owns_client = False
        self._ops = QueueOps(self._core)

    def _first_checks(self) -> Op[None]:
        # A plain queue named like a sharded one would hide its shards' jobs
        # (and break dedup by id): refuse it before the first call.
        if self.keys.shard is not None:
            return  # a shard of a ShardedQueue, which checks for itself
        shards = yield Command("hget", (self.keys.sharding, "shards"))
        if shards is not None:
            n = int(shards)
            raise InvalidArgument(
                f"{self.name!r} is a sharded queue of {n} shards: use "
                f"leaseq.ShardedQueue({self.name!r}, shards={n}, ...)"
            )

    def __repr__(self) -> str:
        return f"{self._kind}({self.name!r}, prefix={self.keys.prefix!r})"

    @property
    def name(self) -> str:
        """The queue's name (for a shard, the logical queue's name)."""
        return self._core.name

    @property
    def keys(self) -> QueueKeys:
        """The key names of this queue (read-only)."""
        return self._core.keys

    @property
    def worker_id(self) -> str:
        """The worker id claims use when they are given none."""
        return self._core.worker_id


class QueueAPI(TaskHost):
    """The public operations of every queue class, declared once, and their
    typed tasks (``task``, ``tasks``: ``leaseq.work.tasks``).

    Each operation is ``self._ops.<name>`` (``QueueOps`` for a plain queue, ``ShardedOps``
    for a sharded one) run on the class's driver; see ``Operation``.
    """

    _ops: Any

    enqueue = Operation(QueueOps.enqueue)
    enqueue_many = Operation(QueueOps.enqueue_many)
    enqueue_flow = Operation(QueueOps.enqueue_flow)
    results = Operation(QueueOps.results)
    parent_results = Operation(QueueOps.parent_results)
    children = Operation(QueueOps.children)
    claim = Operation(QueueOps.claim)
    claim_many = Operation(QueueOps.claim_many)
    claim_now = Operation(QueueOps.claim_now)
    nudge = Operation(QueueOps.nudge)
    wait_for_wake = Operation(QueueOps.wait_for_wake)
    extend = Operation(QueueOps.extend)
    extend_many = Operation(QueueOps.extend_many)
    complete = Operation(QueueOps.complete)
    complete_many = Operation(QueueOps.complete_many)
    fail = Operation(QueueOps.fail)
    release = Operation(QueueOps.release)
    once = Operation(QueueOps.once)
    reap = Operation(QueueOps.reap)
    get = Operation(QueueOps.get)
    wait = Operation(QueueOps.wait)
    progress = Operation(QueueOps.progress)
    record_step = Operation(QueueOps.record_step)
    recorded_steps = Operation(QueueOps.recorded_steps)
    suspend = Operation(QueueOps.suspend)
    signal = Operation(QueueOps.signal)
    wait_many = Operation(QueueOps.wait_many)
    ls = Operation(QueueOps.ls)
    find = Operation(QueueOps.find)
    stats = Operation(QueueOps.stats)
    cancel = Operation(QueueOps.cancel)
    retry_dead = Operation(QueueOps.retry_dead)
    update = Operation(QueueOps.update)
    retry_all_dead = Operation(QueueOps.retry_all_dead)
    purge = Operation(QueueOps.purge)
    reset_clock = Operation(QueueOps.reset_clock)
    pause = Operation(QueueOps.pause)
    resume = Operation(QueueOps.resume)
    drop = Operation(QueueOps.drop)
    delete = Operation(QueueOps.delete)
    run_now = Operation(QueueOps.run_now)
    schedule = Operation(QueueOps.schedule)
    unschedule = Operation(QueueOps.unschedule)
    schedules = Operation(QueueOps.schedules)
    tick = Operation(QueueOps.tick)
    set_limits = Operation(QueueOps.set_limits)
    set_group_limits = Operation(QueueOps.set_group_limits)
    limits = Operation(QueueOps.limits)
    register_worker = Operation(QueueOps.register_worker)
    unregister_worker = Operation(QueueOps.unregister_worker)
    workers = Operation(QueueOps.workers)
    history = Operation(QueueOps.history)
    events = FeedOperation(QueueOps.events)
    set_events = Operation(QueueOps.set_events)
    event_settings = Operation(QueueOps.event_settings)


class SyncQueueAPI(QueueAPI, SyncDriver):
    """The operations on a redis-py client. A queue made by ``from_url`` owns its
    client: ``close()`` (or a ``with`` block) closes it; a client passed in stays
    the caller's to close."""

    _owns_client: bool
    _connector = staticmethod(connect)

    def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            self.redis.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncQueueAPI(QueueAPI, AsyncDriver):
    """The operations awaited on a ``redis.asyncio`` client; ``close()`` and
    ``async with`` as for ``SyncQueueAPI``."""

    _owns_client: bool
    _connector = staticmethod(connect_asyncio)

    async def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            closer = getattr(self.redis, "aclose", None) or self.redis.close  # redis-py < 5.0.1
            await closer()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Queue(QueueBase, SyncQueueAPI):
    """One named queue on one Redis (or Redis Cluster) client.

    Settings are keyword-only and checked here; an unknown one is a
    TypeError. Durations are seconds (float). See ``docs/design.md``.
    A queue made by ``from_url`` owns its client: ``close()`` (or a ``with``
    block) closes it; a client passed in stays the caller's to close.
    """

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
