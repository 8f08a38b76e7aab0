"""Fixtures shared by every test: one behaviour suite, two backends.

``r`` is a fresh Redis for each test: ``fake`` (fakeredis with lupa, the
same Lua scripts, time moved with freezegun) or ``real`` (a redis-server
that this file starts on a free loopback port for the session, flushed
between tests). ``clock`` moves time on either: freezegun on fakeredis,
short waits polled against the server's own TIME on the real one.

Environment (set by tests/run.sh for its passes, see README "Supported versions"):

- ``LEASEQ_REDIS_SERVER``: the server binary every real-server fixture starts
  (default: ``redis-server`` on PATH). ``LEASEQ_REDIS_CLI`` likewise for the
  cluster's ``--cluster create`` (default: the ``redis-cli`` or ``valkey-cli``
  next to that server, else ``redis-cli`` on PATH).
- ``LEASEQ_BACKENDS=real``: deselect the fakeredis copy of every two-backend
  test (the ``fake`` parameter), for passes that are about a client or
  server version.

A session in which no test passed fails (exit 5), so a pass that skipped
or deselected everything can never look green.
"""

from __future__ import annotations

import json
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
import redis.asyncio as aioredis

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


def server_exe() -> str:
    """The redis-server (or valkey-server) binary the tests run: ``LEASEQ_REDIS_SERVER``
    or the one on PATH. Raises RuntimeError if there is none."""
    chosen = os.environ.get("LEASEQ_REDIS_SERVER", "")
    exe = shutil.which(chosen or "redis-server")
    if exe is None:
        if chosen:
            raise RuntimeError(f"LEASEQ_REDIS_SERVER={chosen!r} is not an executable")
        raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
    return exe


def cli_exe() -> str | None:
    """The CLI matching :func:`server_exe` (``LEASEQ_REDIS_CLI``, else a
    redis-cli or valkey-cli beside the server, else redis-cli on PATH)."""
    chosen = os.environ.get("LEASEQ_REDIS_CLI", "")
    if chosen:
        return shutil.which(chosen)
    try:
        here = os.path.dirname(server_exe())
    except RuntimeError:
        return None
    for name in ("redis-cli", "valkey-cli"):
        beside = os.path.join(here, name)
        if os.access(beside, os.X_OK):
            return beside
    return shutil.which("redis-cli")


def server_version() -> str:
    """``redis_version`` as the binary reports it, e.g. 'Redis 7.0.15' or 'Valkey 8.1.8'."""
    out = subprocess.run(
        [server_exe(), "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    name, _, rest = out.partition(" server v=")
    return f"{name} {rest.split()[0]}" if rest else out.strip()


def backends() -> list[str]:
    """The backends two-backend tests run on: ``LEASEQ_BACKENDS`` (comma-separated)."""
    chosen = [b.strip() for b in os.environ.get("LEASEQ_BACKENDS", "fake,real").split(",")]
    unknown = set(chosen) - {"fake", "real"}
    if unknown or not chosen:
        raise pytest.UsageError(f"LEASEQ_BACKENDS: unknown backend(s) {sorted(unknown)}")
    return chosen


class RedisServer:
    """A redis-server process on 127.0.0.1 and a free port, in a temp dir."""

    def __init__(self, *extra: str) -> None:
        exe = server_exe()
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


@pytest.fixture
def rr(redis_server: RedisServer) -> Iterator[Any]:
    """A client of the session's real server, emptied first (for tests that
    start real worker processes, which need a server they can reach)."""
    import redis

    client = redis.Redis(port=redis_server.port)
    client.flushall()
    yield client
    client.close()


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


def text_client(r: Any) -> Any:
    """A client with ``decode_responses=True`` on the same store (fake or real) as ``r``."""
    kwargs = r.connection_pool.connection_kwargs
    if isinstance(r, fakeredis.FakeRedis):
        return fakeredis.FakeRedis(server=kwargs["server"], decode_responses=True)
    return redis.Redis(host=kwargs["host"], port=kwargs["port"], decode_responses=True)


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


def pytest_configure(config: pytest.Config) -> None:
    """``LEASEQ_EXPECT_REDIS_PY=5.0.1`` (run.sh's oldest pass): refuse to run on any other."""
    expected = os.environ.get("LEASEQ_EXPECT_REDIS_PY")
    if expected and redis.__version__ != expected:
        raise pytest.UsageError(f"this pass wants redis-py {expected}, found {redis.__version__}")


def pytest_report_header(config: pytest.Config) -> str:
    try:
        server = f"{server_version()} ({server_exe()})"
    except RuntimeError as exc:
        server = str(exc)
    return (
        f"leaseq test pass: redis-py {redis.__version__}, fakeredis {fakeredis.__version__}, "
        f"server {server}, backends {','.join(backends())}"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``LEASEQ_BACKENDS=real`` drops the fakeredis copies (any fixture parameter
    ``fake``: ``backend`` here, ``store`` in test_sharded, ``cli`` in test_cli).

    With ``LEASEQ_LIST_SUITE=<file>`` it first writes, one JSON line per
    collected item, which test function it runs (for the shared-suite case
    of test_aio, the sync function it re-runs) and whether it uses ``q``:
    tests/test_aio.py checks from that list that no queue case is dropped.
    """
    listing = os.environ.get("LEASEQ_LIST_SUITE")
    if listing:
        with open(listing, "w") as out:
            for item in items:
                func = getattr(item, "function", None)
                spec = getattr(item, "callspec", None)
                check = spec.params.get("check") if spec is not None else None
                row = {
                    "nodeid": item.nodeid,
                    "func": f"{func.__module__}.{func.__name__}" if func else None,
                    "check": f"{check.__module__}.{check.__name__}" if callable(check) else None,
                    "uses_q": "q" in getattr(item, "fixturenames", ()),
                }
                out.write(json.dumps(row) + "\n")
    if "fake" in backends():
        return
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        is_fake = spec is not None and any(
            name in ("backend", "store", "cli") and value == "fake"
            for name, value in spec.params.items()
        )
        (drop if is_fake else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which nothing passed (all skipped or deselected) is a failure."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or session.config.option.collectonly:
        return
    if exitstatus == pytest.ExitCode.OK and not reporter.stats.get("passed"):
        reporter.write_line("leaseq: no test passed in this run: failing it", red=True)
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


def async_client(r: Any) -> Any:
    """A redis.asyncio client on the same server (fake or real) as the sync ``r``."""
    kwargs = r.connection_pool.connection_kwargs
    if isinstance(r, fakeredis.FakeRedis):
        return fakeredis.FakeAsyncRedis(server=kwargs["server"])
    return aioredis.Redis(host=kwargs["host"], port=kwargs["port"])
