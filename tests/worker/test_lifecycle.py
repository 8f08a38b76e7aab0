"""The lifecycle of both workers (a claim landing after a hard stop), which
errors they ride out and which end run(), and the handler kinds they run
(async def and plain def on every driver, async def in the CLI). A stop
before run() and one run at a time are in the worker suite
(tests/worker/test_worker.py, on every driver).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import threading
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

import leaseq
import leaseq.aio
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
