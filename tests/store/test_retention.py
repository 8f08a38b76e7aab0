"""What stays in Redis over time: succeeded and cancelled rows for
keep_succeeded, and at most keep_succeeded_count of them (each completion of
k jobs trims at most k + 100 of the oldest, so the cost stays O(1)
amortised and a lowered bound is caught up with); dead rows until someone
acts; a drained queue's few fixed keys. Plus stats.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq.store.settings import DEFAULT_KEEP_SUCCEEDED_COUNT
from tests.support.backends import Clock
from tests.support.servers import wait_until
from tests.support.store import all_keys, claim_one, index, row


def test_keep_zero_deletes_the_row_at_once(r: Any) -> None:
    q = leaseq.Queue("emails", redis=r, keep_succeeded=0)
    q.enqueue("x", id="job")
    q.complete(claim_one(q), result="big result")
    assert not r.exists(q.keys.job("job"))
    assert not r.exists(q.keys.succeeded)
    stats = q.stats()
    assert stats.succeeded == 0 and stats.totals["succeeded"] == 1
    assert q.get("job") is None
    # With the row gone, the id is free again.
    assert q.enqueue("again", id="job") == "job"
    assert row(q, "job")["state"] == "pending"


def test_kept_row_expires_and_dedups_meanwhile(r: Any, clock: Clock) -> None:
    keep = clock.lease(60.0, 1.0)  # long enough that a loaded machine still dedups
    q = leaseq.Queue("emails", redis=r, keep_succeeded=keep)
    q.enqueue("x", id="job")
    q.complete(claim_one(q))
    ttl = r.pttl(q.keys.job("job"))
    assert 0 < ttl <= keep * 1000
    expires = index(q, "succeeded")["job"]
    assert expires == int(row(q, "job")["finished_at"]) + round(keep * 1000)
    assert q.stats().succeeded == 1
    assert q.enqueue("twice", id="job") == "job"
    assert row(q, "job")["state"] == "succeeded" and row(q, "job")["payload"] == '"x"'
    clock.advance(keep + 0.002)  # a key expires once the clock is past its deadline
    wait_until(lambda: not r.exists(q.keys.job("job")), what="the row to expire")
    assert q.stats().succeeded == 0
    # The index entry goes lazily, with the next finish.
    q.enqueue("y", id="next")
    q.complete(claim_one(q))
    assert list(index(q, "succeeded")) == ["next"]
    assert q.enqueue("z", id="job") == "job"
    assert row(q, "job")["state"] == "pending"


def test_keep_none_keeps_rows_until_purged(r: Any, clock: Clock) -> None:
    q = leaseq.Queue("emails", redis=r, keep_succeeded=None)
    q.enqueue("x", id="job")
    q.complete(claim_one(q))
    assert r.pttl(q.keys.job("job")) == -1
    # Scored past every real expiry, in finishing order (the count bound's oldest first).
    assert index(q, "succeeded") == {"job": 10**15 + int(row(q, "job")["finished_at"])}
    clock.advance(clock.lease(10 * 86_400.0, 0.01))
    assert q.stats().succeeded == 1
    assert q.purge("succeeded") == 1
    assert not r.exists(q.keys.job("job"))


def test_cancelled_rows_follow_keep_succeeded(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    q.cancel("job")
    assert 0 < r.pttl(q.keys.job("job")) <= 60_000
    assert "job" in index(q, "cancelled")


def test_dead_rows_never_expire(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    q.enqueue("x", id="dead-one")
    q.fail(claim_one(q), "poison", dead=True)
    for i in range(150):  # many finishes run the lazy trims
        q.enqueue(i)
    for lease in q.claim_many(150):
        q.complete(lease)
    clock.advance(clock.lease(400 * 86_400.0, 0.01))
    q.enqueue("late")
    q.complete(claim_one(q))
    assert r.pttl(q.keys.job("dead-one")) == -1
    assert list(index(q, "dead")) == ["dead-one"]
    assert q.stats().dead == 1
    assert row(q, "dead-one")["last_error"] == "poison"


def test_stats_counts(q: leaseq.Queue, clock: Clock) -> None:
    short, long = clock.lease(5.0, 0.05), clock.lease(300.0, 5.0)
    q.enqueue_many(["p1", "p2"], ids=["p1", "p2"], priority=9)
    q.enqueue("s", id="s", delay=100.0)
    q.enqueue_many(
        ["a1", "a2", "a3", "ok", "dead", "gone"], ids=["a1", "a2", "a3", "ok", "dd", "c"]
    )
    q.cancel("c")
    leases = {lease.id: lease for lease in q.claim_many(5, ttl=short)}
    assert sorted(leases) == ["a1", "a2", "a3", "dd", "ok"]
    q.complete(leases["ok"])
    q.fail(leases["dd"], "x", dead=True)
    q.extend(leases["a3"], ttl=long)
    clock.past(max(leases["a1"].deadline, leases["a2"].deadline))
    stats = q.stats(soon=long * 2)
    assert (stats.pending, stats.scheduled, stats.active) == (2, 1, 3)
    assert (stats.succeeded, stats.dead, stats.cancelled) == (1, 1, 1)
    assert stats.expired == 2
    assert stats.expiring_soon == 1
    assert q.stats(soon=0).expiring_soon == 0
    assert stats.oldest_pending_age is not None and stats.oldest_pending_age >= 0
    assert stats.next_due_in is not None and 0 < stats.next_due_in <= 100.0
    assert stats.totals["enqueued"] == 9 and stats.totals["succeeded"] == 1
    assert stats.totals["dead"] == 1 and stats.totals["cancelled"] == 1
    assert "seq" not in stats.totals
    assert q.reap() == (2, 0)
    after = q.stats()
    assert (after.pending, after.active, after.expired) == (4, 1, 0)
    assert after.totals["expired"] == 2


def test_empty_queue_stats(q: leaseq.Queue, r: Any) -> None:
    stats = q.stats()
    assert (stats.pending, stats.active, stats.dead, stats.expired) == (0, 0, 0, 0)
    assert stats.oldest_pending_age is None and stats.next_due_in is None
    assert stats.totals == {}
    assert r.dbsize() == 0


@pytest.mark.parametrize("backoff", [0.0, 0.001])
def test_drained_queue_holds_only_its_fixed_keys(r: Any, clock: Clock, backoff: float) -> None:
    q = leaseq.Queue("emails", redis=r, keep_succeeded=0, backoff=backoff)
    ids = q.enqueue_many(range(20))
    q.enqueue("later", delay=clock.lease(1.0, 0.01))
    first = q.claim_many(5, ttl=clock.lease(30.0))
    q.fail(first[0], "retry me")
    q.release(first[1])
    q.once(first[2], "marker")
    clock.past(max(lease.deadline for lease in first))
    clock.advance(0.01)
    done = 0
    while True:
        leases = q.claim_many(7, ttl=60.0)
        if not leases:
            if q.stats().scheduled == 0 and q.stats().active == 0:
                break
            clock.advance(0.01)
            continue
        for lease in leases:
            q.complete(lease)
            done += 1
    assert done == len(ids) + 1
    # History buckets expire by themselves; done (for wait) and events are
    # streams trimmed to a bound.
    history = [k for k in all_keys(r) if k.startswith(q.keys.history_prefix)]
    assert history and all(r.pttl(k) > 0 for k in history)
    fixed = sorted([q.keys.done, q.keys.events, q.keys.meta])
    assert [k for k in all_keys(r) if k not in history] == fixed


def test_an_evicting_server_gets_a_warning(redis_server: Any) -> None:
    import redis as redis_lib

    client = redis_lib.Redis(port=redis_server.port)
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        q = leaseq.Queue("evict", redis=client)
        with pytest.warns(leaseq.LeaseqWarning, match="noeviction"):
            q.stats()
        client.config_set("maxmemory-policy", "noeviction")
        quiet = leaseq.Queue("evict", redis=client)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            quiet.stats()
    finally:
        client.config_set("maxmemory-policy", "noeviction")
        client.flushall()
        client.close()


# -- the count bound on succeeded rows -------------------------------------------------


def _finish(q: leaseq.Queue, n: int, prefix: str) -> list[str]:
    ids = q.enqueue_many(range(n), ids=[f"{prefix}{i:03}" for i in range(n)])
    for lease in q.claim_many(n):
        q.complete(lease)
    return ids


def test_the_default_bound_is_a_safety_valve_of_a_million_rows() -> None:
    # Retention is by time; the count bound only caps a runaway queue, far
    # above any batch README's "wait for results" pattern reads back.
    assert DEFAULT_KEEP_SUCCEEDED_COUNT == 1_000_000
    import fakeredis

    q = leaseq.Queue("d", redis=fakeredis.FakeRedis())
    assert q._core.keep_count == 1_000_000 and q._core.keep_ms == 3_600_000


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
