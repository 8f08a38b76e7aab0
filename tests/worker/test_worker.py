"""leaseq.Worker in-process: outcomes, burst mode, context, stop, logging, settings."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry as RedisRetry

import leaseq
from leaseq.observe.worker_metrics import WorkerMetrics
from tests.support import handlers
from tests.support.servers import RedisServer, wait_until


def _worker(q: leaseq.Queue, fn: Any, **kw: Any) -> leaseq.Worker:
    kw.setdefault("handle_signals", False)
    return leaseq.Worker(q, fn, **kw)


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


def _in_thread(w: leaseq.Worker, burst: bool = False) -> threading.Thread:
    t = threading.Thread(target=w.run, kwargs={"burst": burst}, daemon=True)
    t.start()
    return t


def test_return_value_completes_with_result(q: leaseq.Queue) -> None:
    ids = q.enqueue_many([{"i": i} for i in range(25)])
    w = _worker(q, handlers.echo, concurrency=3)
    w.run(burst=True)
    assert w.counts["succeeded"] == 25
    for i, job_id in enumerate(ids):
        job = _job(q, job_id)
        assert job.state is leaseq.State.SUCCEEDED and job.result == {"i": i}


def test_exception_fails_with_type_message_and_traceback(q: leaseq.Queue) -> None:
    job_id = q.enqueue({}, max_attempts=1)
    _worker(q, handlers.boom).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD
    assert job.last_error is not None
    assert job.last_error == f"ValueError: boom on {job_id}"
    assert job.traceback is not None and "handlers.py" in job.traceback
    assert "in boom" in job.traceback


def test_exception_with_attempts_left_schedules_a_retry(q: leaseq.Queue) -> None:
    job_id = q.enqueue({}, max_attempts=3)
    w = _worker(q, handlers.boom)
    w.run(burst=True)  # the retry is due later: burst does not wait for it
    job = _job(q, job_id)
    assert job.state is leaseq.State.SCHEDULED and job.attempts == 1
    assert w.counts["failed"] == 1


def test_retry_exception_sets_the_delay(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"in": 120.0})
    _worker(q, handlers.retry_later).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.SCHEDULED
    assert job.run_at is not None and job.claimed_at is not None
    assert job.run_at - job.claimed_at == pytest.approx(120.0, abs=1.0)
    assert job.last_error == "Retry: not yet"


def test_retry_in_zero_runs_again_within_the_same_burst(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"in": 0.0}, max_attempts=3)
    _worker(q, handlers.retry_later).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 3


def test_dead_exception_dead_letters_at_once(q: leaseq.Queue) -> None:
    job_id = q.enqueue({}, max_attempts=5)
    w = _worker(q, handlers.give_up)
    w.run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 1
    assert job.last_error == "Dead: bad input"
    assert w.counts["dead"] == 1


def test_unencodable_result_dead_letters_only_that_job_at_once(q: leaseq.Queue) -> None:
    # The handler ran to the end: running it again would repeat its side effects
    # for a result that still cannot be stored, so no retry.
    bad = q.enqueue({}, max_attempts=5)
    calls: list[str] = []

    def handler(lease: leaseq.Lease) -> Any:
        calls.append(lease.id)
        return object() if lease.id == bad else "fine"

    good = q.enqueue_many([{}, {}, {}])
    _worker(q, handler, concurrency=4).run(burst=True)
    job = _job(q, bad)
    assert job.state is leaseq.State.DEAD and job.attempts == 1 and calls.count(bad) == 1
    assert job.last_error is not None
    assert job.last_error.startswith("InvalidResult: the handler's result (of type object)")
    assert "not run again" in job.last_error
    assert [_job(q, i).result for i in good] == ["fine"] * 3


def test_oversized_result_is_dead_lettered_naming_size_and_limit(r: Any) -> None:
    q = leaseq.Queue("big", redis=r, max_payload_bytes=1000)
    job_id = q.enqueue({}, max_attempts=5)
    _worker(q, lambda lease: "x" * 5000).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 1 and job.result is None
    assert job.last_error is not None
    assert job.last_error.startswith(
        "ResultTooLarge: the handler returned a result of 5002 bytes encoded, over the "
        "queue's max_payload_bytes of 1000"
    )
    assert "x" * 50 not in job.last_error  # the reason, not a dump of the result


def test_current_job_is_the_running_lease(q: leaseq.Queue) -> None:
    seen: list[tuple[str, int, bool]] = []

    def handler(lease: leaseq.Lease) -> None:
        ctx = leaseq.current_job()
        seen.append((ctx.lease.id, ctx.lease.attempt, ctx.lost.is_set()))
        ctx.raise_if_lost()

    job_id = q.enqueue({})
    _worker(q, handler).run(burst=True)
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


def test_burst_with_nothing_returns(q: leaseq.Queue) -> None:
    w = _worker(q, handlers.noop)
    w.run(burst=True)
    assert w.counts["succeeded"] == 0


def test_burst_waits_out_limits_that_hold_pending_jobs_back(rr: Any) -> None:
    """Pending jobs a rate limit (queue-wide or per fair group) holds back are
    still pending: a burst run waits for them and returns only once they ran."""
    q = leaseq.Queue("limited", redis=rr, backoff=0.0)
    q.set_limits(rate=4, per=0.2, group_rate=2, group_per=0.2)
    q.enqueue_many([{}] * 6)
    q.enqueue_many([{}] * 4, group="tenant")
    w = _worker(q, handlers.noop)
    w.run(burst=True)
    assert w.counts["succeeded"] == 10
    assert q.stats().pending == 0


def test_burst_on_a_paused_queue_returns(rr: Any) -> None:
    q = leaseq.Queue("paused", redis=rr, backoff=0.0)
    q.enqueue_many([{}] * 3)
    q.pause()
    w = _worker(q, handlers.noop)
    w.run(burst=True)
    assert w.counts["succeeded"] == 0 and q.stats().pending == 3


def test_stop_lets_in_flight_finish(q: leaseq.Queue) -> None:
    gate = threading.Event()
    entered = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        entered.set()
        gate.wait(10)
        return "finished"

    job_id = q.enqueue({})
    w = _worker(q, handler, grace=10.0)
    t = _in_thread(w)
    assert entered.wait(10)
    w.stop()
    gate.set()
    t.join(10)
    assert not t.is_alive()
    assert _job(q, job_id).result == "finished"


def test_stop_now_releases_in_flight_and_discards_their_outcome(q: leaseq.Queue) -> None:
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
    w = _worker(q, handler, grace=10.0)
    t = _in_thread(w)
    assert entered.wait(10)
    w.stop(now=True)
    t.join(10)
    assert not t.is_alive()
    job = _job(q, job_id)
    assert job.state is leaseq.State.PENDING and job.result is None
    gate.set()
    assert lost_seen.wait(10)


def test_a_job_released_at_stop_is_counted_released_not_lost(q: leaseq.Queue) -> None:
    """Out of grace, the worker itself hands a running job back: that is one
    release, not a lease another worker took (no "lost" count, warning or metric),
    even when the handler returns while the worker is still shutting down."""
    entered = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        entered.set()
        leaseq.current_job().lost.wait(10)
        return "too late"

    q.enqueue({})
    metrics = WorkerMetrics()
    w = _worker(q, handler, grace=0.0, metrics=metrics)
    t = _in_thread(w)
    assert entered.wait(10)
    w.stop()
    t.join(10)
    assert not t.is_alive()
    assert (w.counts["released"], w.counts["lost"]) == (1, 0)
    lost = [s.value for f in metrics.collect() for s in f.samples if "lost" in s.name]
    assert lost == [0]


def test_an_outcome_set_as_the_grace_runs_out_is_written_not_released(
    q: leaseq.Queue,
) -> None:
    """Past its grace, the worker hands back only the handlers still running: one
    that returned first has its outcome written, even while that outcome is still
    on its way to the reporter (set on the task, not yet in the done queue)."""
    go, entered, decided, let_go = (threading.Event() for _ in range(4))
    runs: list[str] = []

    def handler(lease: leaseq.Lease) -> str:
        runs.append(lease.id)
        entered.set()
        go.wait(10)
        return "done"

    job_id = q.enqueue({})
    w = _worker(q, handler, grace=0.0, concurrency=1, prefetch=0)
    returned = w._timeouts.returned

    def held_returned(task: Any, outcome: Any) -> bool:
        written = returned(task, outcome)
        decided.set()  # the outcome is set; the task is not in the done queue yet
        let_go.wait(10)
        return written

    w._timeouts.returned = held_returned  # type: ignore[method-assign]
    t = _in_thread(w)
    assert entered.wait(10)
    go.set()
    assert decided.wait(10)
    w.stop()  # grace 0: the reporter's next step is past it
    t.join(10)
    let_go.set()
    assert not t.is_alive()
    job = _job(q, job_id)
    assert (job.state, job.result, job.attempts) == (leaseq.State.SUCCEEDED, "done", 1)
    assert runs == [job_id]
    assert (w.counts["succeeded"], w.counts["released"], w.counts["lost"]) == (1, 0, 0)


def test_heartbeat_that_finds_the_lease_lost_tells_the_handler(r: Any) -> None:
    q = leaseq.Queue("hb", redis=r, backoff=0.0)
    outcome: list[bool] = []

    def handler(lease: leaseq.Lease) -> str:
        outcome.append(leaseq.current_job().lost.wait(10))
        return "stale"

    job_id = q.enqueue({})
    w = _worker(q, handler, ttl=0.3, concurrency=1, prefetch=0)
    t = _in_thread(w)
    wait_until(lambda: _job(q, job_id).state is leaseq.State.ACTIVE, what="the claim")
    # Another holder now owns the job: the worker's token no longer matches.
    r.hset(q.keys.job(job_id), mapping={"attempts": 9, "max_attempts": 10})
    wait_until(lambda: outcome, what="the handler to hear of the loss")
    assert outcome == [True]
    wait_until(lambda: w.counts["lost"] == 1, what="the discard")
    w.stop()
    t.join(10)
    job = _job(q, job_id)
    assert job.state is leaseq.State.ACTIVE and job.attempts == 9 and job.result is None


def test_every_log_line_names_queue_job_and_attempt(
    q: leaseq.Queue, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = q.enqueue({}, max_attempts=1)
    with caplog.at_level(logging.DEBUG, logger="leaseq.worker"):
        _worker(q, handlers.boom).run(burst=True)
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "leaseq.worker"]
    assert any(
        f"job={job_id} attempt=1 error -> dead: ValueError: boom on {job_id}" in x for x in lines
    )
    assert all(x.startswith("queue=") and " job=" in x and " attempt=" in x for x in lines)
    assert any(x.startswith("queue=emails job=-") and "stopped" in x for x in lines)


def test_many_jobs_many_threads_each_done_once(q: leaseq.Queue) -> None:
    calls: list[str] = []
    lock = threading.Lock()

    def handler(lease: leaseq.Lease) -> None:
        with lock:
            calls.append(lease.id)

    ids = q.enqueue_many([{} for _ in range(300)])
    w = _worker(q, handler, concurrency=8)
    w.run(burst=True)
    assert sorted(calls) == sorted(ids)
    assert q.stats().succeeded == 300


def test_a_fast_drain_claims_and_completes_in_batches(rr: Any) -> None:
    """10,000 jobs of one Redis call each (the peer benches' shape) on a real
    server: the claimer refills once half the prefetch is spent and the reporter
    lets outcomes gather, so a claim and a complete_many each carry many jobs
    (claiming at every freed lease and writing at every wake-up cost about
    1,500 claims and 2,000 completes here)."""
    q = leaseq.Queue("batches", redis=rr)
    calls = {"claim_now": 0, "complete_many": 0}
    for name in calls:
        real = getattr(q, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kw)

        setattr(q, name, counted)
    q.enqueue_many([{} for _ in range(10_000)])
    w = _worker(q, lambda lease: rr.incr("batches:done"))
    w.run(burst=True)
    assert w.counts["succeeded"] == 10_000 and int(rr.get("batches:done")) == 10_000
    assert calls["claim_now"] <= 500, calls
    assert calls["complete_many"] <= 1000, calls


@pytest.mark.parametrize(
    "kw",
    [{"concurrency": 0}, {"concurrency": 1.5}, {"ttl": 0}, {"ttl": float("nan")}, {"grace": -1}],
)
def test_bad_settings_are_rejected(q: leaseq.Queue, kw: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Worker(q, handlers.noop, **kw)


def test_handler_must_be_callable(q: leaseq.Queue) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Worker(q, "tests.support.handlers:noop")  # type: ignore[arg-type]


def test_run_returns_only_after_its_claimer_stopped(q: leaseq.Queue) -> None:
    # An idle claimer blocks on the wake list; once run() returns, no thread of
    # that run may still use the client (the caller is free to close it).
    def claimers() -> int:
        return sum(th.name == "leaseq-claimer" and th.is_alive() for th in threading.enumerate())

    others = claimers()
    w = _worker(q, handlers.noop)
    t = _in_thread(w)
    wait_until(lambda: claimers() == others + 1, what="the claimer to start")
    before = time.monotonic()
    w.stop()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - before < 4.0
    assert claimers() == others


def test_a_stop_past_grace_in_an_outage_spends_one_failing_call_not_one_per_job() -> None:
    """Past the grace the running jobs are released one call each; on a server that
    stopped answering (SIGSTOP) each call fails only after the client's timeouts
    (with redis-py's defaults, a minute and more). After the first such failure
    the rest are left to expire, as the async worker does, or run() would take
    that long for every running job."""
    server = RedisServer()
    client = redis.Redis(
        port=server.port,
        socket_timeout=0.3,
        socket_connect_timeout=0.3,
        retry=RedisRetry(NoBackoff(), 0),
    )
    q = leaseq.Queue("jobs", redis=client, backoff=0.0)
    q.enqueue_many([{} for _ in range(6)])
    running, let_go = threading.Semaphore(0), threading.Event()

    def handler(lease: leaseq.Lease) -> None:
        running.release()
        let_go.wait(60)

    w = _worker(q, handler, concurrency=6, prefetch=0, grace=0.0)
    releases = [0]
    real = q.release

    def counted(lease: leaseq.Lease) -> None:
        releases[0] += 1
        real(lease)

    q.release = counted  # type: ignore[method-assign]
    t = _in_thread(w)
    try:
        for _ in range(6):
            assert running.acquire(timeout=10)
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)
        w.stop()
        t.join(30)
        assert not t.is_alive()
        assert releases[0] == 1
    finally:
        let_go.set()
        if server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)
        t.join(10)
        client.close()
        server.stop()
