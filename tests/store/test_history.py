"""History that survives restarts (lua/lib/bump_counter.lua, lua/history.lua,
leaseq.store.history): per-minute and per-ten-minute counts written by the scripts
that bump the counters, in the same call, with bounded retention. On
fakeredis and a real server, sync and async.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq.store.history import HOUR, TEN_MINUTES
from tests.support.backends import Clock
from tests.support.store import claim_one

# -- the behaviour, written once (re-run on leaseq.aio.Queue at the bottom) ------


def _now(q: leaseq.Queue) -> dict[str, int]:
    h = q.history()
    assert len(h.minutes) == HOUR and len(h.tens) == TEN_MINUTES
    assert h.minutes[-1].start <= h.server_time < h.minutes[-1].start + 60
    assert h.tens[-1].start <= h.server_time < h.tens[-1].start + 600
    assert h.minutes[-1].start - h.minutes[0].start == 59 * 60
    # Within one minute the two resolutions agree, bucket for bucket of now.
    return dict(h.minutes[-1].counts)


def test_each_transition_counts_in_the_current_minute(q: leaseq.Queue, clock: Clock) -> None:
    ttl = clock.lease(5.0, 0.05)
    q.enqueue_many([{"n": i} for i in range(5)])
    q.complete(claim_one(q))
    q.fail(claim_one(q), "boom", retry_in=0)  # a retry: failed, not dead
    q.fail(claim_one(q), "boom", dead=True)  # failed and dead
    lease = q.claim(ttl=ttl)
    assert lease is not None
    clock.past(lease.deadline)
    q.reap()  # expired, back to pending
    got = _now(q)
    if got != {"enqueued": 5, "succeeded": 1, "failed": 2, "dead": 1, "expired": 1}:
        # The real server's minute may have turned mid-test: add the one before.
        h = q.history()
        got = {}
        for b in h.minutes[-2:]:
            for key, value in b.counts.items():
                got[key] = got.get(key, 0) + value
    assert got == {"enqueued": 5, "succeeded": 1, "failed": 2, "dead": 1, "expired": 1}
    totals = q.stats().totals
    assert all(totals[k] == v for k, v in got.items())


def test_a_deduplicated_enqueue_counts_nothing(q: leaseq.Queue) -> None:
    q.enqueue({"n": 1}, id="a")
    q.enqueue({"n": 1}, id="a")
    assert sum(b.get("enqueued") for b in q.history().minutes) == 1


def test_a_replayed_complete_counts_once(q: leaseq.Queue) -> None:
    q.enqueue({"n": 1})
    lease = claim_one(q)
    q.complete(lease)
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lease)
    assert sum(b.get("succeeded") for b in q.history().minutes) == 1


def test_buckets_expire_by_themselves(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"n": 1})
    keys = [k for k in r.keys(q.keys.history_prefix + "*")]
    assert len(keys) == 2
    ttls = sorted(r.pttl(k) / 1000 for k in keys)
    assert 60 * 60 < ttls[0] <= 61 * 60  # the minute: kept an hour and a bit
    assert 24 * 3600 < ttls[1] <= 24 * 3600 + 20 * 60  # the ten minutes: a day and a bit
    # Only the bump that makes a field sets the expiry; later bumps of it, and
    # other fields, leave the bucket's fixed end as it was.
    q.enqueue({"n": 2})
    q.complete(claim_one(q))
    assert {k for k in r.keys(q.keys.history_prefix + "*")} == set(keys)
    again = sorted(r.pttl(k) / 1000 for k in keys)
    assert all(0 < b <= a for a, b in zip(ttls, again, strict=True))


def test_a_queue_with_no_history_reads_zeros(q: leaseq.Queue, r: Any) -> None:
    h = q.history()
    assert all(not b.counts for b in [*h.minutes, *h.tens])
    assert r.keys("*") == []  # reading writes nothing, not even the meta key


def test_drop_deletes_the_history_too(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": 1}, {"n": 2}])
    q.complete(claim_one(q))
    q.drop()
    assert r.keys("*") == []


# -- time moving: the frozen clock only ---------------------------------------------


def test_buckets_roll_over_with_the_server_clock(
    q: leaseq.Queue, r: Any, clock: Clock, backend: str
) -> None:
    if backend != "fake":
        pytest.skip("needs the frozen clock: minutes and hours pass")
    q.enqueue({"n": 1})
    clock.advance(60.0)
    q.enqueue_many([{"n": 2}, {"n": 3}])
    h = q.history()
    assert [b.get("enqueued") for b in h.minutes[-2:]] == [1, 2]
    clock.advance(30 * 60.0)
    h = q.history()
    assert sum(b.get("enqueued") for b in h.minutes) == 3
    assert sum(b.get("enqueued") for b in h.tens) == 3
    clock.advance(40 * 60.0)  # past the hour: the minute buckets are gone
    h = q.history()
    assert sum(b.get("enqueued") for b in h.minutes) == 0
    assert sum(b.get("enqueued") for b in h.tens) == 3
    clock.advance(24 * 3600.0)
    assert sum(b.get("enqueued") for b in q.history().tens) == 0
    assert r.keys(q.keys.history_prefix + "*") == []  # expired in Redis, not only hidden


def test_a_sharded_queue_sums_its_shards(r: Any) -> None:
    sq = leaseq.ShardedQueue("emails", shards=3, redis=r)
    sq.enqueue_many([{"n": i} for i in range(30)])
    h = sq.history()
    assert h.queue == "emails"
    assert sum(b.get("enqueued") for b in h.minutes) == 30
    assert sum(b.get("enqueued") for b in h.tens) == 30


# The async re-run of these cases is tests/transport/test_aio.py's (SUITE_MODULES).
