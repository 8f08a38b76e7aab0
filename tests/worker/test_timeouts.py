"""Handler timeouts: the ``timeout`` field, and both workers failing an
attempt whose handler ran past it (one case each, on every driver), on
fakeredis and a real server; an ``async def`` handler cancelled at its
timeout is the asyncio worker's alone.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

import leaseq
import leaseq.aio
from tests.support import handlers
from tests.support.backends import async_client
from tests.support.drivers import Driver
from tests.support.servers import wait_until

BAD = [float("nan"), float("inf"), -float("inf"), True, False, -1, 0, 0.0, 86_401, "5", [1]]


def _queue(r: Any, **kw: Any) -> leaseq.Queue:
    return leaseq.Queue("slow", redis=r, backoff=0.0, **kw)


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


# -- the field ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_bad_timeouts_are_refused_and_write_nothing(r: Any, bad: Any) -> None:
    q = _queue(r)
    with pytest.raises(leaseq.InvalidArgument, match="timeout"):
        q.enqueue({"a": 1}, timeout=bad)
    with pytest.raises(leaseq.InvalidArgument, match="timeout"):
        q.enqueue_many([{"a": 1}, {"a": 2}], timeout=bad)
    assert r.keys("*") == []
    with pytest.raises(leaseq.InvalidArgument, match="timeout"):
        leaseq.Worker(q, lambda lease: None, timeout=bad)
    with pytest.raises(leaseq.InvalidArgument, match="timeout"):
        leaseq.aio.Worker(leaseq.aio.Queue("slow", redis=async_client(r)), print, timeout=bad)


def test_async_queue_refuses_a_bad_timeout(r: Any) -> None:
    aq = leaseq.aio.Queue("slow", redis=async_client(r))

    async def main() -> None:
        with pytest.raises(leaseq.InvalidArgument, match="timeout"):
            await aq.enqueue(1, timeout=float("nan"))
        job_id = await aq.enqueue(1, timeout=2.5)
        job = await aq.get(job_id)
        assert job is not None and job.timeout == 2.5

    asyncio.run(main())


def test_timeout_is_stored_in_ms_and_handed_out_with_the_lease(r: Any) -> None:
    q = _queue(r)
    timed = q.enqueue({"a": 1}, timeout=1.5)
    plain = q.enqueue({"a": 2})
    many = q.enqueue_many([1, 2], timeout=0.0004)  # rounds up to 1 ms
    assert r.hget(q.keys.job(timed), "timeout") == b"1500"
    assert r.hget(q.keys.job(plain), "timeout") is None  # absent: no limit
    assert _job(q, timed).timeout == 1.5 and _job(q, plain).timeout is None
    assert _job(q, many[0]).timeout == 0.001
    got = {lease.id: lease.timeout for lease in q.claim_many(10)}
    assert got == {timed: 1.5, plain: None, many[0]: 0.001, many[1]: 0.001}


def test_a_hand_edited_timeout_reads_as_none_at_claim(r: Any) -> None:
    q = _queue(r)
    job_id = q.enqueue(1, timeout=3.0)
    r.hset(q.keys.job(job_id), "timeout", "soon")
    lease = q.claim()
    assert lease is not None and lease.id == job_id and lease.timeout is None


def test_sharded_enqueue_takes_a_timeout(r: Any) -> None:
    sq = leaseq.ShardedQueue("sh", shards=2, redis=r)
    ids = sq.enqueue_many(list(range(6)), timeout=4.0)
    assert {lease.timeout for lease in sq.claim_many(10)} == {4.0}
    assert len(ids) == 6


# -- both workers (every driver) -----------------------------------------------------------


def test_a_handler_past_its_timeout_is_failed_retried_then_dead(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    q = driver.queue("slow", backoff=0.0, max_attempts=2)
    job_id = q.enqueue({"n": 1}, timeout=0.2)
    release = threading.Event()
    returned: list[int] = []

    def handler(lease: leaseq.Lease) -> str:
        release.wait(30)
        returned.append(lease.attempt)
        return "late result"

    caplog.set_level(logging.INFO, logger="leaseq.worker")
    stuck: list[int] = []
    w = driver.worker(handler, queue=q, concurrency=2, ttl=30.0, on_stuck=stuck.append)
    started = time.monotonic()
    w.start()
    try:
        wait_until(lambda: _job(q, job_id).state is leaseq.State.DEAD, 10, what="the dead job")
        # Both attempts ran inside the 30 s lease: each was released at its timeout,
        # not heartbeated on until the lease ran out.
        assert time.monotonic() - started < 10
        job = _job(q, job_id)
        assert job.attempts == 2 and job.last_error == "timed out after 0.2 s"
        wait_until(lambda: stuck and stuck[-1] == 2, 5, what="two stuck threads reported")
        assert w.counts["failed"] == 1 and w.counts["dead"] == 1
        before = driver.redis.hgetall(q.keys.job(job_id))
        release.set()  # the stuck threads return their results now: discarded
        wait_until(lambda: stuck[-1] == 0, 5, what="the threads to return")
        wait_until(lambda: len(returned) == 2, 5, what="the threads to return")
        assert sorted(returned) == [1, 2]
        wait_until(lambda: "outcome discarded" in caplog.text, 5, what="the discard logged")
        assert driver.redis.hgetall(q.keys.job(job_id)) == before
        assert _job(q, job_id).result is None
    finally:
        release.set()
        w.stop(now=True)
        w.join(10)


def test_worker_default_timeout_yields_to_the_jobs_own(driver: Driver) -> None:
    q = driver.queue("slow", backoff=0.0, max_attempts=1)
    default = q.enqueue({"s": 0.6})
    own_long = q.enqueue({"s": 0.6}, timeout=10.0)
    own_short = q.enqueue({"s": 0.6}, timeout=0.1)
    driver.worker(handlers.sleep, queue=q, timeout=0.2).run(burst=True)
    wait_until(lambda: _job(q, own_long).state is leaseq.State.SUCCEEDED, 10, what="own_long")
    assert _job(q, default).last_error == "timed out after 0.2 s"
    assert _job(q, default).state is leaseq.State.DEAD
    assert _job(q, own_short).last_error == "timed out after 0.1 s"


def test_a_stuck_thread_keeps_its_slot_until_it_returns(driver: Driver) -> None:
    q = driver.queue("slow", backoff=0.0, max_attempts=1)
    first = q.enqueue("stuck", timeout=0.1)
    q.enqueue("next")
    release = threading.Event()
    events: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        events.append(f"start {lease.payload}")
        if lease.payload == "stuck":
            release.wait(30)
            events.append("stuck returned")

    stuck: list[int] = []
    w = driver.worker(handler, queue=q, concurrency=1, on_stuck=stuck.append)
    w.start()
    try:
        wait_until(lambda: stuck == [1], 10, what="the stuck thread reported")
        wait_until(lambda: _job(q, first).state is leaseq.State.DEAD, 10, what="the timeout")
        assert events == ["start stuck"]  # the one slot is still taken
        release.set()
        wait_until(lambda: "start next" in events, 10, what="the next job to start")
        assert events == ["start stuck", "stuck returned", "start next"]
    finally:
        release.set()
        w.stop(now=True)
        w.join(10)


def test_a_handler_that_finishes_in_time_completes(driver: Driver) -> None:
    q = driver.queue("slow", backoff=0.0)
    job_id = q.enqueue(1, timeout=5.0)
    driver.worker(lambda lease: "done", queue=q, timeout=0.5).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.SUCCEEDED and job.result == "done" and job.attempts == 1


def test_a_plain_handler_past_its_timeout_is_discarded_and_run_waits_for_it(
    driver: Driver,
) -> None:
    q = driver.queue("slow", backoff=0.0, max_attempts=1)
    returned: list[str] = []

    def handler(lease: leaseq.Lease) -> str:
        time.sleep(0.5)
        returned.append(lease.id)
        return "late"

    job_id = q.enqueue(1, timeout=0.1)
    driver.worker(handler, queue=q, ttl=30.0).run(burst=True)
    job = _job(q, job_id)
    # The job is dead with the timeout, no result stored; run() returned after the
    # thread did (its slot stayed busy).
    assert job.state is leaseq.State.DEAD and job.result is None
    assert job.last_error == "timed out after 0.1 s"
    assert returned == [job.id]


# -- the asyncio worker -----------------------------------------------------------------


def test_async_handler_past_its_timeout_is_cancelled_and_failed(r: Any) -> None:
    aq = leaseq.aio.Queue("slow", redis=async_client(r), backoff=0.0, max_attempts=2)
    cancelled: list[int] = []

    async def handler(lease: leaseq.Lease) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(lease.attempt)
            raise
        return "never"

    async def main() -> tuple[leaseq.Job | None, leaseq.Job | None, float]:
        slow = await aq.enqueue("slow")
        fast = await aq.enqueue("fast", timeout=5.0)

        async def pick(lease: leaseq.Lease) -> str:
            if lease.payload == "fast":
                await asyncio.sleep(0.3)  # past the worker's default, within its own
                return "fast"
            return await handler(lease)

        began = time.monotonic()
        await leaseq.aio.Worker(aq, pick, ttl=30.0, timeout=0.1).run(burst=True)
        return await aq.get(slow), await aq.get(fast), time.monotonic() - began

    slow, fast, took = asyncio.run(main())
    assert slow is not None and slow.state is leaseq.State.DEAD and slow.attempts == 2
    assert slow.last_error == "timed out after 0.1 s"
    assert cancelled == [1, 2]
    assert fast is not None and fast.state is leaseq.State.SUCCEEDED and fast.result == "fast"
    assert took < 10  # released at the timeout, not at the 30 s lease's end
