"""Issue 12 on the queue: kinds in rows and leases, wait / wait_many, progress.

Every case that takes ``q`` runs again on ``leaseq.aio.Queue`` (tests/test_aio.py).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

import leaseq
from tests.support.servers import RedisServer


def test_kind_is_stored_and_handed_out(q: leaseq.Queue) -> None:
    q.enqueue({"to": "a@b.c"}, id="mail", kind="send_email")
    q.enqueue_many([{"w": 1}, {"w": 2}], ids=["r1", "r2"], kind="resize")
    q.enqueue({}, id="plain")
    kinds = {lease.id: lease.kind for lease in q.claim_many(10)}
    assert kinds == {"mail": "send_email", "r1": "resize", "r2": "resize", "plain": None}
    job = q.get("mail")
    assert job is not None and job.kind == "send_email"
    plain = q.get("plain")
    assert plain is not None and plain.kind is None


def test_a_bad_kind_is_refused_and_writes_nothing(q: leaseq.Queue) -> None:
    for bad in ("", "has space", "{x}", "x" * 300):
        with pytest.raises(leaseq.InvalidName):
            q.enqueue({}, id="a", kind=bad)
        with pytest.raises(leaseq.InvalidName):
            q.enqueue_many([{}], ids=["b"], kind=bad)
    assert q.get("a") is None and q.get("b") is None


# -- wait -------------------------------------------------------------------------


def test_wait_returns_at_once_for_a_job_finished_before(q: leaseq.Queue) -> None:
    q.enqueue({"n": 1}, id="j")
    lease = q.claim()
    assert lease is not None
    q.complete(lease, result={"ok": 1})
    started = time.monotonic()
    job = q.wait("j", timeout=5.0)
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.result == {"ok": 1}
    assert time.monotonic() - started < 1.0


def test_wait_of_an_unknown_or_expired_job_raises(q: leaseq.Queue) -> None:
    with pytest.raises(leaseq.JobNotFound):
        q.wait("never", timeout=0.1)
    with pytest.raises(leaseq.InvalidName):
        q.wait("bad id", timeout=0.1)
    with pytest.raises(leaseq.InvalidArgument):
        q.wait_many(["never"], timeout=-1.0)


def test_wait_sees_a_reap_to_dead(q: leaseq.Queue, clock: Any) -> None:
    q.enqueue({}, id="crash", max_attempts=1)
    assert q.claim(ttl=1.0) is not None
    clock.advance(2.0)
    assert q.reap() == (0, 1)
    job = q.wait("crash", timeout=1.0)
    assert job is not None and job.state is leaseq.State.DEAD


class _Counting(redis.Redis):
    """A client that counts round trips: commands, and pipelines as one."""

    trips = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.trips += 1
        return super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        execute = pipe.execute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.trips += 1
            return execute(*args, **kwargs)

        pipe.execute = counted  # type: ignore[method-assign]
        return pipe


def test_wait_many_on_10000_ids_takes_few_round_trips(redis_server: RedisServer) -> None:
    client = _Counting(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("batch", redis=client)
    ids = q.enqueue_many([{"i": i} for i in range(10_000)], ids=[f"j{i}" for i in range(10_000)])
    while leases := q.claim_many(1000):
        q.complete_many(leases, [lease.payload["i"] for lease in leases])
    before = client.trips
    jobs = q.wait_many(ids, timeout=5.0)
    assert client.trips - before <= 3  # XREVRANGE, one pipeline of rows
    assert [j.result if j else None for j in jobs] == list(range(10_000))
    client.close()


# -- progress ----------------------------------------------------------------------


def test_progress_is_stored_under_the_lease(q: leaseq.Queue, clock: Any) -> None:
    q.enqueue({}, id="p")
    lease = q.claim(ttl=1.0)
    assert lease is not None
    q.progress(lease, {"done": 3, "of": 10})
    q.progress(lease, {"done": 4, "of": 10})
    job = q.get("p")
    assert job is not None and job.progress == {"done": 4, "of": 10}
    clock.advance(2.0)
    q.reap()
    again = q.claim(ttl=5.0)
    assert again is not None and again.attempt == 2
    with pytest.raises(leaseq.LeaseLost):
        q.progress(lease, 99)  # the stale lease writes nothing
    job = q.get("p")
    assert job is not None and job.progress == {"done": 4, "of": 10}


def test_bad_progress_is_refused_and_writes_nothing(q: leaseq.Queue) -> None:
    q.enqueue({}, id="p")
    lease = q.claim()
    assert lease is not None
    for bad in (float("nan"), {1, 2}, object()):
        with pytest.raises(leaseq.InvalidPayload):
            q.progress(lease, bad)
    with pytest.raises(leaseq.PayloadTooLarge):
        q.progress(lease, "x" * 5000)
    job = q.get("p")
    assert job is not None and job.progress is None
