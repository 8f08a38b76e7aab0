"""Issue 9, defect 10: succeeded rows are bounded by count as well as age.

Each completion of k jobs trims at most k + 100 of the oldest succeeded rows
past ``keep_succeeded_count`` (default 10,000), so the cost per completion
stays O(1) amortised and a lowered bound is caught up with.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq.store.core import DEFAULT_KEEP_SUCCEEDED_COUNT
from tests.support.backends import Clock
from tests.support.servers import wait_until
from tests.support.store import claim_one, row


def _finish(q: leaseq.Queue, n: int, prefix: str) -> list[str]:
    ids = q.enqueue_many(range(n), ids=[f"{prefix}{i:03}" for i in range(n)])
    for lease in q.claim_many(n):
        q.complete(lease)
    return ids


def test_the_default_bound_is_ten_thousand() -> None:
    assert DEFAULT_KEEP_SUCCEEDED_COUNT == 10_000
    import fakeredis

    q = leaseq.Queue("d", redis=fakeredis.FakeRedis())
    assert q._core.keep_count == 10_000


def test_only_the_newest_rows_are_kept(r: Any) -> None:
    q = leaseq.Queue("keep", redis=r, keep_succeeded=3600.0, keep_succeeded_count=5)
    ids = _finish(q, 20, "j")
    assert sorted(m.decode() for m in r.zrange(q.keys.succeeded, 0, -1)) == ids[-5:]
    assert sorted(k.decode().rsplit(":", 1)[1] for k in r.keys(q.keys.job("*"))) == ids[-5:]
    assert q.stats().succeeded == 5 and q.stats().totals["succeeded"] == 20


def test_a_lowered_bound_is_caught_up_with(r: Any) -> None:
    _finish(leaseq.Queue("low", redis=r, keep_succeeded_count=300), 300, "a")
    q = leaseq.Queue("low", redis=r, keep_succeeded_count=10)
    _finish(q, 1, "b")  # trims up to 1 + 100 rows
    assert r.zcard(q.keys.succeeded) == 200
    _finish(q, 1, "c")
    _finish(q, 1, "d")
    assert r.zcard(q.keys.succeeded) == 10
    assert len(r.keys(q.keys.job("*"))) == 10


def test_an_id_enqueued_again_is_not_trimmed_by_its_stale_entry(r: Any, clock: Clock) -> None:
    keep = clock.lease(5.0, 0.3)
    q = leaseq.Queue("again", redis=r, keep_succeeded=keep, keep_succeeded_count=2)
    q.enqueue("x", id="a")
    done = claim_one(q)
    q.complete(done)
    clock.advance(keep + 0.05)  # the row expires; its index entry waits for a trim
    if not clock.fake:
        wait_until(lambda: not r.exists(q.keys.job("a")), what="the row to expire")
    r.zadd(q.keys.succeeded, {"a": 0})  # the stale entry, oldest of all
    q.enqueue("y", id="a", delay=3600.0)  # the id is free again: a new row
    _finish(q, 3, "n")
    assert row(q, "a")["state"] == "scheduled"


def test_none_keeps_every_row_and_zero_deletes_at_once(r: Any) -> None:
    q = leaseq.Queue("none", redis=r, keep_succeeded_count=None)
    _finish(q, 30, "k")
    assert r.zcard(q.keys.succeeded) == 30
    z = leaseq.Queue("zero", redis=r, keep_succeeded_count=0)
    _finish(z, 3, "z")
    assert r.zcard(z.keys.succeeded) == 0 and not r.keys(z.keys.job("*"))


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_a_bad_bound_is_refused_at_construction(r: Any, bad: Any) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Queue("bad", redis=r, keep_succeeded_count=bad)
    assert r.dbsize() == 0


def test_rows_kept_until_purged_are_still_trimmed_oldest_first(r: Any, clock: Clock) -> None:
    q = leaseq.Queue("forever", redis=r, keep_succeeded=None, keep_succeeded_count=3)
    for name in ["z", "y", "x", "w", "v"]:  # ids in reverse order of finishing
        q.enqueue(name, id=name)
        q.complete(claim_one(q))
        clock.advance(clock.lease(1.0, 0.002))
    assert sorted(m.decode() for m in r.zrange(q.keys.succeeded, 0, -1)) == ["v", "w", "x"]
    assert r.pttl(q.keys.job("v")) == -1
