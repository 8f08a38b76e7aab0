"""Fixtures of the worker tests: real ``leaseq worker`` processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.servers import RedisServer
from tests.support.workers import Workers


@pytest.fixture
def workers(redis_server: RedisServer, rr: Any) -> Iterator[Workers]:
    w = Workers(redis_server.url)
    yield w
    w.close()
