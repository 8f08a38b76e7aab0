"""``leaseq.ShardedQueue``: one logical queue spread over N hash tags.

A plain queue lives in one Redis Cluster slot, so one master carries all
of its traffic. A sharded queue ``emails`` with ``shards=N`` is N ordinary
queues whose keys carry the hash tags ``{emails#0}`` .. ``{emails#N-1}``
(``#`` is not allowed in queue names, so they never collide with a plain
queue), which the cluster spreads over its masters.

- A job's shard is ``crc32(id) % N`` (``keys.shard_of``): every producer and
  consumer agrees, so dedup by id holds. Ids are made by the client when
  none is given (as for every queue), so the shard is known before sending.
- Claims go round-robin: each claim starts at the next shard and moves on
  past empty ones, so a busy shard cannot starve the others.
- FIFO and priority hold within a shard, not across shards.
- Every transition is still one script on one shard; nothing spans shards
  atomically. ``stats`` sums N consistent per-shard snapshots, read one
  after another (so the sum is not one instant).

The operations are ``leaseq.store.sharded_ops.ShardedOps``, written once; this module
only runs them, synchronously here and awaited in ``leaseq.aio``.
See docs/scaling.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from leaseq.errors import InvalidArgument
from leaseq.queue import Queue, SyncQueueAPI
from leaseq.store.claim import WAKE_SLICE
from leaseq.store.keys import MAX_SHARDS, QueueKeys, check_job_id, shard_of, split_shard
from leaseq.store.reads import stats_call
from leaseq.store.sharded_ops import ShardedOps, merge_stats
from leaseq.store.steps import Command, Op
from leaseq.transport import client as _redis
from leaseq.transport.drive import Operation, call_many, drive_many

__all__ = [
    "WAKE_SLICE",
    "ShardedBase",
    "ShardedQueue",
    "merge_stats",
    "known_queues",
    "sharded_names",
    "stats_many",
    "stored_shards",
]

Q = TypeVar("Q", bound=Any)

if TYPE_CHECKING:
    from typing_extensions import Self


class ShardedBase(Generic[Q]):
    """What the sync and async sharded queues share: their shards and settings."""

    _queue_class: Any
    _connector: Callable[[str], Any]

    @classmethod
    def from_url(cls, url: str, name: str, *, shards: int, **settings: Any) -> Self:
        """A sharded queue on a new client for ``url`` (sync or asyncio, as the
        class is); settings as for ``Queue``. It owns the client (``close()``)."""
        queue = cls(name, shards=shards, redis=cls._connector(url), **settings)
        queue._owns_client = True
        return queue

    def __init__(self, name: str, *, shards: int, redis: Any, **settings: Any) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
            raise InvalidArgument(f"shards must be an integer 1..{MAX_SHARDS}, not {shards!r}")
        if "shard" in settings:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument 'shard'")
        self.shards: tuple[Q, ...] = tuple(
            self._queue_class(name, redis=redis, shard=i, **settings) for i in range(shards)
        )
        self.redis = redis
        self._core = self.shards[0]._core
        for shard in self.shards[1:]:  # one table of typed tasks for every shard
            shard._core.tasks = self._core.tasks
        self._checked = False
        self._owns_client = False
        self._ops = ShardedOps([shard._ops for shard in self.shards])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, shards={len(self.shards)})"

    def _first_checks(self) -> Op[None]:
        """Record the shard count in Redis the first time, and refuse a different
        one later (or a plain queue of the same name): a job's shard is
        ``crc32(id) % N``, so two views with different N would each miss the
        other's rows and enqueue an id twice."""
        keys = self._core.keys
        n = len(self.shards)
        stored = yield Command("hget", (keys.sharding, "shards"))
        if stored is None:
            if (yield Command("exists", keys.plain_markers())):
                raise InvalidArgument(
                    f"{self.name!r} is a plain queue: a sharded queue of that name "
                    "would hide its jobs (use leaseq.Queue, or another name)"
                )
            yield Command("hsetnx", (keys.sharding, "shards", n))
            stored = yield Command("hget", (keys.sharding, "shards"))
        if int(stored) != n:
            raise InvalidArgument(
                f"{self.name!r} has {int(stored)} shards, not {n}: a job's shard is "
                f"crc32(id) % shards, so use shards={int(stored)} (changing it needs a drain)"
            )

    @property
    def name(self) -> str:
        """The logical queue's name."""
        return str(self._core.name)

    @property
    def worker_id(self) -> str:
        """The worker id claims use when they are given none."""
        return str(self._core.worker_id)

    def shard_for(self, job_id: str) -> Q:
        """The shard that holds (or would hold) ``job_id``."""
        return self.shards[shard_of(check_job_id(job_id), len(self.shards))]

    shard_stats = Operation(ShardedOps.shard_stats)


class ShardedQueue(ShardedBase[Queue], SyncQueueAPI):
    """One logical queue over ``shards`` hash tags; the API of ``leaseq.Queue``.

    ``settings`` are those of ``Queue`` (keyword-only, validated, unknown
    ones rejected) and apply to every shard. Operations on one job go to its
    shard; claims rotate over the shards; ``reap``, ``purge``, ``stats`` and
    ``retry_all_dead`` cover all of them.
    """

    _queue_class = Queue


def sharded_names(tags: Iterable[str]) -> dict[str, int]:
    """Group hash tags found by ``Queue.queues`` into queues: ``{name: shards}``,
    0 for a plain queue, else one more than the highest shard index seen (a shard
    that never held a job has no keys yet, so this is a lower bound)."""
    out: dict[str, int] = {}
    for tag in tags:
        name, index = split_shard(tag)
        out[name] = max(out.get(name, 0), 0 if index is None else index + 1)
    return out


def stored_shards(redis: Any, prefix: str, name: str) -> int | None:
    """The shard count recorded for the sharded queue ``name`` (sync client), or None."""
    with _redis.translate_errors():
        raw = redis.hget(QueueKeys(prefix, name).sharding, "shards")
    return None if raw is None else int(raw)


def stats_many(
    redis: Any, targets: Iterable[Queue | ShardedQueue], calls: dict[str, Any] | None = None
) -> list[Any]:
    """Many queues' ``stats()`` in a few pipelined round trips (a plain queue's
    stats is one script call: they all go in one pipeline; a sharded queue's
    operations are run together), not one round trip per queue. Per queue, in
    order: its Stats, or the leaseq error it met (a key damaged by hand).
    ``calls``: a plain queue's stats call kept by name between uses (the call
    is the same every time), for a caller that reads the same queues often."""
    targets = list(targets)
    out: list[Any] = [None] * len(targets)
    plain = [i for i, t in enumerate(targets) if not isinstance(t, ShardedQueue)]
    built = []
    for i in plain:
        t = targets[i]
        call = None if calls is None else calls.get(t.name)
        if call is None:
            call = stats_call(cast(Queue, t)._core, 10.0)  # as QueueOps.stats makes it
            if calls is not None:
                calls[t.name] = call
        built.append(call)
    for i, got in zip(plain, call_many(redis, built), strict=True):
        out[i] = got
    sharded = [i for i, t in enumerate(targets) if isinstance(t, ShardedQueue)]
    ops = [(targets[i], targets[i]._ops.stats()) for i in sharded]
    for i, got in zip(sharded, drive_many(redis, ops), strict=True):
        out[i] = got
    return out


def known_queues(redis: Any, prefix: str = "leaseq") -> dict[str, int]:
    """Every queue under ``prefix`` on a sync client: ``{name: shards}``, 0 for a
    plain queue; a sharded queue's count is the one it recorded (its keys only
    give a lower bound: a shard that never held a job has none)."""
    from leaseq.queue import Queue

    found = sharded_names(Queue.queues(redis, prefix))
    return {
        name: (stored_shards(redis, prefix, name) or shards) if shards else 0
        for name, shards in found.items()
    }
