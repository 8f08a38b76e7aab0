"""Cost limits: a sliding window of claimed cost per queue and per fair group, on the
server clock, each job counting its ``cost=`` when claimed and settled to what it
spent when it ends (lua/lib/cost_gate.lua, cost_window.lua, settle_spent.lua).

Cases taking ``q``, ``r`` and ``clock`` run on fakeredis (frozen clock) and a real
server (short spans), and again on the asyncio queue (tests/transport/test_aio.py).
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock
from tests.support.store import all_keys, text


def span(clock: Clock) -> float:
    return 10.0 if clock.fake else 1.0


def test_a_job_is_claimed_only_while_its_cost_fits_the_window(q: Any, r: Any, clock: Clock) -> None:
    per = span(clock)
    q.set_limits(cost_rate=100, cost_per=per)
    a = q.enqueue("a", cost=60)
    b = q.enqueue("b", cost=30)
    c = q.enqueue("c", cost=20)
    d = q.enqueue("d", cost=5)
    got = q.claim_many(10, ttl=30.0)
    # a and b fit (90); c does not (110): the claim stops there, FIFO, though d would fit
    assert [lease.id for lease in got] == [a, b]
    leases, wait = q.claim_now(5, ttl=30.0)
    assert leases == [] and wait is not None and 0 < wait <= per + 0.01
    assert q.limits().recent_cost == 90
    clock.advance(per * 1.01)  # the window moves past a and b
    assert [lease.id for lease in q.claim_many(10, ttl=30.0)] == [c, d]
    assert q.limits().recent_cost == 25


def test_settling_replaces_the_estimate_and_lets_more_through(q: Any, r: Any) -> None:
    q.set_limits(cost_rate=100, cost_per=60.0)
    ids = q.enqueue_many(["x"] * 4, cost=40)
    first = q.claim_many(10, ttl=30.0)
    assert [lease.id for lease in first] == ids[:2]  # 80 of 100
    q.complete(first[0], cost=10)  # spent 10, not 40: the window holds 50
    assert q.limits().recent_cost == 50
    assert q.get(ids[0]).spent == 10 and q.get(ids[0]).cost == 40
    q.fail(first[1], "boom", cost=5.5)  # a failure settles too: 15.5
    assert q.limits().recent_cost == pytest.approx(15.5)
    again = q.claim_many(10, ttl=30.0)  # 15.5 + 40 + 40 = 95.5; the retry is scheduled
    assert [lease.id for lease in again] == ids[2:]


def test_a_stale_lease_settles_nothing(q: Any, r: Any, clock: Clock) -> None:
    q.set_limits(cost_rate=1000, cost_per=600.0)
    job = q.enqueue("x", cost=100)
    lost = q.claim(ttl=clock.lease(5.0))
    clock.past(lost.deadline)
    q.reap()
    held = q.claim(ttl=30.0)
    assert held is not None and held.attempt == 2
    before = {k: r.dump(k) for k in all_keys(r) if k.endswith(":costs")}
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lost, cost=1)
    assert {k: r.dump(k) for k in all_keys(r) if k.endswith(":costs")} == before
    # an expired lease keeps its estimate: both claims count 100
    assert q.limits().recent_cost == 200
    q.complete(held, cost=1)
    assert q.limits().recent_cost == 101 and q.get(job).spent == 1


def test_a_group_cost_limit_holds_that_group_while_others_go_on(
    q: Any, r: Any, clock: Clock
) -> None:
    per = span(clock)
    q.set_limits(group_cost_rate=50, group_cost_per=per)
    big = q.enqueue_many(["b"] * 3, group="big", cost=30)
    small = q.enqueue_many(["s"] * 3, group="small", cost=10)
    got = {lease.id for lease in q.claim_many(10, ttl=30.0)}
    assert got == {big[0], *small}  # big: 30 fits, 60 does not; small: 30 of 50
    assert q.claim(ttl=30.0) is None
    clock.advance(per * 1.01)
    assert [lease.id for lease in q.claim_many(10, ttl=30.0)] == [big[1]]


def test_a_group_of_its_own_replaces_the_per_group_cost_limit(q: Any, r: Any) -> None:
    q.set_limits(group_cost_rate=10, group_cost_per=60.0)
    got = q.set_group_limits("vip", cost_rate=100, cost_per=60.0)
    assert got.groups["vip"].cost_rate == 100 and got.groups["vip"].cost_per == 60.0
    assert "cost 100 per 60 s" in got.groups["vip"].describe()
    q.enqueue_many(["v"] * 5, group="vip", cost=20)
    q.enqueue_many(["o"] * 5, group="other", cost=5)
    got_ids = [lease.id for lease in q.claim_many(20, ttl=30.0)]
    assert len(got_ids) == 5 + 2  # vip: 100 of 100; other: 10 of 10


def test_a_cost_above_the_budget_is_refused_at_enqueue_and_writes_nothing(q: Any, r: Any) -> None:
    q.set_limits(cost_rate=100, cost_per=60.0, group_cost_rate=10, group_cost_per=1.0)
    before = sorted(all_keys(r))
    with pytest.raises(leaseq.InvalidArgument, match="above the cost limit of the queue"):
        q.enqueue("x", cost=101)
    with pytest.raises(leaseq.InvalidArgument, match="group g"):
        q.enqueue_many(["x", "y"], cost=11, group="g")
    with pytest.raises(leaseq.InvalidArgument, match="group g"):
        q.enqueue_flow([leaseq.Step("x", id="s1", cost=11, group="g")])
    assert sorted(all_keys(r)) == before
    assert q.enqueue("x", cost=100)  # the whole budget fits


def test_a_job_above_a_budget_set_after_its_enqueue_is_dead_lettered(q: Any, r: Any) -> None:
    big = q.enqueue("big", cost=500)
    small = q.enqueue("small", cost=5)
    q.set_limits(cost_rate=100, cost_per=60.0)
    got = q.claim_many(10, ttl=30.0)
    assert [lease.id for lease in got] == [small]
    dead = q.get(big)
    assert dead.state == leaseq.State.DEAD
    assert dead.last_error and "cost 500 is above the cost limit of the queue" in dead.last_error


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True, 1e13])
def test_bad_costs_are_refused_and_write_nothing(q: Any, r: Any, bad: Any) -> None:
    before = sorted(all_keys(r))
    with pytest.raises(leaseq.InvalidArgument, match="cost"):
        q.enqueue("x", cost=bad)
    with pytest.raises(leaseq.InvalidArgument, match="cost_rate"):
        q.set_limits(cost_rate=bad)
    assert sorted(all_keys(r)) == before


def test_cost_rows_and_window_read_with_redis_cli(q: Any, r: Any) -> None:
    q.set_limits(cost_rate=1000, cost_per=60.0)
    job = q.enqueue("x", cost=2.5)
    plain = q.enqueue("y")
    assert text(r.hget(q.keys.job(job), "cost")) == "2.5"
    assert r.hget(q.keys.job(plain), "cost") is None  # the default, 1, is not stored
    assert text(r.hget(q.keys.limits, "cost_rate")) == "1000"
    assert text(r.hget(q.keys.limits, "cost_per_ms")) == "60000"
    leases = q.claim_many(2, ttl=30.0)
    members = [text(m) for m in r.zrange(q.keys.costs, 0, -1)]
    assert members[-1] == "sum:3.5"
    assert sorted(m.split(":")[0] for m in members[:-1]) == ["1", "2.5"]
    assert 0 < r.pttl(q.keys.costs) <= 60_000
    q.complete(leases[0], cost=1)
    assert text(r.zrange(q.keys.costs, -1, -1)[0]) == "sum:2"
    q.set_limits(cost_rate=None)
    assert r.exists(q.keys.costs) == 0  # the window goes with its limit
    assert q.limits().cost_rate is None


def test_a_cost_limit_edited_by_hand_to_junk_is_no_limit(q: Any, r: Any) -> None:
    q.enqueue_many(["x"] * 3, cost=10)
    for junk in ("nan", "-5", "inf", "abc"):
        r.hset(q.keys.limits, mapping={"cost_rate": junk, "cost_per_ms": "1000"})
        assert q.limits().cost_rate is None
    assert len(q.claim_many(10, ttl=30.0)) == 3


def test_schedules_and_typed_options_carry_the_cost(q: Any, r: Any) -> None:
    sched = q.schedule("tick", {"n": 1}, every=60.0, cost=7)
    assert sched.cost == 7
    assert q.schedules()[0].cost == 7


def test_a_release_settles_what_it_is_told_and_keeps_the_row_as_it_was(q: Any, r: Any) -> None:
    q.set_limits(cost_rate=1000, cost_per=600.0)
    a, _ = q.enqueue_many(["a", "b"], cost=100)
    la, lb = q.claim_many(2, ttl=30.0)
    q.release(la, cost=0)  # never started: spent nothing
    q.release(lb)  # the estimate stands
    assert q.limits().recent_cost == 100
    assert q.get(a).spent is None and r.hget(q.keys.job(a), "spent") is None
    with pytest.raises(leaseq.InvalidArgument, match="cost"):
        q.release(q.claim(ttl=30.0), cost=-1)


def test_hand_edited_costs_read_alike_in_the_scripts_and_in_python(q: Any, r: Any) -> None:
    # tonumber() in Lua takes '0x10' and ' 5', float() takes '1_0' and ' 5': both
    # sides read only plain decimal text, so limits() shows what the claim holds to.
    for junk in ("0x10", " 5", "1_0", "5 "):
        r.hset(q.keys.limits, mapping={"cost_rate": junk, "cost_per_ms": "60000"})
        assert q.limits().cost_rate is None, junk
    r.hset(q.keys.limits, "cost_rate", "1e1")
    assert q.limits().cost_rate == 10.0
    big = q.enqueue("big")
    r.hset(q.keys.job(big), "cost", "0x10")  # junk: counts as the default 1
    assert q.get(big).cost == 1
    q.enqueue_many(["x"] * 12)
    assert len(q.claim_many(20, ttl=30.0)) == 10  # 1 for big, 9 of cost 1: not 16 for big
    assert q.limits().recent_cost == 10
