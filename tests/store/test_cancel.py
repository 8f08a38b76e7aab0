"""Cancelling a running job (cancel.lua on an active row): the job is cancelled
at once and fencing does the rest -- the running attempt's complete, fail and
extend raise LeaseLost and change nothing. Its concurrency slots are freed, its
waiters return at once. On fakeredis and a real server, sync and (through
tests/transport/test_aio.py) async. The worker's side is tests/worker/test_cancel.py.
"""

from __future__ import annotations

import pytest

import leaseq
from tests.support.store import claim_one, index, row


def test_cancelling_an_active_job_loses_its_lease(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"n": 1})
    lease = claim_one(q)
    assert q.cancel(job_id) is True
    assert q.cancel(job_id) is False  # a replay, or a second operator
    stored = row(q, job_id)
    assert stored["state"] == "cancelled" and "lease_until" not in stored
    assert stored["last_error"] == "cancelled while running (attempt 1)"
    assert index(q, "active") == {} and job_id in index(q, "cancelled")
    for act in (
        lambda: q.extend(lease, ttl=5.0),
        lambda: q.complete(lease, result="late"),
        lambda: q.fail(lease, "late"),
    ):
        with pytest.raises(leaseq.LeaseLost) as lost:
            act()
        assert lost.value.state == "cancelled"
    assert row(q, job_id) == stored  # nothing changed
    job = q.wait(job_id, timeout=0.0)
    assert job is not None and job.state is leaseq.State.CANCELLED
    s = q.stats()
    assert (s.active, s.cancelled) == (0, 1)


def test_a_cancelled_running_job_frees_its_limit_slots(q: leaseq.Queue) -> None:
    q.set_limits(concurrency=1, group_concurrency=1)
    first = q.enqueue({"n": 1}, group="tenant")
    q.enqueue({"n": 2}, group="tenant")
    assert claim_one(q).id == first
    assert q.claim() is None  # concurrency 1: held
    q.set_limits(concurrency=None)
    assert q.claim() is None  # group_concurrency 1: the group is held
    q.cancel(first)
    assert claim_one(q).payload == {"n": 2}  # the group's slot is free again


def test_a_cancelled_running_job_frees_its_concurrency_slot(q: leaseq.Queue) -> None:
    q.set_limits(concurrency=1)
    first, second = q.enqueue_many([{"n": 1}, {"n": 2}])
    assert claim_one(q).id == first
    assert q.claim() is None
    q.cancel(first)
    assert claim_one(q).id == second


def test_a_finished_job_cannot_be_cancelled(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"n": 1})
    q.fail(claim_one(q), "bad", dead=True)
    with pytest.raises(leaseq.JobStateError) as info:
        q.cancel(job_id)
    assert info.value.state == "dead"
    assert row(q, job_id)["state"] == "dead"
