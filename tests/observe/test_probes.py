"""A worker pod's endpoint (``leaseq worker --metrics-port --metrics-host``):
``/healthz`` and ``/readyz`` as the kubelet reads them, ``/scale`` as KEDA's
metrics-api scaler reads it, on a real worker process and a real server that
is killed and started again.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import leaseq
from leaseq.observe.health import Health
from tests.support.servers import RedisServer, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_verdicts() -> None:
    h, worker, log, timeouts = Health(), object(), object(), object()
    assert not h.ready().ok and h.ready().reason == "no worker running"
    assert h.live().ok
    h.running(worker)
    assert h.ready().ok
    h.outage(log, 0.0)
    assert not h.ready().ok and "Redis unavailable" in h.ready().reason
    h.outage(log, None)
    h.stuck(timeouts, {"timeout": 1, "cancelled": 1})
    assert not h.live().ok and h.live().reason == (
        "2 handler(s) still running after their job was given up "
        "(1 past its timeout, 1 cancelled while it ran)"
    )
    h.stopped(worker)
    assert not h.live().ok  # stuck threads outlive their worker's stop
    h.stuck(timeouts, {"timeout": 0, "cancelled": 0})
    assert h.live().ok
    h.children(1, 2)
    assert not h.ready().ok and h.ready().reason == "1 of 2 worker processes running"
    h.children(2, 2)
    assert h.ready().ok


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer("--appendonly", "yes", "--appendfsync", "always")  # outlives a kill
    yield s
    s.stop()


def _get(port: int, path: str) -> httpx.Response | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2.0)
    except httpx.HTTPError:
        return None


def _status(port: int, path: str) -> int | None:
    got = _get(port, path)
    return None if got is None else got.status_code


def _worker(url: str, port: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "leaseq"), "--url", url, "worker", "probed",
         "tests.support.handlers:sleep", "--metrics-port", str(port),
         "--metrics-host", "127.0.0.1", "--ttl", "5", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_ready_follows_redis_and_scale_gives_the_backlog(server: RedisServer) -> None:
    url = f"redis://127.0.0.1:{server.port}/0"
    q = leaseq.Queue.from_url(url, "probed", enqueue_retry=0)
    q.pause()  # claims lease nothing: the backlog stays put
    q.enqueue_many([{"s": 0} for _ in range(7)])
    port = free_port()
    proc = _worker(url, port)
    try:
        wait_until(lambda: _status(port, "/readyz") == 200, 20, what="the worker to be ready")
        assert _status(port, "/healthz") == 200
        scale = _get(port, "/scale")
        assert scale is not None and scale.status_code == 200
        assert scale.json() | {"oldest_ready_age": 0} == {
            "queue": "probed",
            "demand": 0,  # paused: no worker could claim them
            "backlog": 7,
            "in_flight": 0,
            "oldest_ready_age": 0,
            "paused": True,
        }
        server.kill()
        wait_until(lambda: _status(port, "/readyz") == 503, 20, what="readyz to see Redis down")
        got = _get(port, "/readyz")
        assert got is not None and "Redis unavailable" in got.json()["reason"]
        assert _status(port, "/healthz") == 200  # a restart would not bring Redis back
        assert _status(port, "/scale") == 503
        server.start()
        wait_until(lambda: _status(port, "/readyz") == 200, 30, what="readyz once Redis is back")
        q.resume()
        wait_until(lambda: q.stats().succeeded == 7, 20, what="the backlog to drain")
        assert _status(port, "/nope") == 404
        head = httpx.head(f"http://127.0.0.1:{port}/healthz", timeout=2)
        assert head.status_code == 200 and head.content == b""
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    q.close()


def test_a_handler_stuck_past_its_timeout_fails_liveness(server: RedisServer) -> None:
    url = f"redis://127.0.0.1:{server.port}/0"
    q = leaseq.Queue.from_url(url, "probed")
    port = free_port()
    proc = _worker(url, port, "--timeout", "0.2", "--grace", "0.5")
    try:
        wait_until(lambda: _status(port, "/healthz") == 200, 20, what="the worker to be live")
        q.enqueue({"s": 60})  # a thread cannot be killed: stuck once past 0.2 s
        wait_until(lambda: _status(port, "/healthz") == 503, 20, what="healthz to see it stuck")
        got: Any = _get(port, "/healthz")
        assert got.json() == {
            "ok": False,
            "reason": "1 handler(s) still running after their job was given up "
            "(1 past its timeout)",
        }
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    q.close()


def test_the_endpoint_refuses_an_address_it_cannot_bind(server: RedisServer) -> None:
    url = f"redis://127.0.0.1:{server.port}/0"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "leaseq"), "--url", url, "worker", "probed",
         "tests.support.handlers:noop", "--metrics-port", "1", "--metrics-host", "192.0.2.1"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "cannot listen on 192.0.2.1:1" in proc.stderr and "Traceback" not in proc.stderr


def test_a_worker_of_several_queues_scales_on_all_of_them_and_listens_on_ipv6(
    server: RedisServer,
) -> None:
    url = f"redis://127.0.0.1:{server.port}/0"
    high, low = (leaseq.Queue.from_url(url, name) for name in ("high", "low"))
    for q in (high, low):
        q.pause()
        q.enqueue_many([{"s": 0} for _ in range(3)])
    low.resume()  # low's 3 could start; high's 3 wait while it is paused
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "leaseq"), "--url", url, "worker", "high:2,low:1",
         "tests.support.handlers:sleep", "--metrics-port", str(port), "--metrics-host", "::1",
         "--concurrency", "1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def scale() -> Any:
            try:
                got = httpx.get(f"http://[::1]:{port}/scale", timeout=2.0)
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                return None
            return got.json() if got.status_code == 200 else None

        doc = wait_until(scale, 20, what="the worker's /scale on [::1]")
        assert doc["queue"] == "high,low" and doc["backlog"] + doc["in_flight"] >= 3
        wait_until(lambda: low.stats().succeeded == 3, 20, what="low to drain")
        doc = wait_until(scale, 20, what="/scale again")
        assert (doc["demand"], doc["backlog"], doc["paused"]) == (0, 3, False)
        text = httpx.get(f"http://[::1]:{port}/metrics", timeout=2.0).text
        assert 'leaseq_backlog{queue="high"} 3.0' in text
        assert 'leaseq_backlog{queue="low"} 0.0' in text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    high.close()
    low.close()


def test_a_supervisor_is_not_ready_while_redis_is_down(server: RedisServer) -> None:
    # Its workers run in children: their outages do not reach it, so its
    # /readyz asks Redis itself.
    url = f"redis://127.0.0.1:{server.port}/0"
    port = free_port()
    proc = _worker(url, port, "--processes", "2")
    try:
        wait_until(lambda: _status(port, "/readyz") == 200, 30, what="both children running")
        server.kill()
        wait_until(lambda: _status(port, "/readyz") == 503, 20, what="readyz to see Redis down")
        got = _get(port, "/readyz")
        assert got is not None and "Redis unavailable" in got.json()["reason"]
        assert _status(port, "/healthz") == 200
        server.start()
        wait_until(lambda: _status(port, "/readyz") == 200, 30, what="readyz once Redis is back")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
