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

See docs/scaling.md.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ._core import block_until
from .errors import DamagedRow, InvalidArgument, LeaseLost
from .keys import MAX_SHARDS, check_job_id, new_job_ids, shard_of, split_shard
from .queue import Queue, connect
from .types import Job, Lease, State, Stats

__all__ = ["ShardedQueue", "merge_stats", "sharded_names"]

WAKE_SLICE = 0.1
"""Longest wait on one shard's wake list while a blocking claim sits idle.

Wake lists of different shards are in different slots, so one BLPOP cannot
watch them all on a cluster: an idle claimer watches one shard at a time
and looks at all of them at least every ``WAKE_SLICE * shards`` seconds."""


class ShardedQueue:
    """One logical queue over ``shards`` hash tags; the API of ``leaseq.Queue``.

    ``settings`` are those of ``Queue`` (keyword-only, validated, unknown
    ones rejected) and apply to every shard. Operations on one job go to its
    shard; claims rotate over the shards; ``reap``, ``purge``, ``stats`` and
    ``retry_all_dead`` cover all of them.
    """

    def __init__(self, name: str, *, shards: int, redis: Any, **settings: Any) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
            raise InvalidArgument(f"shards must be an integer 1..{MAX_SHARDS}, not {shards!r}")
        if "shard" in settings:
            raise TypeError("ShardedQueue() got an unexpected keyword argument 'shard'")
        self.shards: tuple[Queue, ...] = tuple(
            Queue(name, redis=redis, shard=i, **settings) for i in range(shards)
        )
        self.redis = redis
        self._cursor = itertools.count()

    @classmethod
    def from_url(cls, url: str, name: str, *, shards: int, **settings: Any) -> ShardedQueue:
        """A sharded queue on a new client for ``url``; settings as for ``Queue``."""
        return cls(name, shards=shards, redis=connect(url), **settings)

    def __repr__(self) -> str:
        return f"ShardedQueue({self.name!r}, shards={len(self.shards)})"

    @property
    def name(self) -> str:
        return self.shards[0].name

    @property
    def worker_id(self) -> str:
        return self.shards[0].worker_id

    def shard_for(self, job_id: str) -> Queue:
        """The shard that holds (or would hold) ``job_id``."""
        return self.shards[shard_of(check_job_id(job_id), len(self.shards))]

    def _for(self, lease: Lease) -> Queue:
        return self.shards[shard_of(lease.id, len(self.shards))]

    def _rotation(self) -> list[Queue]:
        start = next(self._cursor) % len(self.shards)
        return [*self.shards[start:], *self.shards[:start]]

    # -- producing ----------------------------------------------------------

    def enqueue(
        self,
        payload: Any,
        *,
        id: str | None = None,
        max_attempts: int | None = None,
        delay: float | None = None,
        priority: int = 0,
    ) -> str:
        """Add one job to its id's shard; ``id`` defaults to a fresh random id. Returns the id."""
        job_id = new_job_ids(1)[0] if id is None else id
        return self.shard_for(job_id).enqueue(
            payload, id=job_id, max_attempts=max_attempts, delay=delay, priority=priority
        )

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        max_attempts: int | None = None,
        delay: float | None = None,
        priority: int = 0,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Add many jobs: every item is validated first (one bad item writes nothing),
        then one script call per shard per 1000 jobs. Returns the ids in order.

        Atomic per shard call, not across shards: a Redis error midway can
        leave earlier shards written (re-running with the same ids is safe).
        """
        items = list(payloads)
        if ids is not None and len(ids) != len(items):
            raise InvalidArgument(f"{len(ids)} ids for {len(items)} payloads")
        job_ids = new_job_ids(len(items)) if ids is None else [check_job_id(i) for i in ids]
        groups: dict[int, tuple[list[str], list[Any]]] = {}
        for job_id, payload in zip(job_ids, items, strict=True):
            group = groups.setdefault(shard_of(job_id, len(self.shards)), ([], []))
            group[0].append(job_id)
            group[1].append(payload)
        # Build (validate and encode) every call of every shard before any runs.
        plans = [
            (
                self.shards[index],
                self.shards[index]._core.enqueue_calls(
                    payloads, group_ids, max_attempts, delay, priority
                )[1],
            )
            for index, (group_ids, payloads) in groups.items()
        ]
        for shard, calls in plans:
            for call in calls:
                shard._run(call)
        return job_ids

    # -- consuming ------------------------------------------------------------

    def claim(
        self, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Lease | None:
        """Lease one job from the next non-empty shard, or None (``block``: seconds to wait)."""
        leases = self.claim_many(1, ttl=ttl, worker=worker, block=block)
        return leases[0] if leases else None

    def claim_many(
        self, count: int, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> list[Lease]:
        """Lease up to ``count`` jobs, filling from shard after shard in rotation."""
        give_up = block_until(block, time.monotonic())
        while True:
            leases, wait = self.claim_now(count, ttl, worker)
            if leases or give_up is None:
                return leases
            left = give_up - time.monotonic()
            if left <= 0:
                return leases
            self.wait_for_wake(min(left, WAKE_SLICE if wait is None else wait))

    def claim_now(
        self, count: int, ttl: float = 30.0, worker: str | None = None, started: int | None = None
    ) -> tuple[list[Lease], float | None]:
        """One pass over the shards that never waits (the Worker's claim): the leases,
        and the seconds until something may become claimable by itself. ``started``:
        how many of the leases (in order) go to a handler at once (None: all)."""
        leases: list[Lease] = []
        hint: float | None = None
        for shard in self._rotation():
            first = None if started is None else max(0, started - len(leases))
            got, wait = shard.claim_now(count - len(leases), ttl, worker, first)
            leases += got
            if wait is not None:
                hint = wait if hint is None else min(hint, wait)
            if len(leases) >= count:
                break
        return leases, hint

    def nudge(self) -> None:
        """End a blocked claimer's wait now (its WAKE_SLICE wait is on any one shard)."""
        for shard in self.shards:
            shard.nudge()

    def wait_for_wake(self, timeout: float) -> bool:
        """Wait up to ``min(timeout, WAKE_SLICE)`` on the next shard's wake list."""
        return self._rotation()[0].wait_for_wake(min(timeout, WAKE_SLICE))

    def extend(self, lease: Lease, ttl: float = 30.0) -> Lease:
        """As ``Queue.extend``, on the lease's shard. Raises LeaseLost."""
        return self._for(lease).extend(lease, ttl)

    def extend_many(
        self, leases: Sequence[Lease], ttl: float = 30.0, started: Sequence[bool] | None = None
    ) -> list[Lease | LeaseLost]:
        """As ``Queue.extend_many``: one batch per shard, results in the given order."""
        out: list[Lease | LeaseLost | None] = [None] * len(leases)
        groups: dict[int, list[int]] = {}
        for i, lease in enumerate(leases):
            groups.setdefault(shard_of(lease.id, len(self.shards)), []).append(i)
        for index, positions in groups.items():
            flags = None if started is None else [started[i] for i in positions]
            results = self.shards[index].extend_many([leases[i] for i in positions], ttl, flags)
            for i, result in zip(positions, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    def complete(
        self, lease: Lease, result: Any = None, *, effects: Sequence[Any] | None = None
    ) -> None:
        """As ``Queue.complete``, on the lease's shard. ``effects`` keys must carry
        that shard's tag (``self.shard_for(lease.id).keys.tag``). Raises LeaseLost."""
        self._for(lease).complete(lease, result, effects=effects)

    def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[LeaseLost]:
        """Complete many leases, one batch per shard; return the refusals."""
        if results is not None and len(results) != len(leases):
            raise InvalidArgument(f"{len(results)} results for {len(leases)} leases")
        groups: dict[int, list[int]] = {}
        for i, lease in enumerate(leases):
            groups.setdefault(shard_of(lease.id, len(self.shards)), []).append(i)
        lost: list[LeaseLost] = []
        for index, members in groups.items():
            res = None if results is None else [results[i] for i in members]
            lost += self.shards[index].complete_many([leases[i] for i in members], res)
        return lost

    def fail(
        self, lease: Lease, error: object, retry_in: float | None = None, *, dead: bool = False
    ) -> State:
        """As ``Queue.fail``, on the lease's shard. Raises LeaseLost."""
        return self._for(lease).fail(lease, error, retry_in, dead=dead)

    def release(self, lease: Lease) -> None:
        """As ``Queue.release``, on the lease's shard."""
        self._for(lease).release(lease)

    def once(self, lease: Lease, name: str) -> bool:
        """As ``Queue.once``, on the lease's shard."""
        return self._for(lease).once(lease, name)

    # -- maintenance and operators ---------------------------------------------

    def reap(self) -> tuple[int, int]:
        """Reap every shard: (returned to pending, dead-lettered), summed."""
        requeued = died = 0
        for shard in self.shards:
            r, d = shard.reap()
            requeued, died = requeued + r, died + d
        return requeued, died

    def get(self, job_id: str) -> Job | None:
        return self.shard_for(job_id).get(job_id)

    def ls(
        self,
        state: State | str,
        *,
        offset: int = 0,
        limit: int = 100,
        damaged: list[DamagedRow] | None = None,
    ) -> list[Job]:
        """Jobs in ``state``, shard after shard (index order within each shard);
        ``damaged`` as for ``Queue.ls``."""
        out: list[Job] = []
        skip = offset
        for shard in self.shards:
            if len(out) >= limit:
                break
            jobs = shard.ls(state, offset=0, limit=skip + limit - len(out), damaged=damaged)
            taken = jobs[skip:]
            skip = max(0, skip - len(jobs))
            out += taken
        return out[:limit]

    def stats(self, soon: float = 10.0) -> Stats:
        """Every shard's stats, summed: counts and totals add up, the oldest pending
        age is the largest, the next due time the nearest."""
        return merge_stats(self.name, self.shard_stats(soon))

    def shard_stats(self, soon: float = 10.0) -> list[Stats]:
        """One Stats per shard, in shard order: to see skew."""
        return [shard.stats(soon) for shard in self.shards]

    def cancel(self, job_id: str) -> bool:
        return self.shard_for(job_id).cancel(job_id)

    def retry_dead(self, job_id: str, *, attempts: int | None = None) -> int:
        return self.shard_for(job_id).retry_dead(job_id, attempts=attempts)

    def retry_all_dead(self, *, attempts: int | None = None) -> int:
        return sum(shard.retry_all_dead(attempts=attempts) for shard in self.shards)

    def purge(self, state: State | str) -> int:
        return sum(shard.purge(state) for shard in self.shards)


def sharded_names(tags: Iterable[str]) -> dict[str, int]:
    """Group hash tags found by ``Queue.queues`` into queues: ``{name: shards}``,
    0 for a plain queue, else one more than the highest shard index seen (a shard
    that never held a job has no keys yet, so this is a lower bound)."""
    out: dict[str, int] = {}
    for tag in tags:
        name, index = split_shard(tag)
        out[name] = max(out.get(name, 0), 0 if index is None else index + 1)
    return out


def merge_stats(name: str, parts: Sequence[Stats]) -> Stats:
    """One Stats for a sharded queue from its shards' Stats."""

    def most(values: Iterable[float | None], pick: Any) -> float | None:
        present = [v for v in values if v is not None]
        return pick(present) if present else None

    totals: dict[str, int] = {}
    for part in parts:
        for key, value in part.totals.items():
            totals[key] = totals.get(key, 0) + value
    return Stats(
        queue=name,
        pending=sum(p.pending for p in parts),
        scheduled=sum(p.scheduled for p in parts),
        active=sum(p.active for p in parts),
        succeeded=sum(p.succeeded for p in parts),
        dead=sum(p.dead for p in parts),
        cancelled=sum(p.cancelled for p in parts),
        expired=sum(p.expired for p in parts),
        expiring_soon=sum(p.expiring_soon for p in parts),
        oldest_pending_age=most((p.oldest_pending_age for p in parts), max),
        next_due_in=most((p.next_due_in for p in parts), min),
        server_time=max(p.server_time for p in parts),
        totals=totals,
    )
