"""Lease operations of a queue made of parts, written once: ``LeaseRouting``.

A sharded queue (``ShardedOps``: its shards) and a worker's set of queues
(``QueueSetOps``: its queues) each hold several ``QueueOps``-like parts. A
lease belongs to exactly one part; these operations send it there, and send
a batch as one call per part with the results back in the given order. Each
of the two is given a ``LeaseRouting`` as ``leases`` and takes the table of
those operations from ``RoutedLeases``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leaseq.errors import InvalidArgument, LeaseLost
from leaseq.store.queue_ops import through
from leaseq.store.steps import Batch, Call, Op, joined
from leaseq.types import Lease, State

__all__ = ["LeaseRouting"]


class LeaseRouting:
    """Extend, complete, fail, release, once, progress and reap over ``parts``;
    ``part_index(lease)`` says which part holds a lease."""

    def __init__(self, parts: Sequence[Any], part_index: Callable[[Lease], int]) -> None:
        self.parts = tuple(parts)
        self.part_index = part_index

    def _for(self, lease: Lease) -> Any:
        return self.parts[self.part_index(lease)]

    def _lease_groups(self, leases: Sequence[Lease]) -> dict[int, list[int]]:
        """Positions of ``leases`` grouped by part index, each group in order."""
        groups: dict[int, list[int]] = {}
        for i, lease in enumerate(leases):
            groups.setdefault(self.part_index(lease), []).append(i)
        return groups

    def extend(self, lease: Lease, ttl: float = 30.0) -> Op[Lease]:
        """As ``Queue.extend``, on the lease's shard (or queue). Raises LeaseLost."""
        renewed: Lease = yield from self._for(lease).extend(lease, ttl)
        return renewed

    def extend_many(
        self,
        leases: Sequence[Lease],
        ttl: float = 30.0,
        started: Sequence[bool] | None = None,
        waiting: Sequence[bool] | None = None,
    ) -> Op[list[Lease | LeaseLost]]:
        """As ``Queue.extend_many``: one batch per shard (or queue), results in the
        given order."""
        out: list[Lease | LeaseLost | None] = [None] * len(leases)
        for index, positions in self._lease_groups(leases).items():
            flags = None if started is None else [started[i] for i in positions]
            wait = None if waiting is None else [waiting[i] for i in positions]
            part = [leases[i] for i in positions]
            results = yield from self.parts[index].extend_many(part, ttl, flags, wait)
            for i, result in zip(positions, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    def complete(
        self,
        lease: Lease,
        result: Any = None,
        *,
        effects: Sequence[Any] | None = None,
        cost: float | None = None,
    ) -> Op[None]:
        """As ``Queue.complete``, on the lease's shard (or queue). ``effects`` keys
        must carry its tag (``self.shard_for(lease.id).keys.tag`` for a shard).
        Raises LeaseLost."""
        yield from self._for(lease).complete(lease, result, effects=effects, cost=cost)

    def complete_many(
        self,
        leases: Sequence[Lease],
        results: Sequence[Any] | None = None,
        costs: Sequence[float | None] | None = None,
    ) -> Op[list[LeaseLost]]:
        """Complete many leases, one batch per shard (or queue); return the refusals.
        Every result is encoded before any part's call runs: one that will not
        encode raises InvalidPayload with nothing written on any part."""
        return (yield from joined(self.complete_calls(leases, results, costs)))

    def complete_calls(
        self,
        leases: Sequence[Lease],
        results: Sequence[Any] | None = None,
        costs: Sequence[float | None] | None = None,
    ) -> list[Call[Batch[LeaseLost]]]:
        """The calls of ``complete_many`` over every part, all built (and every
        result encoded) before the first runs."""
        for name, values in (("results", results), ("costs", costs)):
            if values is not None and len(values) != len(leases):
                raise InvalidArgument(f"{len(values)} {name} for {len(leases)} leases")
        calls: list[Call[Batch[LeaseLost]]] = []
        for index, members in self._lease_groups(leases).items():
            part = None if results is None else [results[i] for i in members]
            spent = None if costs is None else [costs[i] for i in members]
            calls += self.parts[index].complete_calls([leases[i] for i in members], part, spent)
        return calls

    def fail(
        self,
        lease: Lease,
        error: object,
        retry_in: float | None = None,
        *,
        dead: bool = False,
        traceback: str | None = None,
        cost: float | None = None,
    ) -> Op[State]:
        """As ``Queue.fail``, on the lease's shard (or queue). Raises LeaseLost."""
        state: State = yield from self._for(lease).fail(
            lease, error, retry_in, dead=dead, traceback=traceback, cost=cost
        )
        return state

    def release(self, lease: Lease, *, cost: float | None = None) -> Op[None]:
        """As ``Queue.release``, on the lease's shard (or queue)."""
        yield from self._for(lease).release(lease, cost=cost)

    def once(self, lease: Lease, name: str) -> Op[bool]:
        """As ``Queue.once``, on the lease's shard (or queue)."""
        first: bool = yield from self._for(lease).once(lease, name)
        return first

    def progress(self, lease: Lease, value: Any) -> Op[None]:
        """Store the job's progress on its shard (or queue). Raises LeaseLost,
        InvalidPayload."""
        yield from self._for(lease).progress(lease, value)

    def record_step(self, lease: Lease, name: str, value: Any) -> Op[Any]:
        """As ``Queue.record_step``, on the lease's shard (or queue)."""
        recorded: Any = yield from self._for(lease).record_step(lease, name, value)
        return recorded

    def recorded_steps(self, lease: Lease) -> Op[dict[str, Any]]:
        """As ``Queue.recorded_steps``, on the lease's shard (or queue)."""
        steps: dict[str, Any] = yield from self._for(lease).recorded_steps(lease)
        return steps

    def suspend(
        self, lease: Lease, name: str, seconds: float | None, key: str | None = None
    ) -> Op[float | None]:
        """As ``Queue.suspend``, on the lease's shard (or queue)."""
        wakes: float | None = yield from self._for(lease).suspend(lease, name, seconds, key)
        return wakes

    def reap(self) -> Op[tuple[int, int]]:
        """Reap every shard (or queue): (returned to pending, dead-lettered), summed."""
        requeued = died = 0
        for part in self.parts:
            r, d = yield from part.reap()
            requeued, died = requeued + r, died + d
        return requeued, died


class RoutedLeases:
    """The lease operations of a queue made of parts, each sent to the lease's
    part through the ``LeaseRouting`` the class sets as ``leases``."""

    leases: LeaseRouting

    extend = through("leases", LeaseRouting.extend)
    extend_many = through("leases", LeaseRouting.extend_many)
    complete = through("leases", LeaseRouting.complete)
    complete_many = through("leases", LeaseRouting.complete_many)
    complete_calls = through("leases", LeaseRouting.complete_calls)
    fail = through("leases", LeaseRouting.fail)
    release = through("leases", LeaseRouting.release)
    once = through("leases", LeaseRouting.once)
    progress = through("leases", LeaseRouting.progress)
    record_step = through("leases", LeaseRouting.record_step)
    recorded_steps = through("leases", LeaseRouting.recorded_steps)
    suspend = through("leases", LeaseRouting.suspend)
    reap = through("leases", LeaseRouting.reap)
