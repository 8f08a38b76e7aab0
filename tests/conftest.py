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

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis

import leaseq
import leaseq.aio
from tests.support.backends import Clock, backends
from tests.support.cli import Cli
from tests.support.security import COMMANDS, PASSWORD
from tests.support.servers import RedisServer, server_exe, server_version


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


# -- the CLI in-process, the asyncio queue, the least-privilege ACL user ---------------


@pytest.fixture(params=["fake", "real"])
def cli(capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> Cli:
    """The CLI in-process on memory:// (fakeredis) or on the session's real server."""
    if request.param == "fake":
        return Cli(capsys)
    server: RedisServer = request.getfixturevalue("redis_server")
    import redis

    redis.Redis(port=server.port).flushall()
    return Cli(capsys, server.url)


@pytest.fixture
def memory_cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """The CLI in-process on memory:// only."""
    return Cli(capsys)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def live(redis_server: Any, loop: asyncio.AbstractEventLoop) -> Iterator[leaseq.aio.Queue]:
    """An aio queue on the real server, for the worker tests: they run on real
    time (heartbeats, grace), and fakeredis cannot cancel a blocked BLPOP cleanly."""
    sync = redis.Redis(port=redis_server.port)
    sync.flushall()
    sync.close()
    client = aioredis.Redis(port=redis_server.port)
    yield leaseq.aio.Queue("jobs", redis=client, backoff=0.0, max_attempts=2)
    loop.run_until_complete(client.aclose())


@pytest.fixture
def acl_server() -> Iterator[RedisServer]:
    server = RedisServer()
    admin = redis.Redis(port=server.port)
    admin.execute_command(
        "ACL", "SETUSER", "leaseq", "on", f">{PASSWORD}", "resetkeys", "~leaseq:*",
        "resetchannels", "-@all", *(f"+{c}" for c in COMMANDS),
    )  # fmt: skip
    admin.close()
    yield server
    server.stop()


# -- the pass: versions, LEASEQ_BACKENDS, LEASEQ_LIST_SUITE, nothing passed ------------


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
    ``fake``: ``backend`` here, ``store`` in tests/transport/test_sharded.py, ``cli`` here).

    With ``LEASEQ_LIST_SUITE=<file>`` it first writes, one JSON line per
    collected item, which test function it runs (for the shared-suite case
    of tests/transport/test_aio.py, the sync function it re-runs) and whether
    it uses ``q``: that module checks from that list that no queue case is dropped.
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
