"""A cost window's bookkeeping where it is easy to get wrong: a claim that another
limit holds, a settle that frees a held group, keys and sums damaged by hand, and
the window's one promise checked over random runs: no claim is let through while
the cost claimed in the last span (settled where settled) would go over the budget.

Cases taking ``q``, ``r`` and ``clock`` run on fakeredis (frozen clock) and a real
server (short spans), and again on the asyncio queue (tests/transport/test_aio.py).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock
from tests.support.store import index, text


def span(clock: Clock) -> float:
    return 10.0 if clock.fake else 1.0


def window(r: Any, key: str) -> tuple[float, float | None]:
    """(the cost of a window's claim members, its 'sum:' member's value; None: none)."""
    members = [text(m) for m in r.zrange(key, 0, -1)]
    total = sum(float(m.split(":")[0]) for m in members if not m.startswith("sum:"))
    sums = [float(m[4:]) for m in members if m.startswith("sum:")]
    return total, (sums[0] if sums else None)


@pytest.mark.parametrize("other", ["concurrency", "rate"])
def test_a_claim_another_limit_holds_keeps_the_window_sum_true(
    q: Any, r: Any, clock: Clock, other: str
) -> None:
    per = span(clock)
    held = {"concurrency": {"concurrency": 2}, "rate": {"rate": 2, "per": 600.0}}[other]
    q.set_limits(cost_rate=100, cost_per=per, **held)
    q.enqueue_many(["x"] * 20, cost=10)
    first = q.claim(ttl=30.0)
    clock.advance(per / 2)
    second = q.claim(ttl=30.0)  # the window now lives on past the first
    assert first is not None and second is not None
    clock.advance(per * 0.52)  # the first has left the window, the second not
    assert q.claim(ttl=30.0) is None  # held by the other limit
    total, summed = window(r, q.keys.costs)
    assert summed == pytest.approx(total)  # whatever it trimmed is off the sum too
    q.complete_many([first, second])
    q.set_limits(**{k: None for k in held if k != "per"})
    assert len(q.claim_many(20, ttl=30.0)) == 9  # the second's 10 and nine more of 10


def test_a_settle_lets_a_group_its_cost_window_held_back_in_at_once(q: Any, r: Any) -> None:
    q.set_limits(group_cost_rate=100, group_cost_per=600.0)
    q.set_group_limits("own", cost_rate=100, cost_per=600.0)
    for group in ("shared", "own"):
        ids = q.enqueue_many(["x"] * 2, cost=60, group=group)
        first = q.claim_many(5, ttl=30.0)
        assert [lease.id for lease in first] == ids[:1]
        assert q.claim(ttl=30.0) is None  # 60 + 60 > 100: the group sits out
        q.complete(first[0], cost=1)  # it spent 1: 61 fits now
        again = q.claim(ttl=30.0)
        assert again is not None and again.id == ids[1]
        q.fail(again, "no", cost=2)


def test_a_group_cost_window_of_the_wrong_type_holds_that_group_and_loses_nothing(
    q: Any, r: Any, clock: Clock
) -> None:
    per = span(clock)
    q.set_limits(group_cost_rate=100, group_cost_per=per)
    a = q.enqueue_many(["a"] * 3, cost=10, group="a")
    b = q.enqueue_many(["b"] * 3, cost=10, group="b")
    damaged = q.keys.group_costs_prefix + "b"
    r.set(damaged, "junk")
    got = q.claim_many(10, ttl=30.0)  # no error halfway through the call
    assert sorted(lease.id for lease in got) == sorted(a)
    for job_id in b:  # still ready in its group, none lost
        assert q.get(job_id).state == leaseq.State.PENDING
        assert r.zscore(q.keys.group_prefix + "b", job_id) is not None
    assert set(index(q, "active")) == set(a)
    q.complete_many(got, costs=[1.0] * 3)
    # Damaged, the group has no room until the key goes (it expires within a span).
    assert 0 < r.pttl(damaged) <= per * 1000
    clock.advance(per * 1.01)
    assert sorted(lease.id for lease in q.claim_many(10, ttl=30.0)) == sorted(b)


def test_the_queue_cost_window_of_the_wrong_type_holds_claims_without_an_error(
    q: Any, r: Any, clock: Clock
) -> None:
    per = span(clock)
    q.set_limits(cost_rate=100, cost_per=per)
    ids = q.enqueue_many(["x"] * 2, cost=10)
    r.set(q.keys.costs, "junk")
    leases, wait = q.claim_now(5, ttl=30.0)
    assert leases == [] and wait is not None and 0 < wait <= per
    assert q.limits().recent_cost == 100 and q.stats().recent_cost == 100  # read as full
    clock.advance(per * 1.01)
    assert [lease.id for lease in q.claim_many(5, ttl=30.0)] == ids


def test_a_settle_into_a_damaged_window_still_finishes_every_lease_of_the_call(
    q: Any, r: Any
) -> None:
    q.set_limits(cost_rate=1000, cost_per=600.0, group_cost_rate=100, group_cost_per=600.0)
    a = q.enqueue("a", cost=10, group="a")
    b = q.enqueue("b", cost=10, group="b")
    leases = sorted(q.claim_many(2, ttl=30.0), key=lambda lease: lease.id != a)
    r.delete(q.keys.group_costs_prefix + "b")
    r.set(q.keys.group_costs_prefix + "b", "junk")
    q.complete_many(leases, costs=[1, 2])
    for job_id in (a, b):
        assert q.get(job_id).state == leaseq.State.SUCCEEDED
    assert index(q, "active") == {}
    assert r.hgetall(q.keys.group_active) == {}
    assert q.stats().succeeded == 2
    assert q.get(a).spent == 1 and q.get(b).spent == 2


@pytest.mark.parametrize("junk", ["sum:abc", "sum:-1e18", "sum:nan", "sum:", None])
def test_a_window_sum_damaged_by_hand_never_lets_more_through(
    q: Any, r: Any, junk: str | None
) -> None:
    q.set_limits(cost_rate=100, cost_per=600.0)
    q.enqueue_many(["x"] * 3, cost=30)
    assert len(q.claim_many(3, ttl=30.0)) == 3  # 90 of 100
    r.zremrangebyscore(q.keys.costs, "+inf", "+inf")
    if junk is not None:
        r.zadd(q.keys.costs, {junk: float("inf")})
    q.enqueue_many(["y"] * 5, cost=30)
    assert q.claim_many(5, ttl=30.0) == []  # 90 + 30 > 100, whatever the sum says
    assert q.limits().recent_cost == 100 and q.stats().recent_cost == 100  # read as full


def test_no_claim_goes_over_a_cost_budget_in_any_window(q: Any, r: Any, clock: Clock) -> None:
    """Random enqueues (fractional costs, groups, one with its own budget), claims,
    completions and failures that settle below and above the estimate, releases
    and time passing: at every claim, the cost claimed in the span that ends
    then -- each claim counting its estimate, or what it spent once settled --
    is within the queue's budget and, for a group that claim took from, the
    group's."""
    per = 10.0 if clock.fake else 0.3
    budgets = {"": 10.0, "a": 4.0, "b": 4.0, "own": 2.5}
    q.set_limits(cost_rate=10.0, cost_per=per, group_cost_rate=4.0, group_cost_per=per)
    q.set_group_limits("own", cost_rate=2.5, cost_per=per)
    rng = random.Random(20)
    costs = [0.1, 0.2, 0.3, 1 / 3, 0.7, 1, 2, 2.5]
    held: dict[tuple[str, int], Any] = {}
    claims: dict[tuple[str, int], list[Any]] = {}  # (id, attempt) -> [ms, counted, group]

    def in_span(now: int, group: str | None) -> float:
        return sum(
            counted
            for at, counted, g in claims.values()
            if now - per * 1000 < at <= now and (group is None or g == group)
        )

    for _ in range(160):
        step = rng.random()
        if step < 0.25:
            group = rng.choice([None, "a", "b", "own"])
            q.enqueue_many(["x"] * rng.randint(1, 4), cost=rng.choice(costs), group=group)
        elif step < 0.55:
            got = q.claim_many(rng.randint(1, 8), ttl=60.0)
            for lease in got:
                job = q.get(lease.id)
                now = round(job.claimed_at * 1000)
                claims[(lease.id, lease.attempt)] = [now, job.cost, job.group]
                held[(lease.id, lease.attempt)] = lease
            for lease in got:
                group = claims[(lease.id, lease.attempt)][2]
                assert in_span(now, None) <= budgets[""] * (1 + 1e-12)
                if group:
                    assert in_span(now, group) <= budgets[group] * (1 + 1e-12)
        elif step < 0.75 and held:
            key = rng.choice(sorted(held))
            lease = held.pop(key)
            spent = rng.choice([None, 0.05, 0.1, 1, 3, 5.5])
            how = rng.random()
            if how < 0.6:
                q.complete(lease, cost=spent)
            elif how < 0.8:
                q.fail(lease, "again", cost=spent, retry_in=0)
            else:
                q.release(lease)
                spent = None
            if spent is not None:
                claims[key][1] = spent
        else:
            clock.advance(rng.uniform(0, per / 3))
    assert len(claims) > 40  # the run claimed enough to mean something


def test_a_run_that_spent_nothing_settles_to_zero(q: Any, r: Any) -> None:
    """A cache hit, or a request refused before it ran, spent nothing: 0 is a cost it
    can report (an estimate must still be > 0), and it frees the whole estimate."""
    q.set_limits(cost_rate=100, cost_per=600.0)
    ids = q.enqueue_many(["x"] * 3, cost=50)
    first = q.claim_many(5, ttl=30.0)
    assert len(first) == 2
    q.complete(first[0], cost=0)
    q.fail(first[1], "refused", cost=0.0, retry_in=0)
    assert q.limits().recent_cost == 0
    assert q.get(ids[0]).spent == 0 and q.get(ids[1]).spent == 0
    again = q.claim_many(5, ttl=30.0)
    assert sorted(lease.id for lease in again) == sorted(ids[1:])
    q.complete_many(again, costs=[0, 0])
    assert q.limits().recent_cost == 0
    for bad in (-0.5, float("nan"), True):
        with pytest.raises(leaseq.InvalidArgument, match="cost"):
            q.complete(again[0], cost=bad)
