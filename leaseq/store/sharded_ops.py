"""One logical queue over its shards: ``ShardedOps``, written once.

The same sans-I/O operations as ``leaseq.store.queue_ops.QueueOps`` (same names, same
signatures: tests/transport/test_operations.py holds them to it), each built from the shards'
own ``QueueOps`` generators. ``leaseq.ShardedQueue`` and
``leaseq.aio.ShardedQueue`` run them on their clients through
``leaseq.transport.drive``, as the plain queues run ``QueueOps``.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from leaseq.errors import DamagedRow, InvalidArgument
from leaseq.store import filters as _filters
from leaseq.store import history as _hist
from leaseq.store import ready as _ready
from leaseq.store import validate as v
from leaseq.store.claim import WAKE_SLICE, block_until
from leaseq.store.durable import SIGNAL_KEEP
from leaseq.store.enqueue import check_options, enqueue_calls, enqueue_traced
from leaseq.store.events import EventSettings
from leaseq.store.history import History
from leaseq.store.keys import check_job_id, shard_of
from leaseq.store.lease_routing import LeaseRouting, RoutedLeases
from leaseq.store.limits import Limits
from leaseq.store.queue_ops import QueueOps, through
from leaseq.store.registry import WorkerInfo
from leaseq.store.schedules import Schedule
from leaseq.store.settings import parse_state
from leaseq.store.sharded_workflows import ShardedWorkflows
from leaseq.store.steps import Batch, Call, Op
from leaseq.store.wait import hold_results, wait_held, wait_names
from leaseq.types import Gone, Job, JobOptions, Lease, State, Stats

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["EVENTS_REFUSED", "ShardedOps", "merge_stats", "on_job_shard", "plain_only"]


EVENTS_REFUSED = (
    "events() works on a plain queue, not a sharded one: each shard keeps its "
    "own stream, and one cursor cannot resume several"
)
"""Each shard keeps its own stream; set_events reaches every shard, but one
cursor cannot resume several streams."""


def plain_only(op: Callable[..., Any], refusal: str | None = None) -> Callable[..., Any]:
    """``op`` of ``QueueOps`` (its name, signature and doc) refused on a sharded
    queue: the operation raises InvalidArgument at its first step.

    Schedules and limits are one plain queue's: a schedule's jobs get ids that
    do not hash to one shard, and a limit per shard is not a limit of the
    queue; the event stream is ``EVENTS_REFUSED``.
    """
    message = refusal or (
        f"{op.__name__}() works on a plain queue, not a sharded one (its shards would "
        "each hold a copy); use a plain Queue for scheduled or limited work"
    )

    @functools.wraps(op)
    def refused(self: Any, /, *args: Any, **kwargs: Any) -> Op[Any]:
        raise InvalidArgument(message)
        yield  # a generator, like every operation

    return refused


def on_job_shard(op: Callable[..., Any]) -> Callable[..., Any]:
    """``op`` of ``QueueOps`` (its name, signature and doc), whose first argument
    is a job id, run on the shard that holds that job."""
    name = op.__name__

    @functools.wraps(op)
    def routed(self: ShardedOps, /, job_id: str, *args: Any, **kwargs: Any) -> Op[Any]:
        return (yield from getattr(self.shard_for(job_id), name)(job_id, *args, **kwargs))

    return routed


class ShardedOps(RoutedLeases):
    """The operations of one logical queue over its shards' ``QueueOps``.

    A job's shard is ``crc32(id) % N`` (``keys.shard_of``), so every producer
    and consumer agrees and dedup by id holds. Claims rotate: each starts at
    the next shard and moves past empty ones. Nothing spans shards
    atomically: every transition is still one script on one shard. A lease's
    operations go to its shard through ``leases`` (``LeaseRouting``), a
    workflow's through ``workflows`` (``ShardedWorkflows``).
    """

    def __init__(self, shards: Sequence[QueueOps]) -> None:
        self.shards: tuple[QueueOps, ...] = tuple(shards)
        self.leases = LeaseRouting(self.shards, self._part_index)
        self.workflows = ShardedWorkflows(self.shards)
        self._cursor = itertools.count()

    # workflows, on one shard: leaseq.store.sharded_workflows
    enqueue_flow = through("workflows", ShardedWorkflows.enqueue_flow)
    results = through("workflows", ShardedWorkflows.results)
    parent_results = through("workflows", ShardedWorkflows.parent_results)
    children = through("workflows", ShardedWorkflows.children)

    # one job, on its shard (see ``on_job_shard``)
    wait = on_job_shard(QueueOps.wait)
    get = on_job_shard(QueueOps.get)
    cancel = on_job_shard(QueueOps.cancel)
    retry_dead = on_job_shard(QueueOps.retry_dead)
    update = on_job_shard(QueueOps.update)
    delete = on_job_shard(QueueOps.delete)
    run_now = on_job_shard(QueueOps.run_now)

    def shard_for(self, job_id: str) -> QueueOps:
        return self.shards[shard_of(check_job_id(job_id), len(self.shards))]

    def _part_index(self, lease: Lease) -> int:
        return shard_of(lease.id, len(self.shards))

    def _rotation(self) -> list[QueueOps]:
        start = next(self._cursor) % len(self.shards)
        return [*self.shards[start:], *self.shards[:start]]

    def _by_shard(self, ids: Iterable[str]) -> dict[int, list[int]]:
        """Positions of ``ids`` grouped by shard index, each group in order."""
        groups: dict[int, list[int]] = {}
        for i, job_id in enumerate(ids):
            groups.setdefault(shard_of(job_id, len(self.shards)), []).append(i)
        return groups

    # -- producing ----------------------------------------------------------

    def enqueue(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> Op[str]:
        """Add one job to its id's shard; ``id`` defaults to a fresh random id. Returns the id."""
        _no_unique(options)
        (job_id,) = self.workflows.place([id], options)
        return (yield from self.shard_for(job_id).enqueue(payload, id=job_id, **options))

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        ids: Sequence[str] | None = None,
        **options: Unpack[JobOptions],
    ) -> Op[list[str]]:
        """Add many jobs: every item is validated first (one bad item writes nothing),
        then short script calls per shard, one after another (``leaseq.store.enqueue``).
        Returns the ids in order.

        Atomic per shard call, not across shards: a Redis error midway can
        leave earlier shards written (re-running with the same ids is safe).
        """
        check_options(options, "enqueue_many")
        _no_unique(options)
        items = list(payloads)
        if ids is not None and len(ids) != len(items):
            raise InvalidArgument(f"{len(ids)} ids for {len(items)} payloads")
        job_ids = self.workflows.place(
            [None] * len(items) if ids is None else [check_job_id(i) for i in ids], options
        )

        def build(tp: str) -> tuple[list[str], Sequence[Call[Batch[int | str]]]]:
            # Validate and encode every call of every shard before any runs.
            calls = [
                call
                for index, members in self._by_shard(job_ids).items()
                for call in enqueue_calls(
                    self.shards[index].settings,
                    [items[i] for i in members],
                    [job_ids[i] for i in members],
                    options,
                    tp,
                )[1]
            ]
            return job_ids, calls

        return (yield from enqueue_traced(self.shards[0].settings.name, True, build))

    # -- consuming ------------------------------------------------------------

    def claim(
        self, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Op[Lease | None]:
        """Lease one job from the next non-empty shard, or None (``block``: seconds to wait)."""
        leases = yield from self.claim_many(1, ttl=ttl, worker=worker, block=block)
        return leases[0] if leases else None

    def claim_many(
        self, count: int, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Op[list[Lease]]:
        """Lease up to ``count`` jobs, filling from shard after shard in rotation."""
        give_up = block_until(block, time.monotonic())
        while True:
            leases, wait = yield from self.claim_now(count, ttl, worker)
            if leases or give_up is None:
                return leases
            left = give_up - time.monotonic()
            if left <= 0:
                return leases
            yield from self.wait_for_wake(min(left, WAKE_SLICE if wait is None else wait))

    def claim_now(
        self,
        count: int,
        ttl: float = 30.0,
        worker: str | None = None,
        started: int | None = None,
    ) -> Op[tuple[list[Lease], float | None]]:
        """One pass over the shards that never waits (the Worker's claim): the leases,
        and the seconds until something may become claimable by itself. ``started``:
        how many of the leases (in order) go to a handler at once (None: all)."""
        leases: list[Lease] = []
        hint: float | None = None
        for shard in self._rotation():
            first = None if started is None else max(0, started - len(leases))
            got, wait = yield from shard.claim_now(count - len(leases), ttl, worker, first)
            leases += got
            if wait is not None:
                hint = wait if hint is None else min(hint, wait)
            if len(leases) >= count:
                break
        return leases, hint

    def nudge(self) -> Op[None]:
        """End a blocked claimer's wait now (its WAKE_SLICE wait is on any one shard)."""
        for shard in self.shards:
            yield from shard.nudge()

    def wait_for_wake(self, timeout: float) -> Op[bool]:
        """Wait up to ``min(timeout, WAKE_SLICE)`` on the next shard's wake list."""
        return (yield from self._rotation()[0].wait_for_wake(min(timeout, WAKE_SLICE)))

    # -- maintenance and operators ---------------------------------------------

    def wait_many(self, ids: Sequence[str], timeout: float = 300.0) -> Op[list[Job | Gone | None]]:
        """Per id, in order, its finished Job, None or GONE (as ``Queue.wait_many``):
        every shard's rows are held first, then each shard's ids are waited for
        in turn within the one deadline (shards are in different slots, so one
        XREAD cannot watch them all on a cluster)."""
        names = wait_names(ids)
        give_up = time.monotonic() + v.delay_ms(timeout, "timeout") / 1000.0
        parts = self._by_shard(names)
        for index, members in parts.items():
            held = list(dict.fromkeys(names[i] for i in members))
            yield from hold_results(self.shards[index].settings, held, timeout)
        out: list[Job | Gone | None] = [None] * len(names)
        for index, members in parts.items():
            shard = self.shards[index].settings
            jobs = yield from wait_held(shard, [names[i] for i in members], give_up)
            for i, job in zip(members, jobs, strict=True):
                out[i] = job
        return out

    def ls(
        self,
        state: State | str,
        *,
        offset: int = 0,
        limit: int = 100,
        damaged: list[DamagedRow] | None = None,
    ) -> Op[list[Job]]:
        """Jobs in ``state``, shard after shard (index order within each shard);
        ``damaged`` as for ``Queue.ls``. ``offset`` counts jobs shown. A shard's page
        of pending may show fewer jobs than the entries it covers (the ready list's
        stale ones): its next entries are read on until the shard has no more."""
        out: list[Job] = []
        skip = offset
        pending = parse_state(state) is State.PENDING
        for shard in self.shards:
            at, entries = 0, None
            while len(out) < limit:
                want = skip + limit - len(out)
                jobs = yield from shard.ls(state, offset=at, limit=want, damaged=damaged)
                out += jobs[skip:]
                skip = max(0, skip - len(jobs))
                at += want
                if not pending:
                    break
                if entries is None:
                    entries = yield from _ready.entries_count(shard.keys)
                if at >= entries:
                    break
        return out[:limit]

    def find(
        self,
        state: State | str,
        *,
        kind: str = "",
        text: str = "",
        older_than: float | None = None,
        newer_than: float | None = None,
        age_of: str = "",
        limit: int = 100,
        damaged: list[DamagedRow] | None = None,
    ) -> Op[list[Job]]:
        """The matching jobs of ``state``, shard after shard (as ``Queue.find``)."""
        flt = _filters.job_filter(kind, text, older_than, newer_than, age_of)
        parts = [shard.settings for shard in self.shards]
        return (yield from _filters.find_jobs(parts, state, flt, limit, damaged))

    def stats(self, soon: float = 10.0) -> Op[Stats]:
        """Every shard's stats, summed: counts and totals add up, the oldest pending
        age is the largest, the next due time the nearest."""
        parts = yield from self.shard_stats(soon)
        return merge_stats(self.shards[0].settings.name, parts)

    def shard_stats(self, soon: float = 10.0) -> Op[list[Stats]]:
        """One Stats per shard, in shard order: to see skew."""
        out: list[Stats] = []
        for shard in self.shards:
            out.append((yield from shard.stats(soon)))
        return out

    def retry_all_dead(
        self, *, attempts: int | None = None, damaged: list[DamagedRow] | None = None
    ) -> Op[int]:
        """Retry every dead job of every shard (as ``Queue.retry_all_dead``)."""
        done = 0
        for shard in self.shards:
            done += yield from shard.retry_all_dead(attempts=attempts, damaged=damaged)
        return done

    def purge(self, state: State | str, *, damaged: list[DamagedRow] | None = None) -> Op[int]:
        """Purge ``state`` on every shard (as ``Queue.purge``); returns how many rows went."""
        deleted = 0
        for shard in self.shards:
            deleted += yield from shard.purge(state, damaged=damaged)
        return deleted

    def reset_clock(self) -> Op[tuple[float | None, float]]:
        """Drop every shard's clock floor: (the highest floor dropped or None, server time)."""
        floors: list[float] = []
        now = 0.0
        for shard in self.shards:
            floor, now = yield from shard.reset_clock()
            if floor is not None:
                floors.append(floor)
        return (max(floors) if floors else None), now

    # -- schedules, limits, events: a plain queue's (see ``plain_only``) --------------

    schedule = plain_only(QueueOps.schedule)
    unschedule = plain_only(QueueOps.unschedule)
    set_limits = plain_only(QueueOps.set_limits)
    set_group_limits = plain_only(QueueOps.set_group_limits)
    events = plain_only(QueueOps.events, EVENTS_REFUSED)

    def schedules(self) -> Op[list[Schedule]]:
        """A sharded queue has no schedules: always empty."""
        return []
        yield

    def tick(self) -> Op[int]:
        """A sharded queue has no schedules: nothing is ever due (0)."""
        return 0
        yield

    def limits(self) -> Op[Limits]:
        """No limits (a sharded queue cannot have any), with the active leases and
        recent claims of every shard summed."""
        active = 0
        for shard in self.shards:
            part = yield from shard.limits()
            active += part.active
        return Limits(concurrency=None, rate=None, per=None, active=active)

    # -- steering the whole queue --------------------------------------------------

    def pause(self) -> Op[bool]:
        """Pause every shard; True if any was running."""
        paused = False
        for shard in self.shards:
            paused = (yield from shard.pause()) or paused
        return paused

    def signal(self, key: str, payload: Any = None, *, keep: float = SIGNAL_KEEP) -> Op[int]:
        """Signal ``key`` on every shard (a waiter may be on any, and so may a later
        one: each keeps the signal); returns how many jobs it resumed in all."""
        resumed = 0
        for shard in self.shards:
            resumed += yield from shard.signal(key, payload, keep=keep)
        return resumed

    def resume(self) -> Op[bool]:
        """Resume every shard; True if any was paused."""
        resumed = False
        for shard in self.shards:
            resumed = (yield from shard.resume()) or resumed
        return resumed

    def drop(self, *, force: bool = False) -> Op[int]:
        """Drop every shard (as ``Queue.drop``); returns how many rows went."""
        deleted = 0
        for shard in self.shards:
            deleted += yield from shard.drop(force=force)
        return deleted

    # -- workers: registered on shard 0, which every sharded queue has ------------

    def register_worker(
        self,
        worker: str,
        *,
        ttl: float,
        concurrency: int = 0,
        done: int = 0,
        running: int = 0,
        serving: str | None = None,
    ) -> Op[None]:
        """As ``Queue.register_worker``, on shard 0 (one row per worker, not per shard)."""
        yield from self.shards[0].register_worker(
            worker,
            ttl=ttl,
            concurrency=concurrency,
            done=done,
            running=running,
            serving=serving,
        )

    def unregister_worker(self, worker: str) -> Op[None]:
        """As ``Queue.unregister_worker``, on shard 0."""
        yield from self.shards[0].unregister_worker(worker)

    def workers(self) -> Op[list[WorkerInfo]]:
        """The workers of the sharded queue (registered on shard 0)."""
        return (yield from self.shards[0].workers())

    def history(self) -> Op[History]:
        """As ``Queue.history``, every shard's buckets summed."""
        parts = []
        for shard in self.shards:
            parts.append((yield from shard.history()))
        return _hist.merge(self.shards[0].settings.name, parts)

    def set_events(
        self, enabled: bool | None = None, *, maxlen: int | None = None
    ) -> Op[EventSettings]:
        """As ``Queue.set_events``, on every shard; returns the merged settings."""
        parts = []
        for shard in self.shards:
            parts.append((yield from shard.set_events(enabled, maxlen=maxlen)))
        return _merge_event_settings(parts)

    def event_settings(self) -> Op[EventSettings]:
        """Every shard's settings merged: enabled only if on for all, entries summed."""
        parts = []
        for shard in self.shards:
            parts.append((yield from shard.event_settings()))
        return _merge_event_settings(parts)


def _merge_event_settings(parts: Sequence[EventSettings]) -> EventSettings:
    return EventSettings(
        enabled=all(p.enabled for p in parts),
        maxlen=max(p.maxlen for p in parts),
        entries=sum(p.entries for p in parts),
        first_id=None,
        last_id=None,
    )


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
        **{state.value: sum(p.counts()[state] for p in parts) for state in State},
        expired=sum(p.expired for p in parts),
        expiring_soon=sum(p.expiring_soon for p in parts),
        overdue=sum(p.overdue for p in parts),
        oldest_pending_age=most((p.oldest_pending_age for p in parts), max),
        next_due_in=most((p.next_due_in for p in parts), min),
        server_time=max(p.server_time for p in parts),
        totals=totals,
        # Paused while any shard is (pause() pauses every shard), since the earliest.
        paused=any(p.paused for p in parts),
        paused_at=most((p.paused_at for p in parts), min),
        groups_ready=sum(p.groups_ready for p in parts),
        groups_held=sum(p.groups_held for p in parts),
    )


def _no_unique(options: JobOptions) -> None:
    """A sharded queue spreads jobs by id, so a uniqueness key would hold per shard
    only: refused, before anything is written."""
    if options.get("unique") is not None:
        raise InvalidArgument("unique= needs one hash tag: use a plain Queue, not a ShardedQueue")
