"""Fixtures of the worker tests: every worker driver, and real ``leaseq worker`` processes.

With ``LEASEQ_LIST_DRIVERS=<file>``, collection also writes one JSON line per
worker case it collects on a driver (the test function and the driver): for
tests/worker/test_drivers.py, which checks that no case is left off a driver.
"""

from __future__ import annotations

import json
import os
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


DRIVER_FIXTURES = ("driver", "live_driver")
"""The fixtures that run a case on every driver."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listing = os.environ.get("LEASEQ_LIST_DRIVERS")
    if not listing:
        return
    with open(listing, "w") as out:
        for item in items:
            spec = getattr(item, "callspec", None)
            func = getattr(item, "function", None)
            if spec is None or func is None:
                continue
            for name in DRIVER_FIXTURES:
                if name in spec.params:
                    row = {
                        "func": f"{func.__module__}.{func.__name__}",
                        "driver": spec.params[name],
                    }
                    out.write(json.dumps(row) + "\n")
