"""The two backends of the behaviour suite (no tests in here): which ones
this pass runs (``LEASEQ_BACKENDS``), the ``Clock`` that moves time on either,
and clients on the same store (fake or real) as the sync ``r``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from typing import Any

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis

from tests.support.servers import wait_until


def backends() -> list[str]:
    """The backends two-backend tests run on: ``LEASEQ_BACKENDS`` (comma-separated)."""
    chosen = [b.strip() for b in os.environ.get("LEASEQ_BACKENDS", "fake,real").split(",")]
    unknown = set(chosen) - {"fake", "real"}
    if unknown or not chosen:
        raise pytest.UsageError(f"LEASEQ_BACKENDS: unknown backend(s) {sorted(unknown)}")
    return chosen


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


def async_client(r: Any) -> Any:
    """A redis.asyncio client on the same server (fake or real) as the sync ``r``."""
    kwargs = r.connection_pool.connection_kwargs
    if isinstance(r, fakeredis.FakeRedis):
        return fakeredis.FakeAsyncRedis(server=kwargs["server"])
    return aioredis.Redis(host=kwargs["host"], port=kwargs["port"])


def run(loop: asyncio.AbstractEventLoop, coro: Awaitable[Any]) -> Any:
    return loop.run_until_complete(coro)
