"""Edit, then retry: ``Queue.update(id, payload=)`` for a job that has not
started (update.lua) and ``retry_dead(id, payload=)`` for a dead one (retry.lua).
The payload is checked as enqueue checks it; a job in the wrong state is
refused with a JobStateError naming the state; nothing is written on bad input;
the old payload goes into the event stream entry of the change. On fakeredis
and a real server, sync and (through tests/transport/test_aio.py) async.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from tests.support.store import claim_one, row, snapshot


def _edits(q: leaseq.Queue) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in q.redis.xrange(q.keys.events) if b"updated" in fields]


def test_update_a_pending_or_scheduled_job_keeps_the_old_payload_in_the_stream(
    q: leaseq.Queue,
) -> None:
    now = q.enqueue({"to": "typo@exmaple.org"})
    later = q.enqueue({"v": 1}, delay=60.0)
    q.update(now, payload={"to": "ok@example.org"})
    q.update(later, payload={"v": 2})
    job = q.get(now)
    assert job is not None and job.payload == {"to": "ok@example.org"}
    assert job.state is leaseq.State.PENDING and job.attempts == 0
    assert row(q, later)["state"] == "scheduled"
    edits = _edits(q)
    assert [e[b"updated"] for e in edits] == [f"{now}:0".encode(), f"{later}:0".encode()]
    assert edits[0][b"old_payload"] == b'{"to":"typo@exmaple.org"}'
    assert edits[0][b"state"] == b"pending"
    assert claim_one(q).payload == {"to": "ok@example.org"}


def test_update_is_refused_once_the_job_started_or_finished(q: leaseq.Queue) -> None:
    running = q.enqueue({"n": 1})
    lease = claim_one(q)
    done = q.enqueue({"n": 2})
    q.complete(claim_one(q))
    before = snapshot(q.redis)
    for job_id, state in ((running, "active"), (done, "succeeded")):
        with pytest.raises(leaseq.JobStateError) as info:
            q.update(job_id, payload={"n": 9})
        assert info.value.state == state
    with pytest.raises(leaseq.JobNotFound):
        q.update("nobody", payload={})
    assert snapshot(q.redis) == before
    q.fail(lease, "bad", dead=True)
    with pytest.raises(leaseq.JobStateError, match="retry_dead"):
        q.update(running, payload={"n": 9})  # dead: that is retry_dead's


@pytest.mark.parametrize(
    "bad, error",
    [(object(), leaseq.InvalidPayload), ("x" * 2_000_000, leaseq.PayloadTooLarge)],
)
def test_a_bad_payload_writes_nothing(q: leaseq.Queue, bad: Any, error: type) -> None:
    waiting = q.enqueue({"n": 1})
    dead = q.enqueue({"n": 2}, max_attempts=1)
    q.claim()
    lease = claim_one(q)
    q.fail(lease, "bad", dead=True)
    before = snapshot(q.redis)
    with pytest.raises(error):
        q.update(waiting, payload=bad)
    with pytest.raises(error):
        q.retry_dead(dead, payload=bad)
    assert snapshot(q.redis) == before


def test_retry_dead_with_a_new_payload(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"amount": "12,50"}, max_attempts=1)
    q.fail(claim_one(q), "ValueError: could not convert '12,50'")
    assert q.retry_dead(job_id, payload={"amount": "12.50"}) == 1 + q._core.max_attempts
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.PENDING
    assert job.payload == {"amount": "12.50"} and job.attempts == 1
    (edit,) = _edits(q)
    assert edit[b"updated"] == f"{job_id}:1".encode() and edit[b"state"] == b"dead"
    assert edit[b"old_payload"] == b'{"amount":"12,50"}'
    assert claim_one(q).payload == {"amount": "12.50"}


def test_retry_dead_with_a_payload_refuses_a_job_that_is_not_dead(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"n": 1})
    before = snapshot(q.redis)
    with pytest.raises(leaseq.JobStateError) as info:
        q.retry_dead(job_id, payload={"n": 2})
    assert info.value.state == "pending"
    assert snapshot(q.redis) == before
