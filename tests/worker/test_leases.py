"""How a worker holds its leases, on every driver (tests/support/drivers.py):
handlers in flight, prefetch, heartbeats and the lease found lost, reaping a
crashed worker's job, and the calls it batches (claims, extends, completions).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import leaseq
from leaseq.observe.worker_metrics import WorkerMetrics
from tests.support import handlers
from tests.support.drivers import Calls, Driver
from tests.support.servers import wait_until


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


def _lost(metrics: WorkerMetrics) -> list[float]:
    """The ``leaseq_leases_lost_total`` samples a worker recorded."""
    return [s.value for f in metrics.collect() for s in f.samples if "lost" in s.name]


# -- handlers in flight, prefetch, heartbeats ---------------------------------------------


def test_many_jobs_many_threads_each_done_once(driver: Driver) -> None:
    q = driver.q
    calls: list[str] = []
    lock = threading.Lock()

    def handler(lease: leaseq.Lease) -> None:
        with lock:
            calls.append(lease.id)

    ids = q.enqueue_many([{} for _ in range(300)])
    w = driver.worker(handler, concurrency=8)
    w.run(burst=True)
    assert sorted(calls) == sorted(ids)
    assert q.stats().succeeded == 300


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_concurrency_is_the_handlers_in_flight(live_driver: Driver, kind: str) -> None:
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    lock = threading.Lock()
    running = peak = 0

    def enter() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)

    def leave() -> None:
        nonlocal running
        with lock:
            running -= 1

    async def async_handler(lease: leaseq.Lease) -> None:
        enter()
        await asyncio.sleep(0.02)
        leave()

    def plain_handler(lease: leaseq.Lease) -> None:
        enter()
        time.sleep(0.02)
        leave()

    q.enqueue_many([{"i": i} for i in range(24)])
    handler = async_handler if kind == "async" else plain_handler
    w = live_driver.worker(handler, queue=q, concurrency=4, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 24
    assert peak == 4


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_heartbeats_keep_a_long_job(live_driver: Driver, kind: str) -> None:
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)

    async def async_handler(lease: leaseq.Lease) -> str:
        await asyncio.sleep(0.6)  # six lease lengths: only heartbeats keep it
        return "done"

    q.enqueue({"s": 0.6}, id="long")  # six lease lengths: only heartbeats keep it
    handler = async_handler if kind == "async" else handlers.sleep
    live_driver.worker(handler, queue=q, concurrency=1, ttl=0.1).run(burst=True)
    job = _job(q, "long")
    assert job.state is leaseq.State.SUCCEEDED and job.attempts == 1


def test_prefetched_leases_are_heartbeated_while_they_wait(live_driver: Driver) -> None:
    # One slot, three prefetched: the last waits three job lengths, well past
    # its lease's ttl. Only the heartbeat keeps it (the worker reaps every ttl).
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    ids = q.enqueue_many([{"s": 0.3} for _ in range(4)])
    w = live_driver.worker(handlers.sleep, queue=q, concurrency=1, prefetch=3, ttl=0.3)
    w.run(burst=True)
    assert w.processed == 4
    jobs = [_job(q, job_id) for job_id in ids]
    assert all(j.state is leaseq.State.SUCCEEDED and j.attempts == 1 for j in jobs), jobs


def test_a_second_run_sizes_its_prefetch_from_its_own_rate(live_driver: Driver) -> None:
    # A worker run again (a periodic burst, say) after draining 2,000 quick jobs
    # now meets slow ones: it must hold about 50 ms of their work, not size its
    # prefetch from the first run's count of jobs and take every lease there is.
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    held: list[int] = []

    def handler(lease: leaseq.Lease) -> None:
        if lease.payload["slow"]:
            held.append(q.stats().active)
            time.sleep(0.2)

    q.enqueue_many([{"slow": False}] * 2000)
    w = live_driver.worker(handler, queue=q, concurrency=2, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 2000
    q.enqueue_many([{"slow": True}] * 12)
    w.run(burst=True)
    assert w.processed == 2012  # processed counts across runs
    # Two running and two prefetched (at least concurrency): never all twelve.
    assert max(held) <= 4, held


def test_the_registry_counts_prefetched_leases_as_held(live_driver: Driver) -> None:
    # `leaseq workers` shows the leases a worker holds, running or prefetched:
    # one running and three prefetched are four.
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    gate = threading.Event()
    q.enqueue_many([{"i": i} for i in range(4)])
    w = live_driver.worker(lambda lease: gate.wait(10), queue=q, concurrency=1, prefetch=3, ttl=0.6)
    w.start()
    give_up = time.monotonic() + 10.0
    held: list[int] = []
    while held != [4] and time.monotonic() < give_up:
        time.sleep(0.02)
        held = [row.running for row in q.workers()]
    gate.set()
    w.stop()
    w.join(10.0)
    assert held == [4]


def test_the_worker_reaps_a_crashed_workers_job(live_driver: Driver) -> None:
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    q.enqueue({"n": 1}, id="orphan")
    crashed = q.claim(ttl=0.05)  # a worker that died holding it
    assert crashed is not None
    w = live_driver.worker(lambda lease: lease.attempt, queue=q, concurrency=1, ttl=5.0)
    w.start()
    wait_until(lambda: q.stats().succeeded == 1, 10, what="the orphan to run again")
    w.stop()
    w.join(10.0)
    job = _job(q, "orphan")
    assert job.result == 2
    assert job.last_error is not None and "lease expired" in job.last_error


def test_completions_go_out_in_few_calls_each_job_hearing_its_own(live_driver: Driver) -> None:
    # 300 jobs, 30 at a time: completions that land while one write is in flight
    # go out together in the next. One job's lease is taken from it while its
    # handler runs: only that job hears LeaseLost (its outcome is dropped and it
    # runs again); the others in its batch complete.
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    calls = Calls("complete", "complete_many")
    taken = False

    def handler(lease: leaseq.Lease) -> int:
        nonlocal taken
        if lease.id == "victim" and not taken:
            taken = True
            q.release(lease)  # as a reaper would: the row is pending again
        time.sleep(0.001)
        return int(lease.payload["i"])

    q.enqueue_many([{"i": i} for i in range(299)])
    q.enqueue({"i": 299}, id="victim")
    w = live_driver.worker(handler, queue=q, wrap=calls, concurrency=30, ttl=5.0)
    w.run(burst=True)
    stats = q.stats()
    assert (stats.succeeded, stats.pending, stats.active, stats.dead) == (300, 0, 0, 0)
    assert w.processed == 300  # the victim's first, refused outcome is not counted
    victim = _job(q, "victim")
    assert victim.result == 299 and victim.attempts == 2  # ran twice
    assert calls.count < 100, f"{calls.count} complete calls for 300 jobs: not batched"


def test_one_heartbeat_call_extends_every_running_lease(live_driver: Driver) -> None:
    # 20 jobs at once, each running six lease lengths: the worker's heartbeat
    # extends them all in one call a beat, not one call per job.
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    calls = Calls("extend", "extend_many")
    together = threading.Barrier(20, timeout=5.0)

    def handler(lease: leaseq.Lease) -> str:
        together.wait()  # all 20 run at once
        time.sleep(1.2)  # six lease lengths: only heartbeats keep them
        return "done"

    ids = q.enqueue_many([{"i": i} for i in range(20)])
    w = live_driver.worker(handler, queue=q, wrap=calls, concurrency=20, ttl=0.2)
    w.run(burst=True)
    assert w.processed == 20
    jobs = [_job(q, job_id) for job_id in ids]
    assert all(j.state is leaseq.State.SUCCEEDED and j.attempts == 1 for j in jobs)
    # ~1.2 s at a beat every ttl/3 (0.067 s): ~18 beats; one call per job would be ~360.
    assert calls.count <= 60, f"{calls.count} extend calls for 20 jobs"


def test_prefetch_claims_ahead_in_few_calls(live_driver: Driver) -> None:
    # Two handler slots, 2,000 quick jobs: claiming only for the free slots
    # takes a call for every job or two; prefetched leases wait their turn
    # instead, about 50 ms of work of them once the worker has seen the rate.
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    claims = Calls("claim_now")
    q.enqueue_many([{"i": i} for i in range(2000)])
    w = live_driver.worker(
        lambda lease: int(lease.payload["i"]), queue=q, wrap=claims, concurrency=2, ttl=5.0
    )
    w.run(burst=True)
    assert w.processed == 2000
    stats = q.stats()
    assert (stats.succeeded, stats.pending, stats.active) == (2000, 0, 0)
    assert claims.count < 400, f"{claims.count} claims for 2,000 jobs at concurrency 2"


def test_a_fast_drain_claims_and_completes_in_batches(live_driver: Driver) -> None:
    """10,000 jobs of one Redis call each (the peer benches' shape) on a real
    server: the claimer refills once half the prefetch is spent and outcomes
    gather, so a claim and a complete_many each carry many jobs (claiming at
    every freed lease and writing at every wake-up cost about 1,500 claims and
    2,000 completes here)."""
    q = live_driver.queue("batches")
    rr = live_driver.redis
    claims, completes = Calls("claim_now"), Calls("complete_many")
    q.enqueue_many([{} for _ in range(10_000)])
    w = live_driver.worker(
        lambda lease: rr.incr("batches:done"), queue=q, wrap=lambda x: completes(claims(x))
    )
    w.run(burst=True)
    assert w.processed == 10_000 and int(rr.get("batches:done")) == 10_000
    assert w.counts["succeeded"] == 10_000
    assert claims.count <= 500, (claims.count, completes.count)
    assert completes.count <= 1000, (claims.count, completes.count)


def test_a_heartbeat_that_finds_the_lease_lost_tells_the_handler(driver: Driver) -> None:
    q = driver.queue("hb", backoff=0.0)
    outcome: list[bool] = []

    def handler(lease: leaseq.Lease) -> str:
        outcome.append(leaseq.current_job().lost.wait(10))
        return "stale"

    job_id = q.enqueue({})
    metrics = WorkerMetrics()
    w = driver.worker(handler, queue=q, ttl=0.3, concurrency=1, prefetch=0, metrics=metrics)
    w.start()
    wait_until(lambda: _job(q, job_id).state is leaseq.State.ACTIVE, what="the claim")
    # Another holder now owns the job: the worker's token no longer matches.
    driver.redis.hset(q.keys.job(job_id), mapping={"attempts": 9, "max_attempts": 10})
    wait_until(lambda: outcome, what="the handler to hear of the loss")
    assert outcome == [True]
    wait_until(lambda: _lost(metrics) == [1], what="the discard")
    assert w.counts["lost"] == 1
    w.stop()
    w.join(10.0)
    job = _job(q, job_id)
    assert job.state is leaseq.State.ACTIVE and job.attempts == 9 and job.result is None


def test_a_lost_plain_handler_keeps_its_slot_until_its_thread_returns(live_driver: Driver) -> None:
    # A plain handler's thread cannot be stopped: when its lease is lost, the
    # thread keeps its slot. The next job must not start before it returns, or
    # it would sit waiting for a thread, its timeout running, and fail for a
    # timeout it never ran into.
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)

    def handler(lease: leaseq.Lease) -> str:
        if lease.payload["stuck"]:
            time.sleep(1.0)  # ignores current_job().lost
        return "ok"

    q.enqueue({"stuck": True}, id="stuck")
    q.enqueue({"stuck": False}, id="quick", timeout=0.3)
    w = live_driver.worker(handler, queue=q, concurrency=1, prefetch=0, ttl=0.3)
    w.start(burst=True)
    wait_until(lambda: q.stats().active, what="the stuck job to start")
    live_driver.redis.hset(q.keys.job("stuck"), "attempts", 7)  # taken over
    w.join(10.0)
    assert w.processed == 1
    quick = _job(q, "quick")
    assert quick.state is leaseq.State.SUCCEEDED
    assert (quick.attempts, quick.last_error) == (1, None)
