"""Worker-local Prometheus metrics (leaseq.observe.worker_metrics): job durations
and waits, leases lost, handlers busy, from both workers, on fakeredis and a
real server; and ``leaseq worker --metrics-port`` serving them with the
queue's own figures.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgspec
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import leaseq
import leaseq.aio
from leaseq.observe import observer as _observe
from leaseq.observe.worker_metrics import WorkerMetrics
from tests.support.backends import async_client
from tests.support.servers import wait_until


def _text(m: WorkerMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(m)
    return generate_latest(registry).decode()


def _fails_on_odd(lease: leaseq.Lease) -> str:
    if lease.payload["n"] % 2:
        raise ValueError("odd")
    return "ok"


def test_threaded_worker_records_durations_waits_and_slots(q: leaseq.Queue) -> None:
    m = WorkerMetrics()
    q.enqueue_many([{"n": i} for i in range(4)], max_attempts=1)
    leaseq.Worker(q, _fails_on_odd, concurrency=2, ttl=30.0, metrics=m).run(burst=True)
    text = _text(m)
    assert 'leaseq_job_duration_seconds_count{outcome="complete",queue="emails"} 2.0' in text
    assert 'leaseq_job_duration_seconds_count{outcome="retry",queue="emails"} 2.0' in text
    assert 'leaseq_job_wait_seconds_count{queue="emails"} 4.0' in text
    assert 'leaseq_job_wait_seconds_bucket{le="+Inf",queue="emails"} 4.0' in text
    assert 'leaseq_handlers{queue="emails"} 2.0' in text
    assert 'leaseq_handlers_busy{queue="emails"} 0.0' in text
    assert 'leaseq_leases_lost_total{queue="emails"} 0.0' in text


def test_busy_handlers_are_counted_while_they_run(q: leaseq.Queue) -> None:
    m = WorkerMetrics()
    gate = threading.Event()
    q.enqueue_many([{"n": 0}, {"n": 2}])
    w = leaseq.Worker(q, lambda lease: gate.wait(10), concurrency=3, ttl=30.0, metrics=m)
    runner = threading.Thread(target=w.run, kwargs={"burst": True})
    runner.start()
    try:
        wait_until(
            lambda: 'leaseq_handlers_busy{queue="emails"} 2.0' in _text(m), 10, what="2 busy"
        )
    finally:
        gate.set()
        runner.join(10)
    assert 'leaseq_handlers_busy{queue="emails"} 0.0' in _text(m)


def test_a_lost_lease_is_counted(q: leaseq.Queue, r: Any) -> None:
    m = WorkerMetrics()
    q.enqueue({"n": 0}, id="doomed")
    # The row vanishes under the running handler: its completion is refused.
    leaseq.Worker(q, lambda lease: r.delete(q.keys.job(lease.id)), ttl=30.0, metrics=m).run(
        burst=True
    )
    assert 'leaseq_leases_lost_total{queue="emails"} 1.0' in _text(m)


def test_an_installed_observer_is_the_default(q: leaseq.Queue) -> None:
    m = WorkerMetrics()
    _observe.install(m)
    try:
        w = leaseq.Worker(q, lambda lease: None, concurrency=1)
    finally:
        _observe.install(None)
    assert w.metrics is m
    assert leaseq.Worker(q, lambda lease: None).metrics is None


def test_async_worker_records_too(r: Any) -> None:
    m = WorkerMetrics()

    async def handler(lease: leaseq.Lease) -> str:
        if lease.payload["n"] == 1:
            raise leaseq.Dead("no")
        return "ok"

    async def main() -> None:
        client = async_client(r)
        queue = leaseq.aio.Queue("emails", redis=client)
        await queue.enqueue_many([{"n": 0}, {"n": 1}, {"n": 2}])
        await leaseq.aio.Worker(queue, handler, concurrency=2, metrics=m).run(burst=True)
        await client.aclose()

    asyncio.run(main())
    text = _text(m)
    assert 'leaseq_job_duration_seconds_count{outcome="complete",queue="emails"} 2.0' in text
    assert 'leaseq_job_duration_seconds_count{outcome="dead",queue="emails"} 1.0' in text
    assert 'leaseq_job_wait_seconds_count{queue="emails"} 3.0' in text
    assert 'leaseq_handlers_busy{queue="emails"} 0.0' in text


def test_wait_is_claim_time_minus_enqueue_time_for_first_attempts() -> None:
    m = WorkerMetrics()
    lease = leaseq.Lease(
        id="a", queue="q", attempt=1, max_attempts=3, payload=None,
        deadline=1000.0 + 30.0 + 2.5, enqueued_at=1000.0, worker="w",
    )  # fmt: skip
    m.started("q", lease, 30.0)
    m.started("q", msgspec.structs.replace(lease, attempt=2), 30.0)  # a retry: left out
    text = _text(m)
    assert 'leaseq_job_wait_seconds_sum{queue="q"} 2.5' in text
    assert 'leaseq_job_wait_seconds_bucket{le="1.0",queue="q"} 0.0' in text
    assert 'leaseq_job_wait_seconds_bucket{le="5.0",queue="q"} 1.0' in text


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_worker_metrics_port(redis_server: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    from tests.support.servers import free_port, wait_until

    root = Path(__file__).resolve().parents[2]
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    q = leaseq.Queue.from_url(url, "metered")
    q.redis.flushall()
    port = free_port()
    exe = str(Path(sys.executable).parent / "leaseq")
    proc = subprocess.Popen(
        [
            exe,
            "--url",
            url,
            "worker",
            "metered",
            "tests.support.handlers:noop",
            "--metrics-port",
            str(port),
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        q.enqueue_many([{"n": i} for i in range(5)])

        def scraped() -> str | None:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1.0).text
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                return None
            done = 'leaseq_jobs_finished_total{outcome="succeeded",queue="metered"} 5.0'
            return text if done in text else None

        text = wait_until(scraped, 20, what="the worker's metrics to show 5 succeeded")
        assert 'leaseq_jobs{queue="metered",state="pending"} 0.0' in text
        assert 'leaseq_jobs_enqueued_total{queue="metered"} 5.0' in text
        # Worker-local figures on the same port (leaseq.observe.worker_metrics).
        assert 'leaseq_job_duration_seconds_count{outcome="complete",queue="metered"} 5.0' in text
        assert 'leaseq_job_wait_seconds_count{queue="metered"} 5.0' in text
        assert 'leaseq_handlers{queue="metered"} 4.0' in text
        assert 'leaseq_leases_lost_total{queue="metered"} 0.0' in text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
