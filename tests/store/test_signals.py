"""Signals and waits at the queue's level (docs/durable.md): ``q.suspend(lease,
name, timeout, key)`` is what a worker writes for ``current_job().wait_for``;
``q.signal`` resumes the waiters a bounded page per call and keeps the signal
for later ones. Run on fakeredis and a real server, and on aio
(tests/transport/test_aio.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

import leaseq
from leaseq.store.durable import SIGNAL_PAGE, suspend_call
from leaseq.transport.drive import call_many
from tests.support.backends import Clock
from tests.support.store import claim_one, index, row, snapshot


def _waiting(q: leaseq.Queue, n: int, key: str, timeout: float | None = None) -> list[str]:
    """Enqueue n jobs, claim them and suspend each waiting for ``key``."""
    ids = q.enqueue_many([{"n": i} for i in range(n)], max_attempts=1)
    got = 0
    while got < n:
        leases = q.claim_many(500, ttl=30.0)
        for lease in leases:
            assert q.suspend(lease, "w", timeout, key) is None or timeout is not None
        got += len(leases)
    return ids


def test_a_signal_resumes_its_waiters_a_page_a_call_and_records_the_payload(
    q: leaseq.Queue, r: Any
) -> None:
    n = 2 * SIGNAL_PAGE + 7
    ids = _waiting(q, n, "go")
    other = _waiting(q, 3, "go-later")  # another key's waiters stay
    job = row(q, ids[0])
    assert (job["state"], job["wait_key"], job["wait_step"]) == ("suspended", "go", "w")
    assert "run_at" not in job and index(q, "suspended")[ids[0]] == math.inf
    assert q.stats().suspended == n + 3
    assert q.signal("go", {"ok": 1}) == n
    stats = q.stats()
    assert (stats.pending, stats.suspended) == (n, 3)
    for job_id in (ids[0], ids[-1]):
        assert q.get(job_id).steps == {"w": {"ok": 1}}  # type: ignore[union-attr]
        assert "wait_key" not in row(q, job_id)
    assert r.zcard(q.keys.waiters) == 3
    assert {q.get(i).state for i in other} == {leaseq.State.SUSPENDED}  # type: ignore[union-attr]
    # The resumed run reads the payload as a recorded step; attempts grew, max too.
    lease = claim_one(q)
    assert q.recorded_steps(lease) == {"w": {"ok": 1}}
    assert (lease.attempt, q.get(lease.id).max_attempts) == (2, 2)  # type: ignore[union-attr]


def test_a_kept_signal_resumes_a_later_wait_at_once_until_its_time_is_up(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    keep = 600.0 if clock.fake else 1.0
    assert q.signal("k", "early", keep=keep) == 0
    assert r.hget(q.keys.signals, "k") == b'"early"'
    q.enqueue({}, id="a", max_attempts=1)
    assert q.suspend(claim_one(q), "w", None, "k") == 0.0  # resumed: pending again
    assert q.get("a").state is leaseq.State.PENDING  # type: ignore[union-attr]
    assert q.recorded_steps(claim_one(q)) == {"w": "early"}
    clock.advance(keep + 0.1)
    q.enqueue({}, id="b", max_attempts=1)
    assert q.suspend(claim_one(q), "w", None, "k") is None
    assert q.get("b").state is leaseq.State.SUSPENDED  # type: ignore[union-attr]
    # The next signal of any key sweeps the kept ones whose time is up.
    assert q.signal("other", keep=0) == 0
    assert r.hlen(q.keys.signals) == 0 and r.zcard(q.keys.signal_ends) == 0


def test_a_wait_past_its_timeout_resumes_as_timed_out(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    timeout = 60.0 if clock.fake else 0.3
    q.enqueue({}, id="a", max_attempts=1)
    wakes = q.suspend(claim_one(q), "w", timeout, "k")
    assert wakes is not None and wakes == pytest.approx(clock.server_now() + timeout, abs=1)
    assert q.claim(ttl=30.0) is None
    clock.advance(timeout + 0.1)
    lease = claim_one(q)  # the claim's promotion woke it
    assert q.recorded_steps(lease) == {"w": leaseq.TimedOut()}
    assert row(q, "a")["step:w"] == ""
    assert r.zcard(q.keys.waiters) == 0
    assert q.signal("k") == 0  # too late: it waits no more


def test_a_waiter_cancelled_or_deleted_is_resumed_by_nothing(q: leaseq.Queue, r: Any) -> None:
    ids = _waiting(q, 3, "k")
    assert q.cancel(ids[0]) is True
    q.delete(ids[1])
    assert r.zcard(q.keys.waiters) == 1
    assert q.signal("k") == 1
    assert q.get(ids[0]).state is leaseq.State.CANCELLED  # type: ignore[union-attr]
    assert "step:w" not in row(q, ids[0])


def test_a_stale_waiter_entry_is_dropped_by_the_signal(q: leaseq.Queue, r: Any) -> None:
    ids = _waiting(q, 2, "k")
    r.hset(q.keys.job(ids[0]), "wait_key", "else")  # edited by hand: no longer this key's
    r.zadd(q.keys.waiters, {"k ghost": 0})  # a member whose row is gone
    assert q.signal("k") == 1
    assert r.zcard(q.keys.waiters) == 0


@pytest.mark.parametrize(
    ("key", "payload", "keep"),
    [
        ("a b", None, 1.0),
        ("", None, 1.0),
        ("{k}", None, 1.0),
        (7, None, 1.0),
        ("k", math.nan, 1.0),
        ("k", object(), 1.0),
        ("k", "x" * (1 << 21), 1.0),
        ("k", None, -1.0),
        ("k", None, math.inf),
    ],
)
def test_a_bad_signal_is_refused_with_nothing_written(
    q: leaseq.Queue, r: Any, key: Any, payload: Any, keep: float
) -> None:
    _waiting(q, 1, "k")
    before = snapshot(r)
    with pytest.raises(leaseq.InvalidArgument):
        q.signal(key, payload, keep=keep)
    assert snapshot(r) == before


def test_drop_deletes_the_waiters_and_kept_signals(q: leaseq.Queue, r: Any) -> None:
    _waiting(q, 2, "k")
    q.signal("kept")
    assert q.drop() == 2
    assert [k for k in r.keys("*") if b"{emails}" in k] == []


def test_one_signal_resumes_ten_thousand_waiters_in_short_calls(rr: Any) -> None:
    """On the real server: every waiter resumed by one ``signal``, in calls of at
    most SIGNAL_PAGE waiters that also stop at a time budget (about 1-1.5 ms
    each on a quiet box, bench/durable.py). The bound asserted on the slow log
    is 25 ms, to catch a call that stopped bounding itself (one call for all
    10,000 takes ~300 ms) rather than a busy machine's context switches."""
    q = leaseq.Queue("emails", redis=rr)
    q.enqueue_many([{"n": i} for i in range(10_000)], max_attempts=1)
    leases: list[leaseq.Lease] = []
    while len(leases) < 10_000:
        leases += q.claim_many(1000, ttl=60.0)
    core = q._core  # the suspends in pipelines of 1,000: the fixture, not the test
    for i in range(0, len(leases), 1000):
        got = call_many(rr, [suspend_call(core, x, "w", None, "big") for x in leases[i : i + 1000]])
        assert got == [None] * len(got)
    rr.config_set("slowlog-log-slower-than", 0)
    rr.config_set("slowlog-max-len", 10_000)
    rr.slowlog_reset()
    assert q.signal("big", {"go": True}) == 10_000
    calls = [e["duration"] for e in rr.slowlog_get(10_000) if b" big " in (e["command"] or b"")]
    rr.config_set("slowlog-log-slower-than", 10000)
    rr.config_set("slowlog-max-len", 128)
    assert len(calls) >= 10_000 // SIGNAL_PAGE and max(calls) < 25_000, sorted(calls)[-5:]
    stats = q.stats()
    assert (stats.pending, stats.suspended) == (10_000, 0)
    assert rr.zcard(q.keys.waiters) == 0
    assert q.get(leases[-1].id).steps == {"w": {"go": True}}  # type: ignore[union-attr]


def test_purge_of_suspended_jobs_takes_them_out_of_the_waiters(q: leaseq.Queue, r: Any) -> None:
    _waiting(q, 3, "k")
    assert q.purge("suspended") == 3
    assert r.zcard(q.keys.waiters) == 0 and q.stats().suspended == 0


@pytest.mark.parametrize("damaged", ["waiters", "signals", "signal_ends", "suspended"])
def test_a_damaged_key_refuses_a_wait_whole_and_the_lease_stays_held(
    q: leaseq.Queue, r: Any, damaged: str
) -> None:
    q.enqueue({}, id="a", max_attempts=1)
    lease = claim_one(q)
    r.set(getattr(q.keys, damaged), "junk")  # overwritten by hand
    before = snapshot(r)
    with pytest.raises(leaseq.DamagedKey):
        q.suspend(lease, "w", None, "k")
    assert snapshot(r) == before  # nothing half moved: still active, still indexed
    r.delete(getattr(q.keys, damaged))
    assert q.suspend(lease, "w", None, "k") is None


def test_a_damaged_waiters_key_moves_nothing_half_way(q: leaseq.Queue, r: Any) -> None:
    ids = _waiting(q, 3, "k", timeout=0.0)  # due at once: a claim's promotion ends them
    r.rename(q.keys.waiters, "saved")
    r.set(q.keys.waiters, "junk")
    before = _unclocked(r)
    for call in (
        lambda: q.signal("k"),
        lambda: q.cancel(ids[0]),
        lambda: q.run_now(ids[1]),
        lambda: q.delete(ids[2]),
        lambda: q.purge("suspended"),
        lambda: q.claim(ttl=30.0),
    ):
        with pytest.raises(leaseq.DamagedKey):
            call()
        assert _unclocked(r) == before
    r.delete(q.keys.waiters)
    r.rename("saved", q.keys.waiters)
    assert len(q.claim_many(10, ttl=30.0)) == 3  # repaired: every wait timed out, none lost


def _unclocked(r: Any) -> dict[str, Any]:
    """``snapshot`` but the queue's clock floor, which a claim may move before it
    meets the damage (moving it is harmless: it only ever goes forward)."""
    state = snapshot(r)
    kind, meta, *rest = state["leaseq:{emails}:meta"]
    state["leaseq:{emails}:meta"] = (kind, {k: v for k, v in meta.items() if k != "clock"}, *rest)
    return state


def test_a_sleep_or_wait_wakes_a_claimer_the_concurrency_limit_held(
    q: leaseq.Queue, r: Any
) -> None:
    q.set_limits(concurrency=1)
    q.enqueue_many([{"n": 1}, {"n": 2}])
    lease = claim_one(q)
    assert q.claim(ttl=30.0) is None  # held back at the limit: marked in meta
    r.delete(q.keys.wake)
    q.suspend(lease, "w", None, "k")  # a wait with no end: no wake time to wake for
    assert r.llen(q.keys.wake) == 1  # the blocked claimer is woken for the freed slot
    assert r.hget(q.keys.meta, "limit_held") is None
    assert claim_one(q).payload == {"n": 2}


def test_the_newest_signal_of_a_key_is_the_one_kept(q: leaseq.Queue, r: Any) -> None:
    q.signal("k", "old", keep=3600)
    q.signal("k", "new", keep=0)  # withdraws the kept "old"
    assert r.hlen(q.keys.signals) == 0
    q.enqueue({}, id="a", max_attempts=1)
    assert q.suspend(claim_one(q), "w", None, "k") is None  # waits: nothing kept
    q.signal("k", "newer", keep=3600)
    q.signal("k", "newest")
    assert r.hget(q.keys.signals, "k") == b'"newest"'
