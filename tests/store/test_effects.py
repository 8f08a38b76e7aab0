"""complete(lease, effects=[...]): Redis writes applied with the completion, exactly once."""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq.store.effects import MAX_EFFECTS, hash_tag
from tests.support.backends import Clock


def every_kind(tag: str = "emails") -> list[tuple[Any, ...]]:
    return [
        ("HINCRBY", f"app:{{{tag}}}:totals", "sent", 2),
        ("HSET", f"app:{{{tag}}}:last", "to", "a@b.c", "n", 1),
        ("SADD", f"app:{{{tag}}}:seen", "a", "b"),
        ("ZADD", f"app:{{{tag}}}:scores", 1.5, "a", 2, "b"),
        ("incrby", f"app:{{{tag}}}:count", 3),
        ("SET", f"app:{{{tag}}}:flag", b"on"),
        ("XADD", f"app:{{{tag}}}:log", "job", "1"),
    ]


def app_state(r: Any) -> dict[str, Any]:
    t = "app:{emails}:"
    return {
        "totals": r.hgetall(t + "totals"),
        "last": r.hgetall(t + "last"),
        "seen": r.smembers(t + "seen"),
        "scores": r.zrange(t + "scores", 0, -1, withscores=True),
        "count": r.get(t + "count"),
        "flag": r.get(t + "flag"),
        "log": r.xlen(t + "log"),
    }


def test_every_allowed_command_applies_with_the_completion(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue({"n": 1})
    lease = q.claim(ttl=30.0)
    assert lease is not None
    q.complete(lease, "done", effects=every_kind())
    assert app_state(r) == {
        "totals": {b"sent": b"2"},
        "last": {b"to": b"a@b.c", b"n": b"1"},
        "seen": {b"a", b"b"},
        "scores": [(b"a", 1.5), (b"b", 2.0)],
        "count": b"3",
        "flag": b"on",
        "log": 1,
    }
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED


def test_a_stale_lease_applies_no_effect(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    q.enqueue({"n": 1})
    stale = q.claim(ttl=clock.lease(5.0))
    assert stale is not None
    clock.past(stale.deadline)
    q.reap()
    fresh = q.claim(ttl=30.0)
    assert fresh is not None and fresh.attempt == 2
    with pytest.raises(leaseq.LeaseLost):
        q.complete(stale, effects=every_kind())
    assert app_state(r)["count"] is None
    q.complete(fresh, effects=every_kind())
    with pytest.raises(leaseq.AlreadyFinished):  # a replay adds nothing
        q.complete(fresh, effects=every_kind())
    assert app_state(r)["count"] == b"3" and app_state(r)["log"] == 1


def test_an_effect_that_cannot_apply_writes_nothing_and_keeps_the_lease(
    q: leaseq.Queue, r: Any
) -> None:
    r.set("app:{emails}:totals", "a string, not a hash")
    r.hset("app:{emails}:h", "n", "abc")
    q.enqueue({"n": 1})
    lease = q.claim(ttl=30.0)
    assert lease is not None
    for bad in (
        [("INCRBY", "app:{emails}:count", 1), ("HINCRBY", "app:{emails}:totals", "sent", 1)],
        [("INCRBY", "app:{emails}:count", 1), ("HINCRBY", "app:{emails}:h", "n", 1)],
    ):
        with pytest.raises(leaseq.InvalidArgument, match="effect 2"):
            q.complete(lease, effects=bad)
    assert r.get("app:{emails}:count") is None
    job = q.get(lease.id)
    assert job is not None and job.state is leaseq.State.ACTIVE
    q.complete(lease, effects=[("INCRBY", "app:{emails}:count", 1)])
    assert r.get("app:{emails}:count") == b"1"


@pytest.mark.parametrize(
    ("effects", "match"),
    [
        ([("DEL", "app:{emails}:x")], "not allowed"),
        ([("EVAL", "app:{emails}:x", "return 1")], "not allowed"),
        ([(b"SET", "app:{emails}:x", "v")], "not allowed"),
        ([("SET", "app:{other}:x", "v")], "hash tag"),
        ([("SET", "app:emails:x", "v")], "hash tag"),
        ([("SET", "app:{}{emails}:x", "v")], "hash tag"),
        ([("SET", "leaseq:{emails}:job:1", "v")], "leaseq's own"),
        ([("SET", "leaseq:{emails}:pending", "v")], "leaseq's own"),
        ([("SET", b"app:{emails}:x", "v")], "non-empty str"),
        ([("SET", "app:{emails}:x")], "exactly 1"),
        ([("SET", "app:{emails}:x", "v", "EX")], "exactly 1"),
        ([("HSET", "app:{emails}:x", "f")], "in pairs"),
        ([("XADD", "app:{emails}:x", "f", "v", "g")], "in pairs"),
        ([("HINCRBY", "app:{emails}:x", "f", "1")], "integer"),
        ([("HINCRBY", "app:{emails}:x", "f", 2**63)], "integer"),
        ([("INCRBY", "app:{emails}:x", True)], "integer"),
        ([("ZADD", "app:{emails}:x", float("nan"), "m")], "finite"),
        ([("ZADD", "app:{emails}:x", "1", "m")], "finite"),
        ([("SADD", "app:{emails}:x", None)], "str, bytes or int"),
        ([("SADD", "app:{emails}:x", 1.5)], "str, bytes or int"),
        (["SET app:{emails}:x v"], "tuple"),
        ([("SET",)], "tuple"),
        ("SET", "list of tuples"),
        ([("SET", "app:{emails}:x", "v")] * (MAX_EFFECTS + 1), "at most"),
    ],
)
def test_bad_effects_are_refused_before_anything_is_sent(
    q: leaseq.Queue, r: Any, effects: Any, match: str
) -> None:
    q.enqueue({"n": 1})
    lease = q.claim(ttl=30.0)
    assert lease is not None
    before = sorted(r.keys("*"))
    with pytest.raises(leaseq.InvalidArgument, match=match):
        q.complete(lease, effects=effects)
    assert sorted(r.keys("*")) == before
    job = q.get(lease.id)
    assert job is not None and job.state is leaseq.State.ACTIVE


def test_hash_tag_follows_redis_cluster_rules() -> None:
    assert hash_tag("a:{q}:b") == "q"
    assert hash_tag("{q}{r}") == "q"
    assert hash_tag("a{}b{q}") is None
    assert hash_tag("a{q") is None
    assert hash_tag("plain") is None


def test_complete_many_still_works_without_effects(q: leaseq.Queue) -> None:
    q.enqueue_many([{"i": i} for i in range(3)])
    leases = q.claim_many(3, ttl=30.0)
    assert q.complete_many(leases, ["a", "b", "c"]) == []
    assert q.stats().succeeded == 3
