"""Several queues served by one worker: ``QueueSetOps``, written once.

The operations a worker runs (claim, wait for work, heartbeat, finish, reap,
register), over the queues' own ``QueueOps`` (or a sharded queue's
``ShardedOps``). ``leaseq.QueueSet`` and ``leaseq.aio.QueueSet`` run them on
their client through ``leaseq.transport.drive``, as the queues run theirs.

**Order.** *Strict*: every claim fills from the first queue that has ready
jobs, then the next: a later queue runs only while the earlier ones have
nothing ready. *Weighted* (``weights``): the job slots of each claim are
dealt out by smooth weighted round robin (nginx's): over any run of claims
while every queue has work, each queue gets its weight's share of the slots,
in an even interleave (5:3:1 deals ``high`` 5 of every 9, never starving
``low``); slots a queue cannot fill pass to the others.

**Guarantees** stay per queue: each claim is one script on one queue, so
pause, limits, fair groups, leases and fencing hold exactly as for one queue.
A lease finds its way back by ``lease.queue``.

**Waiting.** An idle worker blocks on every queue's wake list at once (one
BLPOP over them all) when the queues share a slot-less server; on a cluster,
where the lists live in different slots, it watches one list at a time for
``WAKE_SLICE`` seconds, in rotation, as a sharded queue does.

A lease goes back to its queue through ``leases`` (``LeaseRouting``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.store.claim import WAKE_SLICE
from leaseq.store.lease_routing import LeaseRouting, RoutedLeases
from leaseq.store.steps import Op, Wake
from leaseq.types import Lease

__all__ = ["QueueSetOps"]


class QueueSetOps(RoutedLeases):
    """The worker's operations over several queues' operations (``QueueOps`` or
    ``ShardedOps``), in ``names`` order; ``weights`` (one positive integer per
    queue) makes the order weighted, None strict. ``together``: every wake list
    may be watched by one BLPOP (not a cluster)."""

    def __init__(
        self,
        members: Sequence[Any],
        names: Sequence[str],
        weights: Sequence[int] | None,
        together: bool,
    ) -> None:
        self.members = tuple(members)
        self.names = tuple(names)
        self.weights = None if weights is None else tuple(weights)
        self.together = together
        self.leases = LeaseRouting(self.members, self._part_index)
        self._index = {name: i for i, name in enumerate(self.names)}
        self._current = [0] * len(self.members)  # smooth weighted round robin
        self._cursor = itertools.count()

    @property
    def name(self) -> str:
        """``high,default,low`` (strict) or ``high:5,default:3,low:1`` (weighted)."""
        if self.weights is None:
            return ",".join(self.names)
        return ",".join(f"{n}:{w}" for n, w in zip(self.names, self.weights, strict=True))

    def _part_index(self, lease: Lease) -> int:
        index = self._index.get(lease.queue)
        if index is None:
            raise InvalidArgument(f"a lease of queue {lease.queue!r}, not one of {self.name}")
        return index

    # -- claiming ---------------------------------------------------------------

    def _deal(self, count: int) -> list[int]:
        """How many of ``count`` slots each queue gets first (see the module doc)."""
        if self.weights is None:
            return [count] + [0] * (len(self.members) - 1)
        total = sum(self.weights)
        quota = [0] * len(self.members)
        for _ in range(count):
            for i, weight in enumerate(self.weights):
                self._current[i] += weight
            pick = max(range(len(self.members)), key=self._current.__getitem__)
            self._current[pick] -= total
            quota[pick] += 1
        return quota

    def claim_now(
        self,
        count: int,
        ttl: float = 30.0,
        worker: str | None = None,
        started: int | None = None,
    ) -> Op[tuple[list[Lease], float | None]]:
        """One pass that never waits (the worker's claim): each queue claims its
        dealt share, then the slots left pass to the queues in order (strict: all
        of them, from the first queue on). Returns the leases and the soonest
        time (seconds) something may become claimable by itself in any queue."""
        leases: list[Lease] = []
        hint: float | None = None
        empty: set[int] = set()
        quota = self._deal(count)
        for rounds in (quota, None):
            for i, member in enumerate(self.members):
                want = count - len(leases) if rounds is None else rounds[i]
                if want <= 0 or i in empty:
                    continue
                first = None if started is None else max(0, started - len(leases))
                got, wait = yield from member.claim_now(want, ttl, worker, first)
                leases += got
                if len(got) < want:
                    empty.add(i)
                if wait is not None:
                    hint = wait if hint is None else min(hint, wait)
                if len(leases) >= count:
                    return leases, hint
        return leases, hint

    def nudge(self) -> Op[None]:
        """End a blocked claimer's wait now (a token on every queue's wake list)."""
        for member in self.members:
            yield from member.nudge()

    def wait_for_wake(self, timeout: float) -> Op[bool]:
        """Block up to ``timeout`` seconds on every queue's wake list at once (one
        BLPOP), or, on a cluster, up to ``WAKE_SLICE`` on the next one in turn."""
        keys = [
            shard.keys.wake
            for member in self.members
            for shard in getattr(member, "shards", [member])
        ]
        if self.together:
            got: bool = yield Wake(keys[0], timeout, tuple(keys[1:]))
            return got
        key = keys[next(self._cursor) % len(keys)]
        got = yield Wake(key, min(timeout, WAKE_SLICE))
        return got

    def tick(self) -> Op[int]:
        """Run every queue's due schedules; how many jobs they enqueued."""
        made = 0
        for member in self.members:
            made += yield from member.tick()
        return made

    def register_worker(
        self, worker: str, *, ttl: float, concurrency: int = 0, done: int = 0, running: int = 0
    ) -> Op[None]:
        """Refresh ``worker``'s row in every queue's registry; each row's ``queue``
        names all the queues it serves (``leaseq workers`` shows them)."""
        for member in self.members:
            yield from member.register_worker(
                worker,
                ttl=ttl,
                concurrency=concurrency,
                done=done,
                running=running,
                serving=self.name,
            )

    def unregister_worker(self, worker: str) -> Op[None]:
        """Remove ``worker``'s row from every queue's registry."""
        for member in self.members:
            yield from member.unregister_worker(worker)
