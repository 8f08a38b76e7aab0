"""Fixtures shared by every test: one behaviour suite, two backends.

``r`` is a fresh Redis for each test: ``fake`` (fakeredis with lupa, the
same Lua scripts, time moved with freezegun) or ``real`` (a redis-server
that this file starts on a free loopback port for the session, flushed
between tests). ``clock`` moves time on either: freezegun on fakeredis,
short waits polled against the server's own TIME on the real one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import fakeredis
import pytest
import redis

import leaseq


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    every: float = 0.005,
    what: str = "condition",
) -> Any:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class RedisServer:
    """A redis-server process on 127.0.0.1 and a free port, in a temp dir."""

    def __init__(self, *extra: str) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
        self.dir = tempfile.mkdtemp(prefix="leaseq-redis-")
        self.port = free_port()
        self.args = [
            exe,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            self.dir,
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(up, 10, what="redis-server to start")
        client.close()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(params=["fake", "real"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def r(backend: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    if backend == "fake":
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        yield client
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    client = redis.Redis(port=server.port)
    client.flushall()
    client.script_flush()
    yield client
    client.close()


class Clock:
    """Moves time for lease expiry on either backend.

    On fakeredis the clock is frozen (freezegun) and ``advance`` ticks it.
    On a real server time is real: ``advance`` waits until the server's own
    TIME has moved that far, polling, so tests use short leases there.
    """

    def __init__(self, backend: str, client: Any, freezer: Any) -> None:
        self.backend = backend
        self.client = client
        self.freezer = freezer

    @property
    def fake(self) -> bool:
        return self.backend == "fake"

    def server_now(self) -> float:
        sec, usec = self.client.time()
        return float(sec) + usec / 1e6

    def advance(self, seconds: float) -> None:
        if self.freezer is not None:
            self.freezer.tick(seconds)
            return
        target = self.server_now() + seconds
        wait_until(
            lambda: self.server_now() >= target, timeout=seconds + 10, what="the server clock"
        )

    def past(self, deadline: float) -> None:
        """Move until the server clock is past ``deadline`` (epoch seconds)."""
        self.advance(max(0.0, deadline - self.server_now()) + 0.002)

    def lease(self, fake: float, real: float = 0.05) -> float:
        """A lease length: long on the frozen clock, short on the real one."""
        return fake if self.fake else real


@pytest.fixture
def clock(backend: str, r: Any) -> Iterator[Clock]:
    if backend == "fake":
        from freezegun import freeze_time

        with freeze_time("2026-01-01 00:00:00") as freezer:
            yield Clock(backend, r, freezer)
    else:
        yield Clock(backend, r, None)


@pytest.fixture
def q(r: Any) -> leaseq.Queue:
    return leaseq.Queue(
        "emails",
        redis=r,
        keep_succeeded=60.0,
        backoff=leaseq.Backoff(base=1.0, cap=10.0, jitter=0.0),
    )


def pytest_report_header(config: pytest.Config) -> str:
    exe = shutil.which("redis-server") or "not found"
    return f"redis-server: {exe}; LEASEQ_SKIP_REAL={os.environ.get('LEASEQ_SKIP_REAL', '')}"
