"""Fencing: attempts is the lease's token, and only the current holder of the
current row moves a job.

Every refusal is checked against a full snapshot of the database, so a
refused call is proven to have changed nothing. A row that is gone (kept
0 s, expired, purged) frees its id; enqueued again, the new row is a new
incarnation whose first lease carries token 1 again, and a stalled lease of
the old row, also token 1, must not touch it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis as redis_lib

import leaseq
from leaseq.store.enqueue import enqueue_calls
from leaseq.store.reap import reap_call
from tests.support.backends import Clock
from tests.support.store import claim_one, index, row, server_ms, snapshot

STALE_OPS: dict[str, Callable[[leaseq.Queue, leaseq.Lease], object]] = {
    "complete": lambda q, lease: q.complete(lease, result="stale"),
    "extend": lambda q, lease: q.extend(lease, ttl=60.0),
    "fail": lambda q, lease: q.fail(lease, "stale"),
    "fail-dead": lambda q, lease: q.fail(lease, "stale", dead=True),
    "release": lambda q, lease: q.release(lease),
    "once": lambda q, lease: q.once(lease, "charge"),
    "progress": lambda q, lease: q.progress(lease, {"done": 1}),
    "record_step": lambda q, lease: q.record_step(lease, "charge", {"ok": 1}),
    "complete_many": lambda q, lease: _raise_first(q.complete_many([lease])),
    "extend_many": lambda q, lease: _raise_first(
        [r for r in q.extend_many([lease]) if isinstance(r, leaseq.LeaseLost)]
    ),
}


def _raise_first(lost: list[leaseq.LeaseLost]) -> None:
    if lost:
        raise lost[0]


def _reaped_and_reclaimed(q: leaseq.Queue, clock: Clock) -> tuple[leaseq.Lease, leaseq.Lease]:
    q.enqueue({"n": 1}, id="job")
    stale = claim_one(q, ttl=clock.lease(30.0))
    clock.past(stale.deadline)
    assert q.reap() == (1, 0)
    fresh = claim_one(q, ttl=60.0)
    assert fresh.id == stale.id and fresh.attempt == stale.attempt + 1
    return stale, fresh


def _refused_unchanged(q: leaseq.Queue, r: Any, op: str, stale: leaseq.Lease) -> leaseq.LeaseLost:
    """``op`` with ``stale`` raises a plain LeaseLost (not AlreadyFinished: the
    lease never finished the job) and changes nothing in the database."""
    before = snapshot(r)
    with pytest.raises(leaseq.LeaseLost) as info:
        STALE_OPS[op](q, stale)
    assert not isinstance(info.value, leaseq.AlreadyFinished)
    assert snapshot(r) == before
    return info.value


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_stale_worker_after_reap_and_reclaim_changes_nothing(
    q: leaseq.Queue, r: Any, clock: Clock, op: str
) -> None:
    stale, fresh = _reaped_and_reclaimed(q, clock)
    lost = _refused_unchanged(q, r, op, stale)
    assert lost.job_id == "job" and lost.token == 1
    assert lost.state == "active" and lost.attempts == "2"
    q.complete(fresh)  # the current holder is unaffected
    assert row(q, "job")["state"] == "succeeded"


def _a_claim_lost_to_a_failover(q: leaseq.Queue, r: Any) -> tuple[leaseq.Lease, leaseq.Lease]:
    """A claim the primary ran and its replica never saw: every key is put back
    as it was before the claim (what the promoted replica holds), then the job
    is claimed again there, at the same attempt."""
    q.enqueue({"n": 1}, id="job")
    replica = {key: r.dump(key) for key in r.keys("*")}
    lost = claim_one(q, ttl=60.0)
    r.flushdb()
    for key, value in replica.items():
        r.restore(key, 0, value)
    fresh = claim_one(q, ttl=60.0)
    assert fresh.attempt == lost.attempt == 1 and fresh.fence != lost.fence
    return lost, fresh


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_a_claim_lost_to_a_failover_changes_nothing_under_the_same_attempt(
    q: leaseq.Queue, r: Any, op: str
) -> None:
    lost, fresh = _a_claim_lost_to_a_failover(q, r)
    refused = _refused_unchanged(q, r, op, lost)
    assert refused.state == "active" and refused.attempts == "1"
    assert f"under another claim (fence {fresh.fence}, this lease's {lost.fence})" in str(refused)
    q.complete(fresh, result="mine")
    # Finished under the same attempt, it is still not the lost lease's win.
    with pytest.raises(leaseq.LeaseLost) as info:
        q.complete(lost, result="stale")
    assert not isinstance(info.value, leaseq.AlreadyFinished)
    job = q.get("job")
    assert job is not None and job.result == "mine" and job.fence == fresh.fence


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_stale_worker_after_reap_before_reclaim_changes_nothing(
    q: leaseq.Queue, r: Any, clock: Clock, op: str
) -> None:
    q.enqueue({"n": 1}, id="job")
    stale = claim_one(q, ttl=clock.lease(30.0))
    clock.past(stale.deadline)
    assert q.reap() == (1, 0)
    before = snapshot(r)
    with pytest.raises(leaseq.LeaseLost) as info:
        STALE_OPS[op](q, stale)
    assert info.value.state == "pending" and info.value.attempts == "1"
    assert snapshot(r) == before
    assert claim_one(q).attempt == 2


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_lease_on_deleted_row_is_lost(q: leaseq.Queue, r: Any, op: str) -> None:
    q.enqueue({"n": 1}, id="job")
    lease = claim_one(q)
    r.delete(q.keys.job("job"))
    before = snapshot(r)
    with pytest.raises(leaseq.LeaseLost) as info:
        STALE_OPS[op](q, lease)
    assert info.value.state is None and info.value.attempts is None
    assert "gone" in str(info.value)
    assert snapshot(r) == before


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_a_lost_lease_names_its_queue_and_row(q: leaseq.Queue, op: str) -> None:
    q.enqueue({"n": 1}, id="job")
    lease = claim_one(q)
    q.cancel("job")
    with pytest.raises(leaseq.LeaseLost) as info:
        STALE_OPS[op](q, lease)
    lost = info.value
    assert (lost.job_id, lost.token, lost.state) == ("job", 1, "cancelled")
    assert (lost.queue, lost.incarnation) == ("emails", lease.incarnation)
    assert lease.incarnation > 0


def test_a_lost_lease_built_by_hand_keeps_its_old_signature() -> None:
    lost = leaseq.LeaseLost("job", 2, "pending", "3")
    assert (lost.queue, lost.incarnation) == (None, None)
    assert str(lost) == "lease on job 'job' (attempt 2) is lost: row is pending at attempts=3"
    named = leaseq.AlreadyFinished("job", 2, "succeeded", "2", "done", queue="q", incarnation=5)
    assert (named.queue, named.incarnation, str(named)) == ("q", 5, "done")


def test_expired_but_unreaped_lease_may_still_finish(q: leaseq.Queue, clock: Clock) -> None:
    q.enqueue("a", id="a")
    q.enqueue("b", id="b")
    a, b = q.claim_many(2, ttl=clock.lease(30.0))
    clock.past(max(a.deadline, b.deadline))
    assert q.stats().expired == 2
    a = q.extend(a, ttl=60.0)
    q.complete(a)
    q.complete(b)
    assert row(q, "a")["state"] == row(q, "b")["state"] == "succeeded"
    assert q.reap() == (0, 0)


def test_replayed_complete_is_already_finished(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    q.complete(lease, result=1)
    before = snapshot(r)
    with pytest.raises(leaseq.AlreadyFinished) as info:
        q.complete(lease, result=2)
    assert isinstance(info.value, leaseq.LeaseLost)
    assert info.value.state == "succeeded" and info.value.attempts == "1"
    assert snapshot(r) == before


def test_complete_of_a_cancelled_or_dead_job_is_lost(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    q.fail(lease, "dead", dead=True)
    before = snapshot(r)
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lease)
    with pytest.raises(leaseq.LeaseLost):
        q.extend(lease)
    assert snapshot(r) == before


def test_token_must_match_exactly(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    before = snapshot(r)
    for token in (0, 2, 11, -1):
        forged = leaseq.Lease(
            id=lease.id,
            queue=lease.queue,
            attempt=token,
            max_attempts=lease.max_attempts,
            payload=None,
            deadline=lease.deadline,
            enqueued_at=lease.enqueued_at,
            worker="forger",
        )
        with pytest.raises(leaseq.LeaseLost):
            q.complete(forged)
    assert snapshot(r) == before


def test_complete_many_reports_only_the_lost(q: leaseq.Queue) -> None:
    q.enqueue_many(["a", "b", "c"], ids=["a", "b", "c"])
    leases = q.claim_many(3)
    q.fail(leases[1], "gave up on b", retry_in=0)
    lost = q.complete_many(leases, results=[1, 2, 3])
    assert [(exc.job_id, exc.state) for exc in lost] == [("b", "pending")]
    assert [row(q, i)["state"] for i in "abc"] == ["succeeded", "pending", "succeeded"]
    assert "result" not in row(q, "b")


# -- concurrent reapers ------------------------------------------------------------


def _expired_mix(q: leaseq.Queue, clock: Clock, n: int) -> tuple[list[str], list[str]]:
    """n jobs with attempts left and n on their last attempt, all under expired leases."""
    keep = q.enqueue_many(range(n), max_attempts=5)
    last = q.enqueue_many(range(n), max_attempts=1)
    leases = q.claim_many(2 * n, ttl=clock.lease(30.0, 0.1))
    assert len(leases) == 2 * n
    clock.past(max(lease.deadline for lease in leases))
    return keep, last


def _check_reaped_once(q: leaseq.Queue, keep: list[str], last: list[str]) -> None:
    for job_id in keep:
        stored = row(q, job_id)
        assert (stored["state"], stored["attempts"]) == ("pending", "1")
    for job_id in last:
        stored = row(q, job_id)
        assert (stored["state"], stored["attempts"]) == ("dead", "1")
    assert sorted(index(q, "pending")) == sorted(keep)
    assert sorted(index(q, "dead")) == sorted(last)
    assert index(q, "active") == {}
    stats = q.stats()
    assert stats.totals["expired"] == len(keep) + len(last)
    assert stats.totals["dead"] == len(last)


def test_many_concurrent_reapers_move_each_job_once(
    q: leaseq.Queue, clock: Clock, backend: str, request: pytest.FixtureRequest
) -> None:
    n = 150
    keep, last = _expired_mix(q, clock, n)
    totals: list[tuple[int, int]] = []
    if backend == "fake":
        # One process, many clients: interleave small reaps and claims' sweeps.
        reapers = [leaseq.Queue("emails", redis=q.redis) for _ in range(6)]
        more = True
        while more:
            more = False
            for reaper in reapers:
                requeued, died, left = reaper._run(reap_call(reaper._core, limit=7))
                totals.append((requeued, died))
                more = more or left
    else:
        server = request.getfixturevalue("redis_server")
        start = threading.Barrier(8)
        lock = threading.Lock()
        errors: list[BaseException] = []

        def reap() -> None:
            client = redis_lib.Redis(port=server.port)
            mine = leaseq.Queue("emails", redis=client)
            try:
                start.wait()
                for _ in range(20):
                    got = mine._run(reap_call(mine._core, limit=5))
                    with lock:
                        totals.append(got[:2])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                client.close()

        threads = [threading.Thread(target=reap) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        totals.append(q.reap())
    assert sum(t[0] for t in totals) == n
    assert sum(t[1] for t in totals) == n
    _check_reaped_once(q, keep, last)


def test_claims_racing_reapers_never_double_hand_out(
    q: leaseq.Queue, clock: Clock, backend: str, request: pytest.FixtureRequest
) -> None:
    """Claim sweeps reap too; concurrent claimers each get distinct jobs at attempt 2."""
    n = 60
    keep, _ = _expired_mix(q, clock, n)
    got: list[leaseq.Lease] = []
    if backend == "fake":
        others = [leaseq.Queue("emails", redis=q.redis) for _ in range(4)]
        while True:
            batch = [lease for o in others for lease in o.claim_many(3, ttl=60.0)]
            if not batch:
                break
            got += batch
    else:
        server = request.getfixturevalue("redis_server")
        lock = threading.Lock()

        def work() -> None:
            client = redis_lib.Redis(port=server.port)
            mine = leaseq.Queue("emails", redis=client)
            try:
                while leases := mine.claim_many(3, ttl=60.0):
                    with lock:
                        got.extend(leases)
            finally:
                client.close()

        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert sorted(lease.id for lease in got) == sorted(keep)
    assert {lease.attempt for lease in got} == {2}


def test_extend_many_answers_each_lease_and_writes_only_the_held_ones(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    q.enqueue_many(["a", "b", "c"], ids=["a", "b", "c"])
    a, b, c = (claim_one(q, ttl=clock.lease(30.0, 5.0)) for _ in range(3))
    r.hset(q.keys.job("b"), "attempts", 7)  # b is now held under another token
    before_b = row(q, "b")
    clock.advance(clock.lease(1.0, 0.05))
    got = q.extend_many([a, b, c], ttl=60.0)
    assert isinstance(got[0], leaseq.Lease) and got[0].deadline > a.deadline
    assert isinstance(got[1], leaseq.LeaseLost) and got[1].job_id == "b"
    assert isinstance(got[2], leaseq.Lease) and got[2].id == "c"
    assert row(q, "b") == before_b
    assert index(q, "active")["a"] == round(got[0].deadline * 1000)
    assert int(row(q, "c")["lease_until"]) == round(got[2].deadline * 1000)
    # A replay (the reply was lost) extends again from the new now: harmless.
    again = q.extend_many([a, c], ttl=60.0)
    assert all(isinstance(x, leaseq.Lease) for x in again)


# -- row incarnations: a reused id is a new row ----------------------------------------


def _stale_lease_of_a_reused_id(r: Any, clock: Clock) -> tuple[leaseq.Queue, leaseq.Lease]:
    """A's lease (token 1) stalls; B finishes the job, the row goes; the id
    comes back and C holds the new row's attempt 1. Returns A's lease."""
    q = leaseq.Queue("reuse", redis=r, keep_succeeded=0)
    q.enqueue("first", id="job")
    stale = claim_one(q, ttl=clock.lease(1.0))
    clock.past(stale.deadline)
    assert q.reap() == (1, 0)
    q.complete(claim_one(q))  # B, token 2; keep_succeeded=0 deletes the row
    assert r.exists(q.keys.job("job")) == 0
    q.enqueue("second", id="job")
    current = claim_one(q)
    assert current.attempt == stale.attempt == 1
    assert current.incarnation > stale.incarnation
    return q, stale


def test_a_stale_lease_cannot_complete_a_new_row_under_the_same_id(r: Any, clock: Clock) -> None:
    q, stale = _stale_lease_of_a_reused_id(r, clock)
    before = snapshot(r)
    with pytest.raises(leaseq.LeaseLost) as lost:
        q.complete(stale, "from the old job")
    # Not "already finished under your token": the row is another job.
    assert not isinstance(lost.value, leaseq.AlreadyFinished)
    assert snapshot(r) == before
    assert row(q, "job")["state"] == "active"


def test_a_stale_lease_cannot_touch_the_new_row_at_all(r: Any, clock: Clock) -> None:
    q, stale = _stale_lease_of_a_reused_id(r, clock)
    before = snapshot(r)
    for act in (
        lambda: q.extend(stale, ttl=60.0),
        lambda: q.fail(stale, "old"),
        lambda: q.fail(stale, "old", dead=True),
        lambda: q.release(stale),
        lambda: q.once(stale, "charge"),
        lambda: q.complete_many([stale]) and None,
    ):
        try:
            act()
        except leaseq.LeaseLost as exc:
            assert not isinstance(exc, leaseq.AlreadyFinished)
    assert q.complete_many([stale])[0].job_id == "job"
    lost = q.extend_many([stale])[0]
    assert isinstance(lost, leaseq.LeaseLost)
    assert snapshot(r) == before


def test_every_row_under_a_chosen_id_gets_a_new_incarnation(q: leaseq.Queue, r: Any) -> None:
    ids = q.enqueue_many(["a", "b", "c"], ids=["a", "b", "c"])
    q.enqueue("d", id="d")
    q.enqueue("d-again", id="d")  # deduplicated: no new row, no new number
    seen = [q.get(i).incarnation for i in [*ids, "d"]]  # type: ignore[union-attr]
    # A queue's first row numbers start at its server time in ms times 1000
    # (see reserve_incarnations.lua), then count up, one per row.
    first = seen[0]
    assert seen == [first, first + 1, first + 2, first + 3]
    assert abs(first // 1000 - q.stats().server_time * 1000) < 60_000
    assert [row(q, i)["incarnation"] for i in "abcd"] == [str(n) for n in seen]
    leases = q.claim_many(4)
    assert sorted(lease.incarnation for lease in leases) == seen
    assert "incarnation" not in q.stats().totals


def test_a_row_under_an_id_leaseq_made_is_named_by_its_enqueued_at(q: leaseq.Queue, r: Any) -> None:
    # Its id is never reused (80 random bits), so the row stores no number
    # of its own: leases carry its enqueued_at, which is never rewritten.
    made = q.enqueue("x")
    assert "incarnation" not in row(q, made)
    number = int(row(q, made)["enqueued_at"])
    assert q.get(made).incarnation == number  # type: ignore[union-attr]
    lease = claim_one(q)
    assert lease.incarnation == number
    q.complete(q.extend(lease, ttl=30.0), "ok")
    # A mixed batch (one chosen id) numbers all of its rows.
    mixed = q.enqueue_many(["y", "z"], ids=[None, "chosen"])
    assert all("incarnation" in row(q, i) for i in mixed)


def test_dependent_rows_are_numbered_only_under_chosen_ids(q: leaseq.Queue, r: Any) -> None:
    # The dependency script follows enqueue's rule: a made id needs no number.
    q.enqueue("p", id="p")
    made = q.enqueue("child", depends_on=["p"])
    chosen = q.enqueue("child", id="kid", depends_on=["p"])
    flow = q.enqueue_flow([leaseq.Step("a"), leaseq.Step("b", depends_on=["p"])])
    mixed = q.enqueue_flow([leaseq.Step("a", id="named"), leaseq.Step("b", depends_on=["named"])])
    assert "incarnation" not in row(q, made) and "incarnation" in row(q, chosen)
    assert all("incarnation" not in row(q, i) for i in flow)
    assert all("incarnation" in row(q, i) for i in mixed)
    q.complete(claim_one(q))  # p: releases the children
    leases = q.claim_many(10)
    assert {lease.id for lease in leases} >= {made, chosen, *flow, mixed[0]}
    assert next(x for x in leases if x.id == made).incarnation == int(row(q, made)["enqueued_at"])
    assert q.complete_many(leases) == []


def test_a_replayed_enqueue_of_a_made_id_is_a_new_row_to_old_leases(r: Any, clock: Clock) -> None:
    # The one way a made id comes back: a replay of the call that made it
    # (a retry after a lost reply) arriving after the row is gone. The new
    # row's enqueued_at is later, so the stalled lease of the first row
    # cannot act on it, although its attempt matches.
    q = leaseq.Queue("replay", redis=r, keep_succeeded=0)
    made = q.enqueue("first")
    stale = claim_one(q, ttl=clock.lease(1.0))
    clock.past(stale.deadline)
    assert q.reap() == (1, 0)
    q.complete(claim_one(q))  # token 2; the row goes
    assert r.exists(q.keys.job(made)) == 0
    clock.advance(0.002)  # a replay comes later than the call it repeats
    calls = enqueue_calls(q._core, ["first"], [None], {})[1]  # the same call, replayed
    call = calls[0]
    args = [*call.args[:-2], made, call.args[-1]]  # the replay carries the id the lost call made
    assert q._run(dataclasses.replace(call, args=args)) == [1]
    current = claim_one(q)
    assert (current.id, current.attempt, stale.attempt) == (made, 1, 1)
    assert current.incarnation > stale.incarnation
    with pytest.raises(leaseq.LeaseLost) as lost:
        q.complete(stale, "from the old job")
    assert not isinstance(lost.value, leaseq.AlreadyFinished)
    q.complete(current, "ok")


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_a_replayed_enqueue_while_the_clock_floor_holds_is_a_new_row_to_old_leases(
    r: Any, clock: Clock, op: str
) -> None:
    # After a failover onto a server whose clock is behind, the queue's time
    # stands at its floor: every row made then has the same enqueued_at. That
    # is also when replies get lost and calls replayed, so a replay of a made
    # id's enqueue must still not hand a stale lease the new row.
    q = leaseq.Queue("held", redis=r, keep_succeeded=0)
    q.enqueue("warm")
    r.hset(q.keys.meta, "clock", server_ms(r) + 5_000)  # the floor the old primary left
    made = q.enqueue("first")
    assert "incarnation" in row(q, made)  # numbered while the clock is held
    stale = next(lease for lease in q.claim_many(2) if lease.id == made)
    q.complete(stale)  # its reply lost in the failover; the row goes
    assert r.exists(q.keys.job(made)) == 0
    call = enqueue_calls(q._core, ["first"], [None], {})[1][0]  # the same call, replayed
    args = [*call.args[:-2], made, call.args[-1]]
    assert q._run(dataclasses.replace(call, args=args)) == [1]
    current = claim_one(q)
    assert (current.id, current.attempt, stale.attempt) == (made, 1, 1)
    assert current.enqueued_at == stale.enqueued_at  # the clock stood still
    before = snapshot(r)
    with pytest.raises(leaseq.LeaseLost) as lost:
        STALE_OPS[op](q, stale)  # a replay of the first row's last call, say
    assert not isinstance(lost.value, leaseq.AlreadyFinished)
    assert snapshot(r) == before
    q.complete(current, "ok")


def test_a_row_written_before_incarnations_still_works(q: leaseq.Queue, r: Any) -> None:
    # The row the previous version wrote: no incarnation field.
    r.hset(
        q.keys.job("old"),
        mapping={
            "state": "pending",
            "attempts": 0,
            "max_attempts": 3,
            "payload": '"x"',
            "enqueued_at": 1,
            "priority": 0,
        },
    )
    r.zadd(q.keys.pending, {"old": 1})
    lease = claim_one(q)
    assert (lease.id, lease.incarnation) == ("old", 1)  # its enqueued_at
    assert q.once(lease, "m") is True
    lease = q.extend(lease, ttl=30.0)
    q.complete(lease, "done")
    assert row(q, "old")["state"] == "succeeded"
    assert q.get("old").incarnation == 1  # type: ignore[union-attr]
    # A replay is told it won, as before.
    with pytest.raises(leaseq.AlreadyFinished):
        q.complete(lease)


@pytest.mark.parametrize("damaged", ["abc", "", "1e20", "-5", "007", "1.5"])
def test_a_row_with_a_hand_damaged_enqueued_at_can_still_be_finished(
    q: leaseq.Queue, r: Any, damaged: str
) -> None:
    # A row under a made id is named by its enqueued_at; an operator's edit
    # that leaves it unreadable must not make every lease of the row lost (the
    # handler would run to max_attempts, and never finish). Claim and the lease
    # check read such a row's number the same way: 0, fenced by attempts alone.
    made = q.enqueue("x")
    r.hset(q.keys.job(made), "enqueued_at", damaged)
    if damaged == "-5":  # the one that still reads as a time: shown as it leases
        assert q.get(made).incarnation == 0  # type: ignore[union-attr]
    lease = claim_one(q)
    assert (lease.id, lease.incarnation) == (made, 0)
    assert q.once(lease, "m") is True
    lease = q.extend(lease, ttl=30.0)
    q.complete(lease, "done")
    assert row(q, made)["state"] == "succeeded"
    with pytest.raises(leaseq.AlreadyFinished):
        q.complete(lease)


def test_a_lease_of_an_old_row_is_refused_by_a_numbered_row(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    forged = leaseq.Lease(
        id=lease.id,
        queue=lease.queue,
        attempt=lease.attempt,
        max_attempts=lease.max_attempts,
        payload=None,
        deadline=lease.deadline,
        enqueued_at=lease.enqueued_at,
        worker="w",
    )
    assert forged.incarnation == 0 != lease.incarnation
    with pytest.raises(leaseq.LeaseLost):
        q.complete(forged)
    q.complete(lease)


def test_a_lease_of_another_queue_is_refused_and_writes_nothing(r: Any, clock: Clock) -> None:
    # Tokens and incarnations are numbered per queue: two queues that enqueue one
    # id in the same millisecond (the frozen clock always does) give their rows
    # the same incarnation, so only the lease's queue tells them apart.
    mine, other = leaseq.Queue("mine", redis=r), leaseq.Queue("other", redis=r)
    mine.enqueue("x", id="job")
    other.enqueue("y", id="job")
    lease, held = claim_one(mine), claim_one(other)
    before = snapshot(r)
    for call in (
        lambda: other.complete(lease),
        lambda: other.complete_many([held, lease]),
        lambda: other.extend(lease),
        lambda: other.extend_many([held, lease]),
        lambda: other.fail(lease, "boom"),
        lambda: other.release(lease),
        lambda: other.once(lease, "charge"),
        lambda: other.progress(lease, 50),
    ):
        with pytest.raises(leaseq.InvalidArgument, match="a lease of queue 'mine'"):
            call()
    assert snapshot(r) == before
    other.complete(held)
    mine.complete(lease)


def test_a_lease_from_before_a_drop_cannot_act_on_the_queue_made_again(r: Any) -> None:
    # drop (forced, a lease in flight) deletes the meta hash and its row counter;
    # the counter starts again above every number handed out before.
    q = leaseq.Queue("dropped", redis=r)
    q.enqueue("first", id="job")
    stale = claim_one(q)
    assert q.drop(force=True) >= 1 and r.exists(q.keys.meta) == 0
    q.enqueue("second", id="job")
    fresh = claim_one(q)
    assert fresh.attempt == stale.attempt == 1
    assert fresh.incarnation > stale.incarnation
    assert row(q, "job")["incarnation"] == str(fresh.incarnation)  # stored exactly, 16 digits
    with pytest.raises(leaseq.LeaseLost):
        q.complete(stale, "from the dropped queue")
    q.complete(fresh, "ok")
    job = q.get("job")
    assert job is not None and job.result == "ok"


def test_row_numbers_stay_exact_and_unique_over_many_calls(r: Any) -> None:
    q = leaseq.Queue("numbers", redis=r, keep_succeeded=0)
    seen: set[int] = set()
    for round_ in range(3):
        ids = q.enqueue_many(list(range(1500)), ids=[f"n{i}" for i in range(1500)])
        leases = []
        while len(leases) < len(ids):
            leases += q.claim_many(1000, ttl=30.0)
        numbers = {lease.incarnation for lease in leases}
        assert len(numbers) == 1500 and not numbers & seen, round_
        seen |= numbers
        assert q.complete_many(leases) == []  # every lease still matches its row
