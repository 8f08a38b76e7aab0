"""Fair groups: claims rotate between groups; group_concurrency caps each.

Cases taking ``q`` run on fakeredis and a real server, and again on the
asyncio queue (tests/transport/test_aio.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock
from tests.support.security import PASSWORD
from tests.support.store import text


def group_of(q: Any, lease: leaseq.Lease) -> str | None:
    job = q.get(lease.id)
    assert job is not None
    return job.group


def test_a_small_group_is_not_starved_by_a_big_one(q: Any, r: Any) -> None:
    q.enqueue_many([{"i": i} for i in range(1000)], group="big")
    small = set(q.enqueue_many([{"i": i} for i in range(10)], group="small"))
    first = [q.claim(ttl=30.0) for _ in range(20)]
    assert small <= {lease.id for lease in first if lease is not None}


def test_grouped_jobs_are_pending_and_listed(q: Any, r: Any) -> None:
    a = q.enqueue({"x": 1}, group="tenant-42")
    b = q.enqueue({"x": 2})
    job = q.get(a)
    assert job is not None and job.group == "tenant-42" and job.state == "pending"
    assert text(r.hget(q.keys.job(a), "group")) == "tenant-42"
    assert q.stats().pending == 2
    assert {j.id for j in q.ls("pending")} == {a, b}  # pending lists every ready id
    # The grouped job is in the pending ZSET and its group's; the ungrouped one of
    # priority 0 in the ready LIST alone (docs/keys-and-rows.md#the-ready-list).
    assert [text(i) for i in r.zrange(q.keys.pending, 0, -1)] == [a]
    assert [text(i) for i in r.zrange(q.keys.group("tenant-42"), 0, -1)] == [a]
    assert [text(i) for i in r.lrange(q.keys.ready, 0, -1)] == [b]


def test_priority_orders_jobs_within_a_group(q: Any, r: Any) -> None:
    low = q.enqueue("late", group="g", priority=5)
    high = q.enqueue("soon", group="g", priority=1)
    leases = [q.claim(ttl=30.0), q.claim(ttl=30.0)]
    assert [lease.id for lease in leases if lease] == [high, low]


def test_ungrouped_jobs_take_their_turn_like_a_group(q: Any, r: Any) -> None:
    q.enqueue_many(list(range(50)))
    q.enqueue_many(list(range(50)), group="a")
    q.enqueue_many(list(range(50)), group="b")
    got = Counter(group_of(q, lease) for lease in q.claim_many(30, ttl=30.0))
    assert got == {None: 10, "a": 10, "b": 10}


def test_group_concurrency_caps_active_leases_per_group(q: Any, r: Any) -> None:
    q.set_limits(group_concurrency=2)
    q.enqueue_many(list(range(10)), group="a")
    q.enqueue_many(list(range(10)), group="b")
    q.enqueue_many(list(range(3)))
    leases = q.claim_many(100, ttl=30.0)
    assert Counter(group_of(q, lease) for lease in leases) == {"a": 2, "b": 2, None: 3}
    assert q.claim(ttl=30.0) is None
    limits = q.limits()
    assert limits.group_concurrency == 2 and limits.groups_held == 2
    assert limits.busiest_group == 2
    done = next(lease for lease in leases if group_of(q, lease) == "a")
    q.complete(done)
    again = q.claim_many(10, ttl=30.0)
    assert [group_of(q, lease) for lease in again] == ["a"]
    q.set_limits(group_concurrency=None)  # removed: the held groups rejoin
    assert len(q.claim_many(100, ttl=30.0)) == 15


def test_grouped_children_join_their_groups_when_released(q: Any, r: Any) -> None:
    # A child of a finished parent is ready at enqueue; the others when their
    # parent succeeds. Either way each joins its group's ZSET and the rotation
    # (one ZADD and one rotation check per group), and a held group stays out.
    q.set_limits(group_concurrency=1)
    q.enqueue("p", id="p")
    q.enqueue("done", id="done")
    q.complete(q.claim(ttl=30.0))  # p
    q.complete(q.claim(ttl=30.0))  # done
    at_once = q.enqueue("now", group="a", depends_on=["p"])
    assert q.get(at_once).state == "pending" and r.zcard(q.keys.group("a")) == 1
    held = q.claim(ttl=30.0)  # group a is now at its limit: held
    assert held is not None and held.id == at_once and q.limits().groups_active == 1
    q.enqueue("q", id="q")
    parent = q.claim(ttl=30.0)
    assert parent is not None and parent.id == "q"
    kids = q.enqueue_many(list(range(6)), group="a", depends_on=["q"])
    kids += q.enqueue_many(list(range(6)), group="b", depends_on=["q"])
    assert q.stats().waiting == 12
    q.complete(parent)  # releases all twelve
    assert q.stats().pending == 12 and q.stats().waiting == 0
    assert r.zcard(q.keys.group("a")) == 6 and r.zcard(q.keys.group("b")) == 6
    # a is held (one active): only b's jobs flow until its slot is given back.
    first = q.claim_many(10, ttl=30.0)
    assert [group_of(q, lease) for lease in first] == ["b"]
    q.complete(held)
    again = q.claim_many(10, ttl=30.0)
    assert sorted(group_of(q, lease) for lease in again) == ["a"]
    assert {lease.id for lease in again} <= set(kids[:6])


def test_a_group_limit_lowered_below_what_is_active(q: Any, r: Any) -> None:
    q.enqueue_many(list(range(6)), group="a")
    held = q.claim_many(3, ttl=30.0)
    q.set_limits(group_concurrency=1)  # three active; none is taken away
    assert q.claim(ttl=30.0) is None
    q.complete(held[0])
    q.complete(held[1])
    assert q.claim(ttl=30.0) is None  # still one active: at the limit
    q.fail(held[2], "boom", retry_in=0)  # back to pending, and a slot frees
    assert q.claim(ttl=30.0) is not None
    assert q.claim(ttl=30.0) is None
    assert q.stats().pending == 3


def test_a_group_emptied_leaves_the_rotation(q: Any, r: Any) -> None:
    q.enqueue_many(list(range(2)), group="a")
    for lease in q.claim_many(10, ttl=30.0):
        q.complete(lease)
    assert r.zcard(q.keys.groups) == 0 and not r.exists(q.keys.group("a"))
    assert r.hlen(q.keys.group_active) == 0
    again = q.enqueue("later", group="a")  # and joins it again with a new job
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == again


def test_a_cancelled_grouped_job_is_never_claimed(q: Any, r: Any) -> None:
    a, b = q.enqueue_many(["x", "y"], group="a")
    assert q.cancel(a)
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == b
    assert q.claim(ttl=30.0) is None


def test_an_id_made_again_in_another_group_is_not_claimed_through_its_old_group(
    r: Any,
) -> None:
    # A cancel leaves the id's entry in its group's ready set (dropped at that
    # group's turn). The id made again in another group must not be handed out
    # by the old group's turn: that would take the new group past its cap.
    q = leaseq.Queue("again", redis=r, keep_succeeded=0)
    q.set_group_limits("b", concurrency=1)
    q.enqueue("x", id="a0", group="a")
    q.enqueue("x", id="X", group="a")
    q.cancel("X")
    assert q.get("X") is None
    q.enqueue("y", id="b0", group="b")
    q.enqueue("y", id="X", group="b")
    assert [lease.id for lease in q.claim_many(10)] == ["a0", "b0"]
    assert q.stats().pending == 1 and text(r.hget(q.keys.stem + "group_active", "b")) == "1"
    assert q.claim_many(10) == []
    q.enqueue("z", id="X2", group="a")
    assert [lease.id for lease in q.claim_many(10)] == ["X2"]
    assert q.stats().pending == 1  # X still waits for b's slot
    q.enqueue("u", id="Y", group="a")
    q.cancel("Y")
    q.enqueue("u", id="Y")  # made again without a group: claimed as ungrouped, once
    q.enqueue("v", id="a1", group="a")
    assert sorted(lease.id for lease in q.claim_many(10)) == ["Y", "a1"]


def test_release_and_reap_give_the_slot_back(q: Any, r: Any, clock: Clock) -> None:
    q.set_limits(group_concurrency=1)
    q.enqueue_many(["x", "y"], group="a")
    first = q.claim(ttl=clock.lease(5.0))
    assert first is not None and q.claim(ttl=30.0) is None
    clock.past(first.deadline)
    second = q.claim(ttl=30.0)  # the claim reaps first (slot back), then leases
    assert second is not None
    q.release(second)
    third = q.claim(ttl=30.0)
    assert third is not None
    with pytest.raises(leaseq.LeaseLost):
        q.complete(first)  # fencing holds with groups on
    assert q.limits().busiest_group == 1


def test_bad_groups_are_refused_and_write_nothing(q: Any, r: Any) -> None:
    for bad in ("", "a b", "{x}", 5, "x" * 257):
        with pytest.raises(leaseq.InvalidArgument):
            q.enqueue("p", group=bad)
        with pytest.raises(leaseq.InvalidArgument):
            q.enqueue_many(["p"], group=bad)
    with pytest.raises(leaseq.InvalidArgument):
        q.set_limits(group_concurrency=0)
    assert r.keys("*") == []


def test_a_delayed_grouped_job_joins_its_group_when_due(q: Any, r: Any, clock: Clock) -> None:
    job_id = q.enqueue("later", group="a", delay=clock.lease(5.0))
    assert r.zcard(q.keys.groups) == 0
    clock.advance(clock.lease(5.0) + 0.01)
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == job_id and group_of(q, lease) == "a"


def test_a_forced_drop_takes_the_group_bookkeeping_with_it(q: Any, r: Any) -> None:
    q.set_limits(group_concurrency=1)
    q.enqueue_many(["x", "y"], group="a")
    assert q.claim(ttl=30.0) is not None and q.claim(ttl=30.0) is None  # "a" is held
    q.drop(force=True)
    for key in (q.keys.groups, q.keys.group_held, q.keys.group_active, q.keys.group("a")):
        assert not r.exists(key)
    q.enqueue("again", group="a")
    assert q.claim(ttl=30.0) is not None  # not held by counts of deleted leases


def _groups_of(q: Any, leases: list[leaseq.Lease]) -> list[str | None]:
    return [group_of(q, lease) for lease in leases]


def test_a_group_at_its_rate_sits_out_while_the_other_flows(q: Any, r: Any, clock: Clock) -> None:
    per = 60.0 if clock.fake else 0.5
    q.set_group_limits("busy", rate=2, per=per)
    q.enqueue_many([{"i": i} for i in range(10)], group="busy")
    q.enqueue_many([{"i": i} for i in range(10)], group="calm")
    first = q.claim_many(6, ttl=3600.0)
    assert Counter(_groups_of(q, first)) == {"busy": 2, "calm": 4}
    rest = q.claim_many(20, ttl=3600.0)  # "busy" is held; "calm" goes on to its end
    assert Counter(_groups_of(q, rest)) == {"calm": 6}
    assert q.claim(ttl=3600.0) is None
    assert r.zscore(q.keys.group_rate_held, "busy") is not None
    clock.advance(per)
    again = q.claim_many(20, ttl=3600.0)
    assert Counter(_groups_of(q, again)) == {"busy": 2}  # a fresh window: two more


def test_a_job_released_and_claimed_again_counts_each_claim(q: Any, clock: Clock) -> None:
    # The frozen clock (and a fast server) claims, releases and claims one job in
    # one millisecond: each claim is its own entry in the group's rate log.
    q.set_group_limits("g", rate=2, per=60.0)
    q.enqueue({"x": 1}, group="g")
    claimed = 0
    for _ in range(10):
        lease = q.claim(ttl=30.0)
        if lease is None:
            break
        claimed += 1
        q.release(lease)
    assert claimed == 2


def test_group_rate_applies_to_every_group(q: Any, r: Any, clock: Clock) -> None:
    per = 60.0 if clock.fake else 0.5
    got = q.set_limits(group_rate=1, group_per=per)
    assert (got.group_rate, got.group_per) == (1, per)
    for g in ("a", "b", "c"):
        q.enqueue_many([{"i": i} for i in range(3)], group=g)
    q.enqueue_many([{"i": i} for i in range(3)])  # ungrouped jobs are not rate-held
    leases = q.claim_many(20, ttl=30.0)
    assert Counter(_groups_of(q, leases)) == {"a": 1, "b": 1, "c": 1, None: 3}
    # The claims left in each group's window expire with it: nothing to clean up.
    assert 0 < r.pttl(q.keys.group_claims_prefix + "a") <= per * 1000
    # A heavy tenant may get more than the rest; removing the rate frees everyone.
    q.set_group_limits("a", rate=5, per=per)
    assert Counter(_groups_of(q, q.claim_many(20, ttl=30.0))) == {"a": 2}
    limits = q.set_limits(group_rate=None)
    assert limits.group_rate is None and limits.groups["a"].rate == 5
    assert Counter(_groups_of(q, q.claim_many(20, ttl=30.0))) == {"b": 2, "c": 2}


def test_a_groups_own_concurrency_overrides_the_queues(q: Any, r: Any) -> None:
    q.set_limits(group_concurrency=1)
    q.set_group_limits("heavy", concurrency=3)
    q.enqueue_many([{"i": i} for i in range(5)], group="heavy")
    q.enqueue_many([{"i": i} for i in range(5)], group="light")
    leases = q.claim_many(20, ttl=30.0)
    assert Counter(_groups_of(q, leases)) == {"heavy": 3, "light": 1}
    got = q.limits()
    assert got.groups == {"heavy": leaseq.GroupLimits(concurrency=3)}
    heavy = next(x for x in leases if group_of(q, x) == "heavy")
    q.complete(heavy)  # below its own cap again: back in the rotation
    assert _groups_of(q, q.claim_many(20, ttl=30.0)) == ["heavy"]
    q.set_group_limits("heavy", concurrency=None)
    assert q.limits().groups == {}


def test_bad_group_limits_write_nothing(q: Any, r: Any) -> None:
    for call in (
        lambda: q.set_group_limits("has space", rate=1),
        lambda: q.set_group_limits("a", rate=0),
        lambda: q.set_group_limits("a", per=5.0),
        lambda: q.set_group_limits("a", concurrency=-1),
        lambda: q.set_limits(group_rate=1, group_per=0.0),
        lambda: q.set_limits(group_per=1.0),
    ):
        with pytest.raises(leaseq.LeaseqError):
            call()
    assert r.keys("*") == []


def test_the_least_privilege_acl_user_runs_fair_groups(acl_server: Any) -> None:
    # The command list of docs/reliability.md must still suffice with groups on.
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "emails", keep_succeeded=60.0)
    q.set_limits(group_concurrency=1)
    q.enqueue_many(["x", "y"], group="a")
    q.enqueue("z")
    leases = q.claim_many(10, ttl=30.0)
    assert len(leases) == 2 and q.limits().groups_held == 1
    assert q.stats().groups_held == 1
    q.complete(leases[0])
    q.release(leases[1])
    assert len(q.claim_many(10, ttl=30.0)) >= 1
    q.set_limits(group_concurrency=None)
    q.set_group_limits("b", concurrency=1)
    q.enqueue_many(["x", "y"], group="b")
    assert [group_of(q, x) for x in q.claim_many(10, ttl=30.0)].count("b") == 1
    q.drop(force=True)


def test_big_claims_keep_the_turns_and_each_groups_order(q: Any, r: Any) -> None:
    # A claim pops a group's share of a big call at once; what the turns hand out must be
    # what one turn at a time would: the groups and the ungrouped jobs in a fixed cycle
    # (one job each per turn, a group leaving once empty), each group in priority then FIFO
    # order, and every job handed out once.
    sizes = {"a": 4000, "b": 37, "c": 1, "d": 2500, None: 1500, "e": 3000}
    order: dict[str | None, list[str]] = {}
    for group, size in sizes.items():
        options = {} if group is None else {"group": group}
        few = size // 10
        high = q.enqueue_many([{"g": group} for _ in range(few)], priority=1, **options)
        low = q.enqueue_many([{"g": group} for _ in range(size - few)], priority=5, **options)
        order[group] = list(high) + list(low)
    of = {job_id: group for group, ids in order.items() for job_id in ids}
    got: list[str] = []
    for n in [1000, 7, 333, 1, 1000] * 10:
        got.extend(lease.id for lease in q.claim_many(n, ttl=600.0))
    assert q.claim(ttl=600.0) is None
    assert len(got) == len(set(got)) == sum(sizes.values())
    for group, ids in order.items():
        assert [job_id for job_id in got if of[job_id] == group] == ids
    # The cycle: while every group still has jobs, each takes one turn per round.
    assert len({of[job_id] for job_id in got[: len(sizes)]}) == len(sizes)
    left = dict(sizes)
    cycle: list[str | None] = []
    for job_id in got:
        group = of[job_id]
        if group in cycle:
            # A group's next turn comes only after every other one still holding jobs.
            assert cycle[0] == group, f"{group!r} took a turn out of order"
            cycle.pop(0)
        cycle.append(group)
        left[group] -= 1
        if left[group] == 0:
            cycle.remove(group)
    assert r.zcard(q.keys.groups) == 0 and r.zcard(q.keys.pending) == 0


def test_a_group_emptied_then_refilled_in_one_claim_stays_in_the_rotation(q: Any, r: Any) -> None:
    # One claim empties group "g", then dead-letters a damaged parent whose child
    # (on_parent_failure="run") becomes ready in "g": the group must still rotate.
    q.enqueue({"u": 0}, id="u0")
    q.enqueue({"parent": True}, id="p")
    q.enqueue({"child": True}, id="c", depends_on=["p"], on_parent_failure="run", group="g")
    q.enqueue({"g": 1}, id="g1", group="g")
    q.enqueue_many([{"h": i} for i in range(5)], group="h")
    r.hdel(q.keys.job("p"), "payload")  # damaged: the claim dead-letters it
    first = [lease.id for lease in q.claim_many(6, ttl=600.0)]
    assert first[:2] == ["u0", "g1"]
    assert text(r.hget(q.keys.job("p"), "state")) == "dead"
    # (claim_many's second call takes "c" when the first stopped at its time budget:
    # fakeredis's Lua is slow.)
    assert "c" in first or q.get("c").state is leaseq.State.PENDING  # type: ignore[union-attr]
    rest = {lease.id for lease in q.claim_many(100, ttl=600.0)}
    assert "c" in rest | set(first)
    assert r.zcard(q.keys.group("g")) == 0 and r.zscore(q.keys.groups, "g") is None


def test_groups_made_ready_during_a_claim_keep_the_turn_counter_ahead(q: Any, r: Any) -> None:
    # The claim's first turn (the ungrouped jobs') dead-letters a damaged parent whose
    # five children (on_parent_failure="run") become ready, each group taking a fresh
    # turn number from meta gseq; the claim uses only two of its own. The counter must
    # end above every number given out, or the next new group would go before them.
    q.enqueue({"parent": True}, id="p")
    for i in range(5):
        q.enqueue({"c": i}, id=f"c{i}", depends_on=["p"], on_parent_failure="run", group=f"x{i}")
    q.enqueue_many([{"h": i} for i in range(3)], group="h")
    r.hdel(q.keys.job("p"), "payload")  # damaged: the claim dead-letters it
    assert len(q.claim_many(1, ttl=600.0)) == 1
    assert text(r.hget(q.keys.job("p"), "state")) == "dead"
    scores = [score for _, score in r.zrange(q.keys.groups, 0, -1, withscores=True)]
    assert len(scores) == 6  # h and the five children's groups
    assert int(r.hget(q.keys.meta, "gseq")) >= max(scores)
    q.enqueue({"late": True}, group="late")  # a new group goes behind all of them
    assert r.zscore(q.keys.groups, "late") > max(scores)


def test_a_damaged_turn_counter_starts_over(q: Any, r: Any) -> None:
    q.enqueue_many([{"i": i} for i in range(4)], group="a")
    r.hset(q.keys.meta, "gseq", "not a number")
    assert len(q.claim_many(2, ttl=600.0)) == 2
    assert int(r.hget(q.keys.meta, "gseq")) >= 1
    assert len(q.claim_many(10, ttl=600.0)) == 2
