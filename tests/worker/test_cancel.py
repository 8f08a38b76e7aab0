"""Cancelling a running job (``Queue.cancel`` of an active job) reaches its
worker at the next heartbeat: an ``async def`` handler of ``aio.Worker`` is
cancelled, a thread handler sees ``current_job().cancelled``, and under
``--processes`` the child still running it is stopped and replaced. On a real
server; the plain handler's case on every driver. The script's side (fencing,
the row) is tests/store/test_cancel.py.
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
from leaseq.observe.health import HEALTH
from leaseq.observe.worker_metrics import WorkerMetrics
from tests.support.backends import run
from tests.support.drivers import Driver
from tests.support.servers import RedisServer, wait_until
from tests.worker.test_supervisor import Supervised


def test_an_async_handler_is_cancelled_within_a_heartbeat(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    ttl = 3.0
    cancelled = asyncio.Event()
    seen: list[bool] = []

    async def handler(lease: leaseq.Lease) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(leaseq.current_job().cancelled.is_set())
            cancelled.set()
            raise
        return "never"

    async def scenario() -> float:
        await live.enqueue({"n": 1}, id="long")
        worker = leaseq.aio.Worker(live, handler, concurrency=1, ttl=ttl)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).active == 0:
            await asyncio.sleep(0.01)
        began = time.perf_counter()
        assert await live.cancel("long") is True
        await asyncio.wait_for(cancelled.wait(), 5.0)
        took = time.perf_counter() - began
        worker.stop()
        await asyncio.wait_for(task, 5.0)
        return took

    took = run(loop, scenario())
    assert took < ttl * 0.75  # within a heartbeat (ttl / 3), well before the lease would end
    assert seen == [True]
    job = run(loop, live.get("long"))
    assert job is not None and job.state is leaseq.State.CANCELLED and job.result is None
    assert job.last_error == "cancelled while running (attempt 1)"


def test_a_plain_handler_sees_current_job_cancelled_within_a_heartbeat(
    live_driver: Driver,
) -> None:
    """A plain ``def`` handler cannot be stopped: it polls
    ``current_job().cancelled`` between steps, and sees it set (with ``lost``)
    at the worker's next heartbeat after ``Queue.cancel``; what it returns then
    is discarded and the row stays cancelled."""
    ttl = 1.5  # a heartbeat every 0.5 s
    q = live_driver.queue("jobs")
    started = threading.Event()
    seen: list[tuple[bool, bool, float]] = []

    def handler(lease: leaseq.Lease) -> str:
        started.set()
        give_up = time.monotonic() + 10.0
        while not leaseq.current_job().cancelled.is_set() and time.monotonic() < give_up:
            time.sleep(0.01)  # a step of the handler's work
        ctx = leaseq.current_job()
        seen.append((ctx.cancelled.is_set(), ctx.lost.is_set(), time.monotonic()))
        return "stale result"

    job_id = q.enqueue({"n": 1})
    metrics = WorkerMetrics()
    w = live_driver.worker(handler, queue=q, concurrency=1, ttl=ttl, metrics=metrics)
    w.start()
    try:
        assert started.wait(10.0)
        began = time.monotonic()
        assert q.cancel(job_id) is True
        wait_until(lambda: seen, 15, what="the handler to return")
        ((cancelled, lost, at),) = seen
        assert (cancelled, lost) == (True, True)
        assert at - began < ttl  # within two heartbeats, well before the lease would end
        wait_until(lambda: _lost(metrics) == [1], 10, what="the outcome discarded")
        assert w.counts["lost"] == 1
    finally:
        w.stop()
        w.join(10.0)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.CANCELLED and job.result is None
    assert w.processed == 0
    assert w.counts["succeeded"] == 0


def test_a_handler_still_running_after_its_cancel_is_logged_as_cancelled(
    live_driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    """No timeout is set: the log line and the liveness verdict about the thread
    that runs on say it was cancelled, not that it ran past a timeout."""
    q = live_driver.queue("jobs")
    release = threading.Event()
    started = threading.Event()

    def handler(lease: leaseq.Lease) -> None:
        started.set()
        release.wait(30)  # never looks at current_job().cancelled

    caplog.set_level(logging.WARNING, logger="leaseq.worker")
    stuck: list[int] = []
    job_id = q.enqueue({"n": 1})
    w = live_driver.worker(handler, queue=q, concurrency=1, ttl=1.5, on_stuck=stuck.append)
    w.start()
    try:
        assert started.wait(10.0)
        assert q.cancel(job_id) is True
        wait_until(lambda: stuck and stuck[-1] == 1, 10, what="the thread counted stuck")
        (line,) = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
        assert "1 cancelled while it ran" in line and "timeout" not in line, line
        reason = HEALTH.live().reason
        assert "cancelled while it ran" in reason and "timeout" not in reason, reason
    finally:
        release.set()
        w.stop()
        w.join(10.0)
    wait_until(lambda: stuck[-1] == 0, 10, what="the thread to return")


def _lost(metrics: WorkerMetrics) -> list[float]:
    """The ``leaseq_leases_lost_total`` samples a worker recorded."""
    return [s.value for f in metrics.collect() for s in f.samples if "lost" in s.name]


@pytest.fixture
def sup(redis_server: RedisServer, rr: Any) -> Any:
    s = Supervised(redis_server.url)
    yield s
    s.close()


@pytest.mark.slow
def test_a_process_mode_child_running_a_cancelled_job_is_stopped(rr: Any, sup: Supervised) -> None:
    q = leaseq.Queue("jobs", redis=rr)
    job_id = q.enqueue({"s": 60})
    sup.start(
        "jobs",
        "sleep",
        "--processes",
        "1",
        "--kill-grace",
        "0.3",
        "--ttl",
        "0.6",
        "--concurrency",
        "1",
    )
    first = wait_until(lambda: sup.kids(), 20, what="the child")
    wait_until(lambda: q.stats().active == 1, 20, what="the job to start")
    assert q.cancel(job_id) is True
    wait_until(lambda: "killing it" in sup.log, 20, what="the kill")
    (kill,) = [line for line in sup.log.splitlines() if "killing it" in line]
    assert "timeout" not in kill, kill  # none was set: the job was cancelled
    wait_until(lambda: sup.kids() and not (sup.kids() & first), 20, what="a new child")
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.CANCELLED
    fresh = q.enqueue({"s": 0.01})
    wait_until(
        lambda: q.get(fresh).state is leaseq.State.SUCCEEDED,  # type: ignore[union-attr]
        20,
        what="the replacement to serve the queue",
    )
