"""Many queues read together: ``leaseq.sharded.stats_many`` (one pipeline of
stats script calls; a sharded queue's operations run side by side through
``drive_many``) gives what each queue's own ``stats()`` gives, survives a
script cache flushed under it, and names a queue damaged by hand without
losing the others — on fakeredis (the plain scripts) and a real server.
"""

from __future__ import annotations

from typing import Any

import leaseq
from leaseq.errors import DamagedKey
from leaseq.sharded import stats_many


def _fill(r: Any) -> list[leaseq.Queue | leaseq.ShardedQueue]:
    targets: list[leaseq.Queue | leaseq.ShardedQueue] = []
    for i in range(300):
        q = leaseq.Queue(f"tenant-{i:03d}", redis=r)
        q.enqueue_many([{"n": n} for n in range(i % 5 + 1)])
        targets.append(q)
    hot = leaseq.ShardedQueue("hot", shards=3, redis=r)
    hot.enqueue_many([{"i": i} for i in range(30)])
    hot.claim_many(4, ttl=60.0)
    targets.append(hot)
    return targets


def _counts(s: Any) -> tuple[str, dict[leaseq.State, int]]:
    assert isinstance(s, leaseq.Stats), s
    return s.queue, s.counts()


def test_stats_many_equals_each_queues_stats(r: Any) -> None:
    targets = _fill(r)
    together = [_counts(s) for s in stats_many(r, targets)]
    assert together == [_counts(t.stats()) for t in targets]
    assert together[-1][1][leaseq.State.ACTIVE] == 4
    r.script_flush()  # every stats call meets NOSCRIPT: loaded, sent again
    calls: dict[str, Any] = {}
    assert [_counts(s) for s in stats_many(r, targets, calls)] == together
    assert len(calls) == 300  # kept for the next read
    assert [_counts(s) for s in stats_many(r, targets, calls)] == together


def test_stats_many_names_a_damaged_queue_and_reads_the_rest(r: Any) -> None:
    targets = _fill(r)[:10]
    r.hset(targets[3].keys.meta, "enqueued", "lots")  # a counter that is not a number
    got = stats_many(r, targets)
    assert isinstance(got[3], DamagedKey)
    assert all(isinstance(s, leaseq.Stats) for i, s in enumerate(got) if i != 3)
