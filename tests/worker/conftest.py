"""Fixtures of the worker tests: every worker driver, and real ``leaseq worker`` processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.drivers import DRIVERS, Driver
from tests.support.servers import RedisServer
from tests.support.workers import Workers


@pytest.fixture
def workers(redis_server: RedisServer, rr: Any) -> Iterator[Workers]:
    w = Workers(redis_server.url)
    yield w
    w.close()


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest, r: Any) -> Iterator[Driver]:
    """Each worker driver on the test's store (fakeredis and a real server, as ``r``)."""
    d = Driver(str(request.param), r)
    yield d
    d.close()


@pytest.fixture(params=DRIVERS)
def live_driver(request: pytest.FixtureRequest, rr: Any) -> Iterator[Driver]:
    """Each worker driver on the session's real server only (real time: heartbeats,
    lease loss, cancels)."""
    d = Driver(str(request.param), rr)
    yield d
    d.close()
