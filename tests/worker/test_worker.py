"""The worker's core loop, on every driver (``driver``: the threaded
``leaseq.Worker`` and ``leaseq.aio.Worker``, tests/support/drivers.py):
outcomes, burst mode, the job context, concurrency and prefetch, heartbeats,
stop and grace, logging, settings.

Each case is written once and runs on both workers; what only one of them
does is tests/worker/test_thread_worker.py or tests/worker/test_aio_worker.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

import leaseq
from leaseq.observe.worker_metrics import WorkerMetrics
from tests.support import handlers
from tests.support.drivers import Calls, Driver, differs
from tests.support.servers import wait_until


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


def _lost(metrics: WorkerMetrics) -> list[float]:
    """The ``leaseq_leases_lost_total`` samples a worker recorded."""
    return [s.value for f in metrics.collect() for s in f.samples if "lost" in s.name]


# -- outcomes ---------------------------------------------------------------------------


def test_return_value_completes_with_result(driver: Driver) -> None:
    q = driver.q
    ids = q.enqueue_many([{"i": i} for i in range(25)])
    w = driver.worker(handlers.echo, concurrency=3)
    w.run(burst=True)
    assert w.processed == 25
    if w.counts is not None:
        assert w.counts["succeeded"] == 25
    for i, job_id in enumerate(ids):
        job = _job(q, job_id)
        assert job.state is leaseq.State.SUCCEEDED and job.result == {"i": i}


def test_exception_fails_with_type_message_and_traceback(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handlers.boom).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD
    assert job.last_error is not None
    assert job.last_error == f"ValueError: boom on {job_id}"
    assert job.traceback is not None and "handlers.py" in job.traceback
    assert "in boom" in job.traceback


def test_exception_with_attempts_left_schedules_a_retry(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=3)
    w = driver.worker(handlers.boom)
    w.run(burst=True)  # the retry is due later: burst does not wait for it
    job = _job(q, job_id)
    assert job.state is leaseq.State.SCHEDULED and job.attempts == 1
    assert w.processed == 1
    if w.counts is not None:
        assert w.counts["failed"] == 1


def test_retry_exception_sets_the_delay(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({"in": 120.0})
    driver.worker(handlers.retry_later).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.SCHEDULED
    assert job.run_at is not None and job.claimed_at is not None
    assert job.run_at - job.claimed_at == pytest.approx(120.0, abs=1.0)
    assert job.last_error == "Retry: not yet"


def test_retry_in_zero_runs_again_within_the_same_burst(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({"in": 0.0}, max_attempts=3)
    driver.worker(handlers.retry_later).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 3


def test_dead_exception_dead_letters_at_once(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=5)
    w = driver.worker(handlers.give_up)
    w.run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 1
    assert job.last_error == "Dead: bad input"
    assert w.processed == 1
    if w.counts is not None:
        assert w.counts["dead"] == 1


def test_every_outcome_in_one_burst(live_driver: Driver) -> None:
    """Completions, a failure retried then dead, a Retry that runs again, a Dead:
    one burst writes each as the one outcome policy says, and counts them all."""
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)

    def handler(lease: leaseq.Lease) -> Any:
        kind = lease.payload["kind"]
        if kind == "boom":
            raise ValueError("boom")
        if kind == "retry":
            if lease.attempt == 1:
                raise leaseq.Retry(0.0, "later")
            return "second time"
        if kind == "dead":
            raise leaseq.Dead("poison")
        time.sleep(0.01)
        return {"ok": lease.payload["i"]}

    q.enqueue_many([{"kind": "ok", "i": i} for i in range(20)])
    for kind in ("boom", "retry", "dead"):
        q.enqueue({"kind": kind}, id=kind)
    w = live_driver.worker(handler, queue=q, concurrency=5, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 20 + 2 + 2 + 1
    stats = q.stats()
    assert (stats.succeeded, stats.dead, stats.pending, stats.active) == (21, 2, 0, 0)
    boom = _job(q, "boom")
    assert boom.state is leaseq.State.DEAD and boom.attempts == 2
    assert boom.last_error is not None and "ValueError: boom" in boom.last_error
    retried = _job(q, "retry")
    assert retried.result == "second time" and retried.attempts == 2
    dead = _job(q, "dead")
    # The one outcome policy (leaseq.work.outcomes.decide): the exception's kind, then its reason.
    assert dead.attempts == 1 and dead.last_error == "Dead: poison"


def test_unencodable_result_dead_letters_only_that_job_at_once(driver: Driver) -> None:
    # The handler ran to the end: running it again would repeat its side effects
    # for a result that still cannot be stored, so no retry.
    q = driver.q
    bad = q.enqueue({}, max_attempts=5)
    calls: list[str] = []

    def handler(lease: leaseq.Lease) -> Any:
        calls.append(lease.id)
        return object() if lease.id == bad else "fine"

    good = q.enqueue_many([{}, {}, {}])
    driver.worker(handler, concurrency=4).run(burst=True)
    job = _job(q, bad)
    assert job.state is leaseq.State.DEAD and job.attempts == 1 and calls.count(bad) == 1
    assert job.last_error is not None
    assert job.last_error.startswith("InvalidResult: the handler's result (of type object)")
    assert "not run again" in job.last_error
    assert [_job(q, i).result for i in good] == ["fine"] * 3


def test_oversized_result_is_dead_lettered_naming_size_and_limit(driver: Driver) -> None:
    q = driver.queue("big", max_payload_bytes=1000)
    job_id = q.enqueue({}, max_attempts=5)
    driver.worker(lambda lease: "x" * 5000, queue=q).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 1 and job.result is None
    assert job.last_error is not None
    assert job.last_error.startswith(
        "ResultTooLarge: the handler returned a result of 5002 bytes encoded, over the "
        "queue's max_payload_bytes of 1000"
    )
    assert "x" * 50 not in job.last_error  # the reason, not a dump of the result


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_a_handler_that_exits_fails_its_job_not_the_worker(live_driver: Driver, kind: str) -> None:
    # A SystemExit let out of the worker would end it and release the job,
    # refunding its attempt, on every start without bound: it is the job's
    # failure, and the worker goes on.
    q = live_driver.queue("jobs", backoff=leaseq.Backoff(base=0.0, cap=0.0, jitter=0.0))
    exits = q.enqueue({"exit": True}, max_attempts=2)
    fine = q.enqueue({"exit": False})

    async def async_handler(lease: leaseq.Lease) -> str:
        if lease.payload["exit"]:
            raise SystemExit(3)
        return "ok"

    def plain_handler(lease: leaseq.Lease) -> str:
        if lease.payload["exit"]:
            raise SystemExit(3)
        return "ok"

    handler = async_handler if kind == "async" else plain_handler
    w = live_driver.worker(handler, queue=q, concurrency=1, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 3  # two attempts and the fine job: nothing escapes
    job = _job(q, exits)
    assert job.state is leaseq.State.DEAD and job.attempts == 2
    assert (job.last_error or "").startswith("SystemExit: 3")
    assert _job(q, fine).state is leaseq.State.SUCCEEDED


def test_a_plain_handlers_keyboard_interrupt_fails_its_job_not_the_worker(
    live_driver: Driver,
) -> None:
    # No signal reaches a handler's thread: a KeyboardInterrupt there is the
    # handler's own, not a Ctrl-C. Let out, it would end the worker and release
    # the job, refunding its attempt, on every start without bound.
    q = live_driver.queue("jobs")
    job_id = q.enqueue({}, max_attempts=1)

    def plain(lease: leaseq.Lease) -> None:
        raise KeyboardInterrupt

    w = live_driver.worker(plain, queue=q, concurrency=1, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 1
    job = _job(q, job_id)
    assert (job.state, job.attempts) == (leaseq.State.DEAD, 1)
    assert (job.last_error or "").startswith("KeyboardInterrupt")


# -- the job context ----------------------------------------------------------------------


def test_current_job_is_the_running_lease(driver: Driver) -> None:
    q = driver.q
    seen: list[tuple[str, int, bool]] = []

    def handler(lease: leaseq.Lease) -> None:
        ctx = leaseq.current_job()
        seen.append((ctx.lease.id, ctx.lease.attempt, ctx.lost.is_set()))
        ctx.raise_if_lost()

    job_id = q.enqueue({})
    driver.worker(handler).run(burst=True)
    assert seen == [(job_id, 1, False)]
    with pytest.raises(LookupError):
        leaseq.current_job()


def test_a_job_contexts_flags_work_as_events() -> None:
    """``lost`` and ``cancelled`` are cheap Events (one shared condition): a set
    wakes its waiters, and a set of another flag never ends a wait early."""
    from leaseq.handler import Flag

    a, b = Flag(), Flag()
    assert isinstance(a, threading.Event) and not a.is_set() and not a.wait(0.01)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(a.wait(10.0)))
    waiter.start()
    b.set()  # wakes the waiter, which sees its own flag still clear and waits on
    wait_until(lambda: b.is_set())
    assert waiter.is_alive() and not woke
    a.set()
    waiter.join(10.0)
    assert woke == [True] and a.wait() and a.is_set()
    a.clear()
    assert not a.is_set() and not a.wait(0.01) and b.is_set()


# -- burst mode -----------------------------------------------------------------------------


def test_burst_with_nothing_returns(driver: Driver) -> None:
    w = driver.worker(handlers.noop)
    w.run(burst=True)
    assert w.processed == 0
    if w.counts is not None:
        assert w.counts["succeeded"] == 0


@pytest.mark.parametrize("groups", [True, False], ids=["queue-and-group", "queue"])
def test_burst_waits_out_limits_that_hold_pending_jobs_back(
    live_driver: Driver, groups: bool
) -> None:
    """Pending jobs a rate limit (queue-wide or per fair group) holds back are
    still pending: a burst run waits for them and returns only once they ran."""
    q = live_driver.queue("limited", backoff=0.0)
    if groups:
        q.set_limits(rate=4, per=0.2, group_rate=2, group_per=0.2)
        q.enqueue_many([{}] * 6)
        q.enqueue_many([{}] * 4, group="tenant")
    else:
        q.set_limits(rate=4, per=0.2)
        q.enqueue_many([{}] * 10)
    w = live_driver.worker(handlers.noop, queue=q, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 10
    if w.counts is not None:
        assert w.counts["succeeded"] == 10
    assert q.stats().pending == 0


def test_burst_on_a_paused_queue_returns(live_driver: Driver) -> None:
    q = live_driver.queue("paused", backoff=0.0)
    q.enqueue_many([{}] * 3)
    q.pause()
    w = live_driver.worker(handlers.noop, queue=q)
    w.run(burst=True)
    assert w.processed == 0 and q.stats().pending == 3


# -- concurrency, prefetch, heartbeats ----------------------------------------------------


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


def test_a_fast_drain_claims_and_completes_in_batches(
    live_driver: Driver, request: pytest.FixtureRequest
) -> None:
    """10,000 jobs of one Redis call each (the peer benches' shape) on a real
    server: the claimer refills once half the prefetch is spent and outcomes
    gather, so a claim and a complete_many each carry many jobs (claiming at
    every freed lease and writing at every wake-up cost about 1,500 claims and
    2,000 completes here)."""
    differs(
        request,
        live_driver,
        "asyncio",
        "aio.Worker claims at every freed slot and writes completions as they come "
        "(about 1,000 claims and 4,300 complete_many calls here, against <= 500 and <= 1,000)",
    )
    q = live_driver.queue("batches")
    rr = live_driver.redis
    claims, completes = Calls("claim_now"), Calls("complete_many")
    q.enqueue_many([{} for _ in range(10_000)])
    w = live_driver.worker(
        lambda lease: rr.incr("batches:done"), queue=q, wrap=lambda x: completes(claims(x))
    )
    w.run(burst=True)
    assert w.processed == 10_000 and int(rr.get("batches:done")) == 10_000
    if w.counts is not None:
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
    if w.counts is not None:
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


# -- stop and grace ---------------------------------------------------------------------------


def test_stop_lets_in_flight_finish(driver: Driver) -> None:
    q = driver.q
    gate = threading.Event()
    entered = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        entered.set()
        gate.wait(10)
        return "finished"

    job_id = q.enqueue({})
    w = driver.worker(handler, grace=10.0)
    w.start()
    assert entered.wait(10)
    w.stop()
    gate.set()
    w.join(10)
    assert _job(q, job_id).result == "finished"


def test_stop_now_releases_in_flight_and_discards_their_outcome(driver: Driver) -> None:
    q = driver.q
    gate = threading.Event()
    entered = threading.Event()
    lost_seen = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        entered.set()
        gate.wait(10)
        if leaseq.current_job().lost.is_set():
            lost_seen.set()
        return "too late"

    job_id = q.enqueue({})
    w = driver.worker(handler, grace=10.0)
    w.start()
    assert entered.wait(10)
    w.stop(now=True)
    w.join(10)
    job = _job(q, job_id)
    assert job.state is leaseq.State.PENDING and job.result is None
    gate.set()
    assert lost_seen.wait(10)


def test_a_job_released_at_stop_is_counted_released_not_lost(driver: Driver) -> None:
    """Out of grace, the worker itself hands a running job back: that is one
    release, not a lease another worker took (no "lost" count, warning or metric),
    even when the handler returns while the worker is still shutting down."""
    q = driver.q
    entered = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        entered.set()
        leaseq.current_job().lost.wait(10)
        return "too late"

    q.enqueue({})
    metrics = WorkerMetrics()
    w = driver.worker(handler, grace=0.0, metrics=metrics)
    w.start()
    assert entered.wait(10)
    w.stop()
    w.join(10)
    assert w.processed == 0
    if w.counts is not None:
        assert (w.counts["released"], w.counts["lost"]) == (1, 0)
    assert _lost(metrics) == [0]


def test_stop_hands_prefetched_leases_back_unspent(live_driver: Driver) -> None:
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)
    started = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        started.set()
        time.sleep(0.2)
        return "ok"

    ids = q.enqueue_many([{"i": i} for i in range(5)])
    w = live_driver.worker(handler, queue=q, concurrency=1, prefetch=4, ttl=5.0)
    w.start()
    assert started.wait(5.0)
    w.stop()
    w.join(5.0)
    assert w.processed == 1
    first, *rest = (_job(q, job_id) for job_id in ids)
    assert first.state is leaseq.State.SUCCEEDED
    # The four prefetched never started: back to pending at once, the attempt
    # their claim counted refunded (max_attempts raised by one: two still left).
    assert [(j.state, j.max_attempts - j.attempts) for j in rest] == [(leaseq.State.PENDING, 2)] * 4


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_a_graceful_stop_finishes_then_releases(live_driver: Driver, kind: str) -> None:
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)

    started: list[str] = []

    async def async_handler(lease: leaseq.Lease) -> str:
        # A slow one runs until it is handed back (asyncio cancels it there).
        started.append(lease.id)
        lost = leaseq.current_job().lost
        await asyncio.sleep(0.05)
        while not (lease.payload["fast"] or lost.is_set()):
            await asyncio.sleep(0.01)
        return "ok"

    def plain_handler(lease: leaseq.Lease) -> str:
        started.append(lease.id)
        if lease.payload["fast"]:
            time.sleep(0.05)
        else:
            leaseq.current_job().lost.wait(30)  # until it is handed back
        return "ok"

    q.enqueue({"fast": True}, id="fast")
    q.enqueue({"fast": False}, id="slow")
    handler = async_handler if kind == "async" else plain_handler
    w = live_driver.worker(handler, queue=q, concurrency=2, ttl=5.0, grace=0.3)
    w.start()
    # Both handlers have started (a lease claimed but not started goes back at once).
    wait_until(lambda: len(started) == 2, what="both handlers to start")
    w.stop()
    w.join(5.0)
    assert _job(q, "fast").state is leaseq.State.SUCCEEDED
    # Past the grace the slow job went back to pending, its attempt refunded.
    assert _job(q, "slow").state is leaseq.State.PENDING


# -- logging and settings -----------------------------------------------------------------------


def test_every_log_line_names_queue_job_and_attempt(
    driver: Driver, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> None:
    differs(request, driver, "asyncio", "aio.Worker logs no 'worker ... started' or 'stopped' line")
    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    with caplog.at_level(logging.DEBUG, logger="leaseq.worker"):
        driver.worker(handlers.boom).run(burst=True)
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "leaseq.worker"]
    assert any(
        f"job={job_id} attempt=1 error -> dead: ValueError: boom on {job_id}" in x for x in lines
    )
    assert all(x.startswith("queue=") and " job=" in x and " attempt=" in x for x in lines)
    assert any(x.startswith("queue=emails job=-") and "stopped" in x for x in lines)


@pytest.mark.parametrize(
    "kw",
    [
        {"concurrency": 0},
        {"concurrency": 1.5},
        {"ttl": 0},
        {"ttl": float("nan")},
        {"grace": -1},
        {"prefetch": -1},
        {"prefetch": 1.5},
    ],
)
def test_bad_settings_are_rejected(driver: Driver, kw: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        driver.worker(handlers.noop, **kw)


def test_handler_must_be_callable(driver: Driver) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        driver.worker("tests.support.handlers:noop")


def test_stop_before_run_is_not_lost(live_driver: Driver) -> None:
    q = live_driver.queue("life", backoff=0.0)
    job_id = q.enqueue({})
    w = live_driver.worker(handlers.noop, queue=q)
    w.stop()
    started = time.monotonic()
    w.run(burst=False)  # not burst: only the stop can end it
    assert time.monotonic() - started < 3.0
    assert _job(q, job_id).state is leaseq.State.PENDING  # nothing claimed
    w.run(burst=True)  # the stop was consumed: the next run works
    assert _job(q, job_id).state is leaseq.State.SUCCEEDED


def test_run_twice_at_once_is_refused(live_driver: Driver) -> None:
    q = live_driver.queue("life", backoff=0.0)
    entered = threading.Event()
    q.enqueue({})
    w = live_driver.worker(lambda lease: entered.set(), queue=q)
    w.start()
    assert entered.wait(10)  # the run is under way
    with pytest.raises(RuntimeError, match="already running"):
        w.run(burst=True)
    w.stop()
    w.join(10)
