"""The lifecycle of both workers: stop and grace, a stop before run(), one run
at a time (on every driver), a claim landing after a hard stop, which errors
they ride out and which end run(), and the handler kinds they run (async def
and plain def on every driver, async def in the CLI).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

import leaseq
import leaseq.aio
from leaseq.observe.worker_metrics import WorkerMetrics
from leaseq.work.outage import Backoff, Outage
from tests.support import LEASEQ, ROOT, handlers
from tests.support.drivers import Driver
from tests.support.servers import RedisServer, wait_until


@pytest.fixture
def rs(rr: redis.Redis) -> redis.Redis:
    """A client on the real server, flushed (conftest's ``rr``)."""
    return rr


def _q(rs: Any, **kw: Any) -> leaseq.Queue:
    return leaseq.Queue("life", redis=rs, backoff=0.0, **kw)


def _worker(q: Any, fn: Any, **kw: Any) -> leaseq.Worker:
    kw.setdefault("handle_signals", False)
    return leaseq.Worker(q, fn, **kw)


def _lost(metrics: WorkerMetrics) -> list[float]:
    """The ``leaseq_leases_lost_total`` samples a worker recorded."""
    return [s.value for f in metrics.collect() for s in f.samples if "lost" in s.name]


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


def _state(q: leaseq.Queue, job_id: str) -> leaseq.State:
    job = q.get(job_id)
    assert job is not None
    return job.state


class Flaky:
    """A queue whose named calls all raise ``error`` until it was raised ``times``
    times: one outage, as a failover looks to the worker."""

    def __init__(self, inner: Any, error: Exception, times: int, calls: tuple[str, ...]) -> None:
        self._inner = inner
        self._error = error
        self._calls = calls
        self.left = times
        self.raised = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._calls:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.left > 0:
                self.left -= 1
                self.raised += 1
                raise self._error
            return attr(*args, **kwargs)

        return call


# -- threaded worker: lifecycle ------------------------------------------------------


def test_a_claim_that_lands_after_a_hard_stop_is_released(rs: Any) -> None:
    q = _q(rs)
    gate = threading.Event()
    entered = threading.Event()

    class SlowClaim:
        def __getattr__(self, name: str) -> Any:
            return getattr(q, name)

        def claim_now(self, *args: Any) -> Any:
            entered.set()
            gate.wait(10)  # the claim is in flight past the stop
            return q.claim_now(*args)

    job_id = q.enqueue({})
    w = _worker(SlowClaim(), handlers.noop)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    assert entered.wait(10)
    w.stop(now=True)
    # The handler threads go; only then does the claim come back with a lease.
    wait_until(
        lambda: not any(th.name.startswith("leaseq-handler") for th in threading.enumerate()),
        what="the handler threads to end",
    )
    gate.set()
    t.join(15)
    assert not t.is_alive()
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.PENDING and job.attempts == 1
    assert job.max_attempts == 6  # released: the attempt is refunded


# -- errors: both workers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("calls", "times"),
    [(("claim_now", "complete_many", "reap"), 6), (("complete", "complete_many"), 4)],
    ids=["claims-writes-reaps", "writes"],
)
def test_transient_errors_are_retried_with_one_log_line(
    live_driver: Driver, caplog: pytest.LogCaptureFixture, calls: tuple[str, ...], times: int
) -> None:
    # Outcome writes that fail are retried, not dropped with the job left active
    # until its lease runs out; so are claims and reaps. One outage, one warning.
    q = live_driver.queue("life", backoff=0.0)
    ids = q.enqueue_many([{} for _ in range(5)])
    busy = getattr(leaseq, "ServerBusy", leaseq.ServerUnavailable)("READONLY (failover)")
    flaky: list[Flaky] = []

    def wrap(queue: Any) -> Flaky:
        flaky.append(Flaky(queue, busy, times, calls))
        return flaky[0]

    with caplog.at_level(logging.DEBUG, logger="leaseq.worker"):
        w = live_driver.worker(handlers.noop, queue=q, wrap=wrap, reap_interval=0.0, ttl=5.0)
        w.run(burst=True)
    assert flaky[0].raised == times
    assert w.processed == 5
    assert all(_state(q, i) is leaseq.State.SUCCEEDED for i in ids)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([m for m in warnings if "retrying in" in m]) == 1, warnings
    assert any("Redis answers again" in r.getMessage() for r in caplog.records)


def test_an_outage_ends_when_every_kind_of_call_that_failed_goes_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A claim landing between two failed writes is not the end of the outage:
    # the writes still fail. One WARNING, one INFO, and only after the writes work.
    outage, backoff = Outage("life"), Backoff()
    busy = leaseq.ServerUnavailable("READONLY (failover)")
    with caplog.at_level(logging.DEBUG, logger="leaseq.worker"):
        outage.failed("outcome", busy, backoff)
        outage.failed("claim", busy, backoff)
        outage.ok("claim")
        outage.failed("outcome", busy, backoff)
        assert outage.since is not None
        outage.ok("outcome")
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.WARNING, logging.DEBUG, logging.DEBUG, logging.INFO]
    assert "answers again" in caplog.records[-1].getMessage()
    assert outage.since is None


def test_a_fatal_error_ends_run_with_it_and_releases_held_jobs(live_driver: Driver) -> None:
    q = live_driver.queue("life", backoff=0.0)
    gate = threading.Event()
    entered = threading.Event()

    def handler(lease: leaseq.Lease) -> None:
        entered.set()
        gate.wait(10)

    held = q.enqueue({})
    w = live_driver.worker(handler, queue=q, concurrency=2, grace=30.0)
    w.start()
    assert entered.wait(10)
    # An operator overwrites a queue key: every claim now fails the same way.
    live_driver.redis.set(q.keys.scheduled, "oops")
    q.nudge()
    try:
        with pytest.raises(leaseq.DamagedKey):
            w.join(15)
    finally:
        gate.set()
    job = q.get(held)
    assert job is not None and job.state is leaseq.State.PENDING  # released, not left active


@pytest.mark.skipif(
    not hasattr(leaseq, "ServerBusy"), reason="READONLY becomes ServerBusy in the errors mapping"
)
def test_a_failover_does_not_end_either_worker(redis_server: RedisServer) -> None:
    replica = RedisServer()
    try:
        client = redis.Redis(port=replica.port)
        client.replicaof("127.0.0.1", str(redis_server.port))
        wait_until(lambda: client.info("replication")["master_link_status"] == "up")
        q = leaseq.Queue("fo", redis=client, backoff=0.0)
        w = _worker(q, handlers.noop)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()

        async def on_aio() -> None:
            aclient = aioredis.Redis(port=replica.port)
            aw = leaseq.aio.Worker(leaseq.aio.Queue("fo", redis=aclient), handlers.noop, ttl=5.0)
            task = asyncio.ensure_future(aw.run())
            await asyncio.sleep(0.5)  # its claims meet READONLY meanwhile
            assert not task.done()
            aw.stop()
            await asyncio.wait_for(task, 10.0)
            await aclient.aclose()

        asyncio.run(on_aio())
        assert t.is_alive()  # the threaded worker met READONLY all along too
        client.replicaof("NO", "ONE")  # promoted
        job_id = q.enqueue({})
        wait_until(lambda: _state(q, job_id) is leaseq.State.SUCCEEDED, 15, what="the job")
        w.stop()
        t.join(10)
        client.close()
    finally:
        replica.stop()


@pytest.mark.skipif(
    not hasattr(leaseq, "AuthError"), reason="refused credentials become AuthError in the mapping"
)
def test_bad_credentials_end_either_worker_at_once() -> None:
    server = RedisServer()
    try:
        redis.Redis(port=server.port).config_set("requirepass", "right")
        # No client-side retries: what is timed is the worker's reaction.
        client = redis.Redis(port=server.port, password="wrong", retry=Retry(NoBackoff(), 0))
        with pytest.raises(leaseq.AuthError):
            _worker(leaseq.Queue("auth", redis=client), handlers.noop).run()

        async def on_aio() -> None:
            aclient = aioredis.Redis(
                port=server.port, password="wrong", retry=AsyncRetry(NoBackoff(), 0)
            )
            aw = leaseq.aio.Worker(leaseq.aio.Queue("auth", redis=aclient), handlers.noop)
            try:
                with pytest.raises(leaseq.AuthError):
                    await asyncio.wait_for(aw.run(), 10.0)
            finally:
                await aclient.aclose()

        asyncio.run(on_aio())
        client.close()
    finally:
        server.stop()


# -- handler kinds -----------------------------------------------------------------


def test_a_worker_runs_async_def_handlers(live_driver: Driver) -> None:
    q = live_driver.queue("life", backoff=0.0)
    job_id = q.enqueue({"a": 1})
    live_driver.worker(handlers.async_echo, queue=q, concurrency=2).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED
    assert job.result == {"echo": {"a": 1}, "job": job_id}


def test_a_worker_runs_plain_def_handlers_side_by_side_in_threads(live_driver: Driver) -> None:
    q = live_driver.queue("life", backoff=0.0)
    seen: list[str] = []
    # Four handlers meet at a barrier: only side by side, each on its own thread, can all four
    # get past it. On the loop, or one after another, the first waits alone and breaks it.
    together = threading.Barrier(4, timeout=10.0)

    def handler(lease: leaseq.Lease) -> str:
        seen.append(leaseq.current_job().lease.id)
        together.wait()
        return "ran"

    q.enqueue_many([{}, {}, {}, {}])
    live_driver.worker(handler, queue=q, concurrency=4, ttl=30.0).run(burst=True)
    assert not together.broken
    assert len(set(seen)) == 4
    assert q.stats().succeeded == 4


def test_outcomes_that_cannot_be_written_as_asked_are_still_written(live_driver: Driver) -> None:
    q = live_driver.queue("life", backoff=0.0, max_payload_bytes=1000)

    async def handler(lease: leaseq.Lease) -> Any:
        if lease.id == "neg":
            raise leaseq.Retry(in_=-1, reason="negative")
        return object() if lease.id == "obj" else "x" * 5000

    for job_id in ("neg", "obj", "big"):
        q.enqueue({}, id=job_id, max_attempts=3)
    live_driver.worker(handler, queue=q, ttl=5.0).run(burst=True)
    states = {i: (q.get(i) or pytest.fail(i)).state for i in ("neg", "obj", "big")}
    # None is left active with no last_error (a worker that raised in a lost task).
    assert states == {
        "neg": leaseq.State.DEAD,  # backoff 0: retried at once until out of attempts
        "obj": leaseq.State.DEAD,
        "big": leaseq.State.DEAD,
    }
    big = q.get("big")
    assert big is not None and big.attempts == 1
    assert (big.last_error or "").startswith("ResultTooLarge: ")


def test_cli_worker_runs_async_def_handlers(rs: Any, redis_server: RedisServer) -> None:
    q = _q(rs)
    job_id = q.enqueue({"a": 2})
    done = subprocess.run(
        [
            LEASEQ,
            "--url",
            redis_server.url,
            "worker",
            "life",
            "tests.support.handlers:async_echo",
            "--burst",
        ],
        cwd=ROOT,
        capture_output=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED
    assert job.result == {"echo": {"a": 2}, "job": job_id}


# -- stop and grace, one run at a time (every driver) ---------------------------------------


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


def test_a_hard_stop_then_a_new_run_keeps_to_concurrency(live_driver: Driver) -> None:
    """Handlers still running in threads after stop(now=True) (their jobs handed
    back) hold their slots in the next run() too: never more than ``concurrency``
    handlers at once."""
    q = live_driver.queue("again")
    lock, running, peak = threading.Lock(), [0], [0]
    entered = threading.Event()

    def handler(lease: leaseq.Lease) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        entered.set()
        time.sleep(0.6)
        with lock:
            running[0] -= 1

    q.enqueue_many([{} for _ in range(6)])
    w = live_driver.worker(handler, queue=q, concurrency=2, ttl=5.0)
    w.start()
    assert entered.wait(10)
    w.stop(now=True)
    w.join(10)
    w.run(burst=True)
    assert peak[0] == 2, peak[0]
    wait_until(lambda: q.stats().succeeded == 6, 20, what="every job done")
