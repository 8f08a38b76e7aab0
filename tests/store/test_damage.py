"""Rows and keys damaged by hand (as with redis-cli): a clear leaseq error or
a dead-lettered job with last_error, and the healthy jobs still run.
(The dashboard and the CLI over damaged keys: tests/web/test_http.py,
tests/cli/; every field in every state: tests/store/test_bad_input.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import leaseq
from leaseq.errors import DamagedKey
from tests.support.backends import Clock
from tests.support.store import claim_one, index, row


def _drain(q: leaseq.Queue) -> list[str]:
    """Claim and complete everything claimable; the ids in order."""
    done = []
    while leases := q.claim_many(10):
        for lease in leases:
            q.complete(lease)
            done.append(lease.id)
    return done


DAMAGE: dict[str, tuple[Callable[[Any, str], object], str]] = {
    "attempts-abc": (lambda r, k: r.hset(k, "attempts", "abc"), "damaged row: attempts=abc"),
    "attempts-negative": (lambda r, k: r.hset(k, "attempts", "-1"), "damaged row: attempts=-1"),
    "attempts-float": (lambda r, k: r.hset(k, "attempts", "1e3"), "damaged row: attempts=1e3"),
    "max-attempts-missing": (
        lambda r, k: r.hdel(k, "max_attempts"),
        "damaged row: attempts=0 max_attempts=missing",
    ),
    "unknown-state": (lambda r, k: r.hset(k, "state", "weird"), "unknown state weird"),
    "payload-missing": (lambda r, k: r.hdel(k, "payload"), "payload missing"),
    "payload-not-json": (lambda r, k: r.hset(k, "payload", "{{{"), "payload does not decode"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_pending_row_is_dead_lettered_and_the_rest_run(
    q: leaseq.Queue, r: Any, damage: str
) -> None:
    hurt, why = DAMAGE[damage]
    ids = q.enqueue_many(range(5), ids=["a", "b", "bad", "c", "d"])
    hurt(r, q.keys.job("bad"))
    assert _drain(q) == ["a", "b", "c", "d"]
    stored = row(q, "bad")
    assert stored["state"] == "dead", stored
    assert why in stored["last_error"]
    assert list(index(q, "dead")) == ["bad"]
    assert index(q, "pending") == {} and index(q, "active") == {}
    stats = q.stats()
    assert (stats.dead, stats.succeeded) == (1, len(ids) - 1)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("attempts", "abc"),
        ("state", "weird"),
        ("max_attempts", "x"),
        ("enqueued_at", "soon"),
        ("timeout", "-5"),  # claim reads it as no limit; get must not show -0.005 s
        ("timeout", "9" * 30),
        ("timeout", "1e3"),  # claim reads only digits (none here): get must agree
        ("timeout", "2.5"),
        ("progress", "{nope"),
        ("result", "{nope"),
        ("payload", "{nope"),
    ],
)
def test_get_of_a_damaged_row_names_the_field(
    q: leaseq.Queue, r: Any, field: str, value: str
) -> None:
    q.enqueue("x", id="job")
    r.hset(q.keys.job("job"), field, value)
    with pytest.raises(leaseq.DamagedRow) as info:
        q.get("job")
    assert info.value.job_id == "job" and info.value.field == field
    assert value in str(info.value)


def test_get_of_a_row_missing_a_field(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    r.hdel(q.keys.job("job"), "attempts")
    with pytest.raises(leaseq.DamagedRow) as info:
        q.get("job")
    assert info.value.field == "attempts"


@pytest.mark.parametrize("field", ["enqueued_at", "priority"])
def test_damaged_side_fields_do_not_stop_a_claim(q: leaseq.Queue, r: Any, field: str) -> None:
    q.enqueue("x", id="job")
    r.hset(q.keys.job("job"), field, "abc")
    lease = claim_one(q)
    assert lease.id == "job" and lease.attempt == 1
    q.complete(lease)
    assert row(q, "job")["state"] == "succeeded"


def test_damaged_attempts_under_lease_is_refused_then_reaped_dead(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    q.enqueue("x", id="job")
    q.enqueue("y", id="ok")
    lease = claim_one(q, ttl=clock.lease(30.0))
    r.hset(q.keys.job("job"), "attempts", "abc")
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lease)
    clock.past(lease.deadline)
    assert q.reap() == (0, 1)
    stored = row(q, "job")
    assert stored["state"] == "dead"
    assert "lease expired" in stored["last_error"] and "damaged row" in stored["last_error"]
    assert _drain(q) == ["ok"]


def test_damaged_lease_until_is_still_reaped(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q, ttl=clock.lease(30.0))
    r.hset(q.keys.job("job"), "lease_until", "later")
    clock.past(lease.deadline)
    assert q.reap() == (1, 0)
    assert claim_one(q).attempt == 2


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_a_damaged_claimed_at_still_caps_the_lease(r: Any, clock: Clock, damage: str) -> None:
    # lease_cap counts from claimed_at: edited away, it counts from the next
    # heartbeat, never from nowhere (a lease heartbeated for good).
    cap = clock.lease(2.0, 0.3)
    q = leaseq.Queue("emails", redis=r, lease_cap=cap)
    q.enqueue("x", id="job")
    lease = claim_one(q, ttl=cap / 2)
    if damage == "garbage":
        r.hset(q.keys.job("job"), "claimed_at", "abc")
    else:
        r.hdel(q.keys.job("job"), "claimed_at")
    lease = q.extend(lease, ttl=cap / 2)
    capped_at = int(row(q, "job")["claimed_at"]) + round(cap * 1000)
    for _ in range(10):
        clock.advance(cap / 4)
        try:
            lease = q.extend(lease, ttl=cap / 2)
        except leaseq.LeaseCapReached:
            break
        assert round(lease.deadline * 1000) <= capped_at
    else:
        raise AssertionError("extended past 2.5 caps")


def test_retry_of_a_damaged_dead_row(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    q.fail(claim_one(q), "x", dead=True)
    r.hset(q.keys.job("job"), "attempts", "abc")
    with pytest.raises(leaseq.DamagedRow) as info:
        q.retry_dead("job")
    assert info.value.field == "attempts"
    assert row(q, "job")["state"] == "dead"


def test_stale_index_entries_are_dropped(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    q.enqueue("x", id="job")
    r.zadd(q.keys.pending, {"ghost": 0})
    r.zadd(q.keys.scheduled, {"ghost2": 0})
    r.zadd(q.keys.active, {"ghost3": 0})
    assert _drain(q) == ["job"]
    assert index(q, "pending") == {} and index(q, "scheduled") == {}
    assert index(q, "active") == {}
    assert q.reap() == (0, 0)


# -- keys of the wrong type -----------------------------------------------------------


@pytest.mark.parametrize("which", ["pending", "scheduled", "active", "meta", "dead"])
def test_index_key_of_the_wrong_type_is_a_clear_error(q: leaseq.Queue, r: Any, which: str) -> None:
    other = leaseq.Queue("other", redis=r)
    other.enqueue("fine", id="fine")
    q.enqueue("x", id="job")
    if which == "dead":
        q.enqueue("y", id="poison")
        r.hset(q.keys.job("poison"), "attempts", "abc")
    r.delete(getattr(q.keys, which))
    r.set(getattr(q.keys, which), "x")
    with pytest.raises(leaseq.DamagedKey) as info:
        # Whichever call first touches the damaged key reports it.
        q.enqueue("y", id="y")
        q.claim_many(5)
    assert isinstance(info.value, leaseq.LeaseqError)
    assert "wrong type" in str(info.value)
    # Other queues are untouched.
    lease = claim_one(other)
    other.complete(lease)
    assert row(other, "fine")["state"] == "succeeded"


def test_job_key_of_the_wrong_type_does_not_block_the_queue(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many(["a", "b", "c"], ids=["a", "bad", "c"])
    r.delete(q.keys.job("bad"))
    r.set(q.keys.job("bad"), "oops")
    got: list[str] = []
    for _ in range(5):
        try:
            leases = q.claim_many(1)
        except leaseq.DamagedKey:
            continue
        got += [lease.id for lease in leases]
        for lease in leases:
            q.complete(lease)
    assert got == ["a", "c"]
    assert r.get(q.keys.job("bad")) == b"oops"
    with pytest.raises(leaseq.DamagedKey):
        q.get("bad")


def test_release_of_a_row_with_damaged_max_attempts(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q, ttl=clock.lease(30.0))
    r.hset(q.keys.job("job"), "max_attempts", "many")
    with pytest.raises(leaseq.DamagedRow) as info:
        q.release(lease)
    assert info.value.field == "max_attempts" and info.value.value == "many"
    assert row(q, "job")["state"] == "active"
    clock.past(lease.deadline)
    assert q.reap() == (0, 1)
    assert "max_attempts=many" in row(q, "job")["last_error"]


def test_retry_all_dead_steps_over_stale_and_damaged_entries(q: leaseq.Queue, r: Any) -> None:
    ids = q.enqueue_many(range(4), ids=["a", "b", "hurt", "c"])
    for lease in q.claim_many(4):
        q.fail(lease, "x", dead=True)
    r.hset(q.keys.job("hurt"), "attempts", "abc")
    r.zadd(q.keys.dead, {"ghost": 1, "moved": 2})  # entries whose row is gone / elsewhere
    q.enqueue("m", id="moved")
    assert q.retry_all_dead() == 3
    assert [row(q, i)["state"] for i in ids] == ["pending", "pending", "dead", "pending"]
    assert list(index(q, "dead")) == ["hurt"]
    assert row(q, "moved")["state"] == "pending"
    with pytest.raises(leaseq.JobNotFound):
        q.retry_dead("ghost")


@pytest.mark.parametrize("field", ["seq", "enqueued", "succeeded"])
def test_damaged_meta_counter_is_a_clear_error(q: leaseq.Queue, r: Any, field: str) -> None:
    other = leaseq.Queue("other", redis=r)
    q.enqueue("x", id="job")
    r.hset(q.keys.meta, field, "abc")
    with pytest.raises(leaseq.DamagedKey) as info:
        q.enqueue("y")
        q.complete(claim_one(q))
    assert "non-integer" in str(info.value) and ".lua" in str(info.value)
    other.enqueue("fine", id="fine")
    other.complete(claim_one(other))
    assert row(other, "fine")["state"] == "succeeded"


@pytest.mark.parametrize("state", ["weird", ""])
def test_retry_of_a_dead_row_with_damaged_state_keeps_it_findable(
    q: leaseq.Queue, r: Any, state: str
) -> None:
    q.enqueue("x", id="job")
    q.fail(claim_one(q), "x", dead=True)
    if state:
        r.hset(q.keys.job("job"), "state", state)
    else:
        r.hdel(q.keys.job("job"), "state")
    with pytest.raises(leaseq.DamagedRow) as info:
        q.retry_dead("job")
    assert info.value.field == "state"
    assert q.retry_all_dead() == 0
    assert list(index(q, "dead")) == ["job"]


def test_ls_reports_damaged_rows_without_losing_the_page(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many(["a", "b", "c", "d"], ids=["a", "b", "c", "d"])
    r.hset(q.keys.job("b"), "attempts", "abc")
    r.delete(q.keys.job("c"))
    r.set(q.keys.job("c"), "not a hash")
    with pytest.raises(leaseq.DamagedRow):
        q.ls("pending")
    damaged: list[leaseq.DamagedRow] = []
    assert [job.id for job in q.ls("pending", damaged=damaged)] == ["a", "d"]
    assert sorted(exc.job_id for exc in damaged) == ["b", "c"]
    assert {exc.field for exc in damaged} == {"attempts", "<key>"}


def test_a_counter_that_is_not_a_number_is_a_damaged_key(r: Any) -> None:
    q = leaseq.Queue("counted", redis=r)
    q.enqueue({"n": 1})
    r.hset(q.keys.meta, "enqueued", "abc")
    with pytest.raises(DamagedKey, match="'enqueued' is 'abc'"):
        q.stats()
    r.hdel(q.keys.meta, "enqueued")
    assert q.stats().pending == 1


# -- a damaged ready list or pending set: stopped before the first write ------------------


def _dead(q: leaseq.Queue) -> str:
    job_id = q.enqueue("x", id="job", max_attempts=1)
    q.fail(claim_one(q), "boom")
    return job_id


def _held(q: leaseq.Queue, clock: Clock) -> leaseq.Lease:
    q.enqueue("x", id="job")
    return claim_one(q, ttl=clock.lease(30.0))


def _parent(q: leaseq.Queue, clock: Clock) -> leaseq.Lease:
    """A held job whose completion makes its child ready."""
    lease = _held(q, clock)
    q.enqueue("kid", id="kid", depends_on=["job"])
    return lease


# Each: (set up a job, returning what `act` needs), then the call that meets the damage.
MAKES_READY: dict[str, tuple[Callable[..., Any], Callable[..., object]]] = {
    "fail": (_held, lambda q, clock, lease: q.fail(lease, "boom", retry_in=0)),
    "release": (_held, lambda q, clock, lease: q.release(lease)),
    "complete": (_parent, lambda q, clock, lease: q.complete(lease)),
    "reap": (_held, lambda q, clock, lease: (clock.past(lease.deadline), q.reap())),
    "retry_dead": (lambda q, clock: _dead(q), lambda q, clock, job_id: q.retry_dead(job_id)),
    "retry_all_dead": (lambda q, clock: _dead(q), lambda q, clock, _: q.retry_all_dead()),
    "run_now": (
        lambda q, clock: q.enqueue("x", id="job", delay=60.0),
        lambda q, clock, job_id: q.run_now(job_id),
    ),
    "delete": (
        # A deleted parent's waiting child is released (or cancelled): settled at once.
        lambda q, clock: (
            q.enqueue("x", id="job", delay=60.0),
            q.enqueue("kid", depends_on=["job"]),
        ),
        lambda q, clock, _: q.delete("job"),
    ),
    "drop": (lambda q, clock: q.enqueue("x", id="job"), lambda q, clock, _: q.drop()),
    # A claim's reap would put the expired job back; an enqueue writes its row first.
    "claim": (_held, lambda q, clock, lease: (clock.past(lease.deadline), q.claim_many(1))),
    "enqueue": (lambda q, clock: None, lambda q, clock, _: q.enqueue("y", id="job", priority=2)),
    "enqueue_flow": (
        lambda q, clock: None,
        lambda q, clock, _: q.enqueue_flow(
            [leaseq.Step("a", id="job"), leaseq.Step("b", id="kid", depends_on=["job"])]
        ),
    ),
}


def _dumped(r: Any, q: leaseq.Queue) -> dict[bytes, bytes]:
    """Every key of the queue but meta (where a call keeps its clock floor), dumped."""
    keys = sorted(r.scan_iter(match=q.keys.stem + "*"))
    return {k: r.dump(k) for k in keys if not k.endswith(b":meta")}


@pytest.mark.parametrize("which", ["ready", "pending"])
@pytest.mark.parametrize("call", sorted(MAKES_READY))
def test_a_damaged_ready_index_stops_a_call_before_it_writes(
    q: leaseq.Queue, r: Any, clock: Clock, call: str, which: str
) -> None:
    make, act = MAKES_READY[call]
    made = make(q, clock)
    key = getattr(q.keys, which)
    r.delete(key)
    r.set(key, "x")
    before = _dumped(r, q)
    with pytest.raises(DamagedKey, match="wrong type") as info:
        act(q, clock, made)
    assert key in str(info.value)  # the error names the key to repair
    # Nothing moved: the row and every index as they were (meta keeps the clock floor).
    assert _dumped(r, q) == before
    # Mended by hand, the same call goes through.
    r.delete(key)
    act(q, clock, made)


def test_completions_that_make_nothing_ready_go_on_while_ready_is_damaged(
    q: leaseq.Queue, r: Any
) -> None:
    q.enqueue("plain", id="plain")
    q.enqueue("x", id="job")
    q.enqueue("kid", id="kid", depends_on=["job"])
    leases = {lease.id: lease for lease in q.claim_many(2)}
    r.delete(q.keys.ready)
    r.set(q.keys.ready, "x")
    # The plain job's completion touches neither index: it is written. The parent's
    # would make its child ready: refused, its row and the child as they were.
    with pytest.raises(DamagedKey, match="ready"):
        q.complete_many([leases["plain"], leases["job"]])
    assert row(q, "plain")["state"] == "succeeded"
    assert list(index(q, "succeeded")) == ["plain"]
    assert row(q, "job")["state"] == "active" and row(q, "kid")["state"] == "waiting"
    r.delete(q.keys.ready)
    q.complete(leases["job"])
    assert claim_one(q).id == "kid"
