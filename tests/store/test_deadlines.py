"""Start-by deadlines (``expires=``): a job not claimed by then is never run; it is
dead-lettered with the reason, counted, frees its uniqueness key and settles its
children as a dead parent's, by claims and reaps (lua/lib/expire_due.lua) and by the
claim that would have leased it.

Cases taking ``q``, ``r`` and ``clock`` run on fakeredis (frozen clock) and a real
server (short spans), and again on the asyncio queue (tests/transport/test_aio.py).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock
from tests.support.store import a_budget_runs_out_in_a_script, all_keys, text


def span(clock: Clock) -> float:
    return 10.0 if clock.fake else 0.3


def test_a_job_not_claimed_by_its_deadline_never_runs(q: Any, r: Any, clock: Clock) -> None:
    per = span(clock)
    late = q.enqueue("late", expires=per)
    keeps = q.enqueue("keeps")
    row = q.get(late)
    assert row.expires_at == pytest.approx(row.enqueued_at + per, abs=0.002)
    clock.advance(per * 1.05)
    got = q.claim_many(10, ttl=30.0)
    assert [lease.id for lease in got] == [keeps]
    dead = q.get(late)
    assert dead.state == leaseq.State.DEAD
    assert dead.last_error and dead.last_error.startswith("expired: not started by its deadline")
    assert q.stats().totals["past_deadline"] == 1
    assert r.zcard(q.keys.deadlines) == 0


def test_a_claimed_job_owes_its_deadline_nothing(q: Any, r: Any, clock: Clock) -> None:
    per = span(clock)
    job = q.enqueue("x", expires=per)
    lease = q.claim(ttl=60.0)
    clock.advance(per * 1.05)
    q.reap()
    q.complete(lease)
    assert q.get(job).state == leaseq.State.SUCCEEDED
    assert "past_deadline" not in q.stats().totals


def test_reap_sweeps_pending_and_scheduled_jobs_past_their_deadline(
    q: Any, r: Any, clock: Clock
) -> None:
    per = span(clock)
    ids = q.enqueue_many(list(range(40)), expires=per)
    later = q.enqueue("later", delay=per * 2, expires=per * 3)
    delayed = q.enqueue("delayed", delay=per / 2, expires=per)
    clock.advance(per * 1.05)
    requeued, died = q.reap()
    assert (requeued, died) == (0, 41)  # no lease; the jobs past their deadline died
    assert all(q.get(i).state == leaseq.State.DEAD for i in [*ids, delayed])
    assert q.get(later).state == leaseq.State.SCHEDULED
    assert q.stats().totals["past_deadline"] == 41
    assert q.stats().pending == 0 and q.stats().dead == 41


def test_an_absolute_deadline_and_bad_ones(q: Any, r: Any, clock: Clock) -> None:
    sec, usec = r.time()
    server_now = datetime.datetime.fromtimestamp(sec + usec / 1e6, datetime.timezone.utc)
    at = server_now + datetime.timedelta(seconds=span(clock))
    job = q.enqueue("x", expires=at)
    assert q.get(job).expires_at == pytest.approx(at.timestamp(), abs=0.002)
    before = sorted(all_keys(r))
    for bad in (0, -1, float("nan"), "soon", datetime.datetime(2030, 1, 1)):
        with pytest.raises(leaseq.InvalidArgument, match="expires"):
            q.enqueue("y", expires=bad)
    with pytest.raises(leaseq.InvalidArgument, match="longer than delay"):
        q.enqueue("y", delay=5.0, expires=5.0)
    assert sorted(all_keys(r)) == before


def test_a_retry_runs_with_a_new_deadline_or_none(q: Any, r: Any, clock: Clock) -> None:
    per = span(clock)
    a, b = q.enqueue_many(["a", "b"], expires=per)
    clock.advance(per * 1.05)
    q.reap()
    q.retry_dead(a)  # no deadline any more
    q.retry_dead(b, expires=per)
    assert q.get(a).expires_at is None and r.hget(q.keys.job(a), "expires_at") is None
    assert q.get(b).expires_at is not None
    clock.advance(per * 1.05)
    got = q.claim_many(10, ttl=30.0)
    assert [lease.id for lease in got] == [a]
    assert q.get(b).state == leaseq.State.DEAD


def test_a_deadline_frees_the_uniqueness_key_and_settles_children(
    q: Any, r: Any, clock: Clock
) -> None:
    per = span(clock)
    parent = q.enqueue("p", id="parent", expires=per, unique=leaseq.Unique("only-one"))
    child = q.enqueue("c", id="child", depends_on=[parent])
    assert q.enqueue("p2", unique=leaseq.Unique("only-one")) == parent  # held
    clock.advance(per * 1.05)
    q.reap()
    assert q.get(parent).state == leaseq.State.DEAD
    assert q.get(child).state == leaseq.State.CANCELLED  # its policy: cancel
    fresh = q.enqueue("p3", unique=leaseq.Unique("only-one"))
    assert fresh != parent  # the key was freed


def test_deadlines_read_with_redis_cli_and_in_flows_and_schedules(
    q: Any, r: Any, clock: Clock
) -> None:
    job = q.enqueue("x", expires=60.0)
    at = int(text(r.hget(q.keys.job(job), "expires_at")))
    assert r.zscore(q.keys.deadlines, job) == at
    q.enqueue_flow([leaseq.Step("s", id="step-1", expires=60.0)])
    assert r.hget(q.keys.job("step-1"), "expires_at") is not None
    sched = q.schedule("nightly", {"n": 1}, every=3600.0, expires=30.0)
    assert sched.expires == 30.0
    with pytest.raises(leaseq.InvalidArgument, match="seconds after each job"):
        q.schedule("bad", {}, every=60.0, expires=datetime.datetime.now(datetime.timezone.utc))
    plain = q.enqueue("y")
    assert q.get(plain).expires_at is None and r.zscore(q.keys.deadlines, plain) is None


def test_a_job_that_ran_leaves_the_deadlines_index(q: Any, r: Any) -> None:
    q.enqueue_many(["x"] * 3, expires=3600.0)
    leases = q.claim_many(3, ttl=30.0)
    q.complete_many(leases)
    assert r.zcard(q.keys.deadlines) == 0


@pytest.mark.parametrize("group", [None, "tenant"])
def test_a_claim_over_many_jobs_past_their_deadline_stays_a_short_call(
    rr: Any, group: str | None
) -> None:
    # Jobs past their deadline that reach the claim's pop (the sweep's pages stop at
    # the time budget) are dead-lettered one by one: a claim must stop at its budget
    # and say it was cut short, so claim_many calls again for the rest and still
    # finds the job behind them; not work through all 3,000 in one call (~150 ms).
    # Counted in calls, not timed: on a loaded machine the server is descheduled
    # mid-call (SLOWLOG then shows any length). Valkey 8's TIME stands still
    # inside a script: there the server's CPU clock bounds the call.
    q = leaseq.Queue("late", redis=rr)
    q.claim()  # the script loaded: its SCRIPT LOAD is not the claim under test
    for _ in range(3):
        q.enqueue_many(["x"] * 1000, expires=0.05, group=group)
    deadline = q.get(q.enqueue("probe")).enqueued_at + 0.06
    while float(rr.time()[0]) + rr.time()[1] / 1e6 < deadline:
        pass
    before = _evalsha_calls(rr)
    got = q.claim_many(10)
    calls = _evalsha_calls(rr) - before
    assert [lease.payload for lease in got] == ["probe"]
    assert rr.zcard(q.keys.dead) == 3000
    assert calls >= 3, "one call worked through at least 1,000 late jobs"
    if a_budget_runs_out_in_a_script(rr):  # Redis's TIME, or Valkey's CPU clock
        # 3,000 dead-letterings are 15+ ms of server work: 20 budgets at least.
        assert calls >= 20, f"{calls} calls: some held the server past its budget"


def _evalsha_calls(rr: Any) -> int:
    # Script calls made, from INFO (SLOWLOG would also log every command a script
    # runs, and 3,000 dead-letterings push the calls themselves out of it).
    return int(rr.info("commandstats")["cmdstat_evalsha"]["calls"])


def test_a_retry_waiting_past_its_deadline_is_dead_lettered_by_reap(
    q: Any, r: Any, clock: Clock
) -> None:
    per = span(clock)
    job = q.enqueue("x", expires=per)
    q.fail(q.claim(ttl=30.0), "boom", retry_in=per * 10)
    released = q.enqueue("y", expires=per)
    q.release(q.claim(ttl=30.0))
    lost = q.enqueue("z", expires=per, max_attempts=3)
    q.claim(ttl=clock.lease(per * 0.5, per * 0.5))
    clock.advance(per * 0.6)
    assert q.reap() == (1, 0)  # the expired lease, back to pending
    clock.advance(per * 0.5)
    assert q.reap() == (0, 3)  # all three past their deadline: the retry too
    for late in (job, released, lost):
        assert q.get(late).state == leaseq.State.DEAD


def test_a_deadline_damaged_by_hand_is_dead_lettered_as_damage(q: Any, r: Any) -> None:
    job = q.enqueue("x", expires=3600.0)
    r.hset(q.keys.job(job), "expires_at", "soon")
    with pytest.raises(leaseq.DamagedRow):
        q.get(job)
    assert q.claim(ttl=30.0) is None
    assert text(r.hget(q.keys.job(job), "state")) == "dead"
    assert text(r.hget(q.keys.job(job), "last_error")) == "damaged row: expires_at=soon"
    assert "past_deadline" not in q.stats().totals
