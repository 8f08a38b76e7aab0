"""Global limits: concurrency and a sliding rate, enforced in claim.lua; a
limit edited by hand to junk is no limit and never stops claims.

Cases taking ``q``, ``r`` and ``clock`` run on fakeredis (frozen clock) and a
real server (short spans), and again on the asyncio queue
(tests/transport/test_aio.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import leaseq
from tests.support.backends import Clock
from tests.support.servers import wait_until
from tests.support.store import all_keys, text


def test_concurrency_caps_active_leases_across_claimers(q: Any, r: Any) -> None:
    q.enqueue_many(list(range(10)))
    got = q.set_limits(concurrency=3)
    assert (got.concurrency, got.rate, got.per) == (3, None, None)
    other = leaseq.Queue(q.name, redis=q.redis) if isinstance(q, leaseq.Queue) else q
    first = q.claim_many(10, ttl=30.0)  # prefetch counts: one worker cannot take more
    assert len(first) == 3
    assert other.claim(ttl=30.0) is None
    leases, wait = q.claim_now(5, ttl=30.0)
    assert leases == [] and wait is not None and 0 < wait <= 30.0  # the earliest lease end
    assert q.limits().active == 3
    q.complete(first[0])
    assert len(q.claim_many(10, ttl=30.0)) == 1
    assert q.stats().pending == 6
    q.set_limits(concurrency=None)
    assert len(q.claim_many(10, ttl=30.0)) == 6


def test_a_limit_lowered_below_what_is_active(q: Any, r: Any) -> None:
    q.enqueue_many(list(range(5)))
    held = q.claim_many(3, ttl=30.0)
    q.set_limits(concurrency=1)  # three are active; nothing is taken from them
    assert q.claim(ttl=30.0) is None
    q.complete(held[0])
    q.complete(held[1])
    assert q.claim(ttl=30.0) is None  # still one active: at the limit
    q.complete(held[2])
    assert q.claim(ttl=30.0) is not None


def test_an_expired_lease_frees_its_slot_by_reaping(q: Any, r: Any, clock: Clock) -> None:
    q.enqueue_many(["a", "b"])
    q.set_limits(concurrency=1)
    lost = q.claim(ttl=clock.lease(5.0))
    assert lost is not None and q.claim(ttl=30.0) is None
    clock.past(lost.deadline)
    again = q.claim(ttl=30.0)  # the claim reaps the expired lease first, then fits
    assert again is not None and q.limits().active == 1


def span(clock: Clock) -> float:
    return 10.0 if clock.fake else 1.0


def test_rate_is_a_sliding_window(q: Any, r: Any, clock: Clock) -> None:
    per = span(clock)
    q.enqueue_many(list(range(20)))
    q.set_limits(rate=3, per=per)
    assert len(q.claim_many(2, ttl=30.0)) == 2  # t = 0
    clock.advance(per * 0.6)
    assert len(q.claim_many(5, ttl=30.0)) == 1  # t = 0.6: three in the span
    leases, wait = q.claim_now(5, ttl=30.0)
    assert leases == [] and wait is not None
    # until the t=0 claims leave the span (exact on the frozen clock)
    if clock.fake:
        assert wait == pytest.approx(per * 0.4)
    else:
        assert 0 < wait <= per * 0.4 + 0.01
    clock.advance(per * 0.45)
    assert len(q.claim_many(5, ttl=30.0)) == 2  # t = 1.05: the t=0 pair left the span
    assert q.claim(ttl=30.0) is None  # no fixed window: the t=0.6 claim still counts
    assert q.limits().recent_claims == 3


def test_rate_never_exceeded_in_any_span(q: Any, r: Any, clock: Clock) -> None:
    per = span(clock)
    q.enqueue_many(list(range(60)))
    q.set_limits(rate=4, per=per)
    times: list[float] = []
    for _ in range(12):
        for lease in q.claim_many(3, ttl=30.0):
            times.append(lease.deadline - 30.0)  # the claim's own server time
        clock.advance(per / 5)
    assert len(times) >= 8
    for t in times:
        assert sum(1 for u in times if t <= u < t + per - 0.0005) <= 4


def test_a_held_claim_writes_nothing_but_its_marks(q: Any, r: Any) -> None:
    q.enqueue_many(["a", "b"])
    q.set_limits(concurrency=1)
    q.claim(ttl=30.0)
    before = {k: r.dump(k) for k in all_keys(r) if ":job:" in k}
    assert q.claim(ttl=30.0) is None
    assert {k: r.dump(k) for k in all_keys(r) if ":job:" in k} == before
    assert text(r.hget(q.keys.meta, "limit_held")) == "1"
    assert "limit_held" not in q.stats().totals


def test_limits_are_readable_with_redis_cli(q: Any, r: Any) -> None:
    q.set_limits(concurrency=10, rate=100, per=1.5)
    raw = {text(k): text(v) for k, v in r.hgetall(q.keys.limits).items()}
    assert raw == {"concurrency": "10", "rate": "100", "per_ms": "1500"}
    got = q.limits()
    assert (got.concurrency, got.rate, got.per, got.group_concurrency) == (10, 100, 1.5, None)
    q.set_limits(concurrency=5)  # what is not given stays
    assert (q.limits().concurrency, q.limits().rate) == (5, 100)
    q.set_limits(rate=None)
    assert (q.limits().rate, q.limits().per) == (None, None)
    assert not r.exists(q.keys.claims)
    assert q.set_limits(rate=7).per == 1.0  # per defaults to one second


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"rate": 0}, "rate"),
        ({"rate": 5, "per": 0.0}, "per"),
        ({"rate": 5, "per": float("inf")}, "per"),
        ({"per": 1.0}, "per"),
        ({"rate": None, "per": 2.0}, "per"),
        ({"group_concurrency": 0}, "group_concurrency"),
    ],
)
def test_bad_limits_are_refused_and_write_nothing(
    q: Any, r: Any, kwargs: dict[str, Any], word: str
) -> None:
    with pytest.raises(leaseq.InvalidArgument, match=word):
        q.set_limits(**kwargs)
    assert all_keys(r) == []


# -- real server: held claimers sleep until a slot frees, no polling ------------------------


@pytest.fixture
def real_r(redis_server: Any) -> Iterator[Any]:
    """A client of the real server only: these cases need real time (no fake twin)."""
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    client.script_flush()
    yield client
    client.close()


def count_claims(q: leaseq.Queue) -> list[int]:
    """How many claim scripts ``q`` has sent (its client's EVALSHAs of claim.lua)."""
    from leaseq.store.scripts import SCRIPTS

    calls = [0]
    client = q.redis
    evalsha = client.evalsha

    def counted(sha: str, *args: Any) -> Any:
        if sha == SCRIPTS["claim"].sha:
            calls[0] += 1
        return evalsha(sha, *args)

    client.evalsha = counted
    return calls


def test_a_rate_held_claimer_sleeps_exactly_until_a_slot(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    q.enqueue_many(list(range(5)))
    q.set_limits(rate=1, per=0.5)
    assert q.claim(ttl=30.0) is not None
    calls = count_claims(q)
    start = time.monotonic()
    lease = q.claim(ttl=30.0, block=5.0)
    took = time.monotonic() - start
    assert lease is not None
    assert 0.3 < took < 3.0
    assert calls[0] <= 3  # the reply's wait_ms, not a poll loop


def test_a_completion_wakes_a_claimer_held_by_concurrency(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    q.enqueue_many(["a", "b"])
    q.set_limits(concurrency=1)
    first = q.claim(ttl=60.0)
    assert first is not None
    got: list[Any] = []
    waiter = leaseq.Queue("emails", redis=redis_like(r))
    calls = count_claims(waiter)
    thread = threading.Thread(target=lambda: got.append(waiter.claim(ttl=30.0, block=20.0)))
    thread.start()
    wait_until(lambda: calls[0] >= 1, what="the waiter to claim once")
    time.sleep(0.2)  # let it be held and go to sleep (its wait hint is 60 s)
    start = time.monotonic()
    q.complete(first)
    thread.join(10)
    assert got and got[0] is not None
    assert time.monotonic() - start < 3.0  # woken by the completion, not the lease's end
    assert calls[0] <= 4


def redis_like(r: Any) -> Any:
    import redis

    kwargs = r.connection_pool.connection_kwargs
    return redis.Redis(host=kwargs["host"], port=kwargs["port"])


def test_workers_together_stay_under_the_concurrency_limit(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    q.set_limits(concurrency=2)
    q.enqueue_many(list(range(30)))
    lock = threading.Lock()
    running = [0]
    peak = [0]

    def handler(lease: leaseq.Lease) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    workers = [
        leaseq.Worker(leaseq.Queue("emails", redis=redis_like(r)), handler, concurrency=3, ttl=10.0)
        for _ in range(2)
    ]
    threads = [threading.Thread(target=w.run, kwargs={"burst": True}) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert q.stats().succeeded == 30
    assert peak[0] <= 2


def test_stats_show_the_limits_and_how_close(q: Any, r: Any) -> None:
    assert q.stats().concurrency_limit is None and q.stats().rate_limit is None
    q.enqueue_many(list(range(4)))
    q.set_limits(concurrency=3, rate=10, per=60.0)
    q.claim_many(2, ttl=30.0)
    s = q.stats()
    assert (s.concurrency_limit, s.active, s.rate_limit, s.rate_per) == (3, 2, 10, 60.0)
    assert s.recent_claims == 2
    assert "limit_held" not in s.totals and "clock" not in s.totals


def test_a_big_claim_under_a_rate_limit_on_the_real_server(real_r: Any) -> None:
    r = real_r
    # The claim records its rate span in chunks (Lua 5.1 unpacks ~8,000 values
    # at most); one claim call leases at most 1,000, so three calls fill the rate.
    q = leaseq.Queue("emails", redis=r)
    q.enqueue_many(list(range(3_500)))
    q.set_limits(rate=3_000, per=60.0, concurrency=100_000)
    leases = [lease for _ in range(4) for lease in q.claim_many(3_500, ttl=60.0)]
    assert len(leases) == 3_000
    assert r.zcard(q.keys.claims) == 3_000 and r.zcard(q.keys.active) == 3_000
    assert q.claim(ttl=60.0) is None
    assert q.stats().pending == 500


def test_a_batch_completion_wakes_one_held_claimer_per_freed_slot(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    q.enqueue_many(list(range(6)))
    q.set_limits(concurrency=3)
    held = q.claim_many(3, ttl=60.0)
    got: list[Any] = []
    waiters = [leaseq.Queue("emails", redis=redis_like(r)) for _ in range(3)]
    counts = [count_claims(w) for w in waiters]
    threads = [
        threading.Thread(target=lambda w=w: got.append(w.claim(ttl=30.0, block=20.0)))
        for w in waiters
    ]
    for t in threads:
        t.start()
    wait_until(lambda: all(c[0] >= 1 for c in counts), what="every waiter to be held once")
    time.sleep(0.2)
    start = time.monotonic()
    assert q.complete_many(held) == []
    for t in threads:
        t.join(10)
    assert len(got) == 3 and all(lease is not None for lease in got)
    assert time.monotonic() - start < 3.0


# -- limits edited by hand -------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"concurrency": "nan"},
        {"concurrency": "2.5"},
        {"concurrency": "-1"},
        {"rate": "-5", "per_ms": "1000"},
        {"rate": "5", "per_ms": "nan"},
        {"rate": "5", "per_ms": "-1"},
        {"group_concurrency": "-3"},
    ],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()),
)
def test_a_limit_edited_by_hand_to_junk_is_no_limit_and_never_stops_claims(
    r: Any, fields: dict[str, str]
) -> None:
    """claim.lua read limits with tonumber(): 'nan', '2.5' or '-5' crashed every
    claim of the queue (so every worker) with a ScriptError; stats and limits
    read the same fields differently. Now all three read digits only."""
    q = leaseq.Queue("limited", redis=r)
    q.enqueue_many([{"n": i} for i in range(5)])
    q.enqueue_many([{"n": i} for i in range(5)], group="g")
    r.hset(q.keys.limits, mapping=fields)
    assert len(q.claim_many(10, ttl=30.0)) == 10
    s, lim = q.stats(), q.limits()
    assert (s.concurrency_limit, lim.concurrency) == (None, None)
    assert (s.rate_limit, lim.rate, lim.per, lim.group_concurrency) == (None, None, None, None)


def test_a_rate_of_zero_set_by_hand_holds_claims_without_an_error(r: Any) -> None:
    q = leaseq.Queue("limited", redis=r)
    q.enqueue({"n": 1})
    r.hset(q.keys.limits, mapping={"rate": "0", "per_ms": "1000"})
    assert q.claim(ttl=30.0) is None
    r.delete(q.keys.limits)
    assert q.claim(ttl=30.0) is not None
