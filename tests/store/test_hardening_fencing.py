"""Issue 9, defect 2: a lease acts only on the row incarnation it was handed.

A row that is gone (kept 0 s, expired, purged) frees its id; enqueued again,
the new row starts at attempts 0, so its first lease carries token 1 again.
A stalled lease of the old row, also token 1, must not touch the new row.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock
from tests.support.store import claim_one, row, snapshot


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


def test_every_row_gets_a_new_incarnation(q: leaseq.Queue) -> None:
    ids = q.enqueue_many(["a", "b", "c"])
    q.enqueue("d", id="d")
    q.enqueue("d-again", id="d")  # deduplicated: no new row, no new number
    seen = [q.get(i).incarnation for i in [*ids, "d"]]  # type: ignore[union-attr]
    # A queue's first row numbers start at its server time in ms times 1000
    # (see reserve_incarnations.lua), then count up, one per row.
    first = seen[0]
    assert seen == [first, first + 1, first + 2, first + 3]
    assert abs(first // 1000 - q.stats().server_time * 1000) < 60_000
    leases = q.claim_many(4)
    assert sorted(lease.incarnation for lease in leases) == seen
    assert "incarnation" not in q.stats().totals


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
    assert (lease.id, lease.incarnation) == ("old", 0)
    assert q.once(lease, "m") is True
    lease = q.extend(lease, ttl=30.0)
    q.complete(lease, "done")
    assert row(q, "old")["state"] == "succeeded"
    assert q.get("old").incarnation == 0  # type: ignore[union-attr]
    # A replay is told it won, as before.
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
