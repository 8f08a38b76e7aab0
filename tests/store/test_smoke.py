from __future__ import annotations

import leaseq
from tests.support.backends import Clock


def test_enqueue_claim_complete(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"to": "a@b.c"})
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == job_id and lease.attempt == 1
    q.complete(lease, result="sent")
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.result == "sent"


def test_expired_lease_is_reaped(q: leaseq.Queue, clock: Clock) -> None:
    q.enqueue({"n": 1})
    lease = q.claim(ttl=clock.lease(30.0))
    assert lease is not None
    clock.past(lease.deadline)
    assert q.reap() == (1, 0)
    again = q.claim(ttl=30.0)
    assert again is not None and again.attempt == 2
    try:
        q.complete(lease)
    except leaseq.LeaseLost as exc:
        assert exc.token == 1
    else:
        raise AssertionError("stale lease completed")
