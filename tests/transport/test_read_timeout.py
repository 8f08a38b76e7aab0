"""Blocking waits stay under the client's real read timeout.

redis-py 8 gives every connection a 5 s socket timeout by default, but a
client from ``from_url`` keeps it out of the pool's ``connection_kwargs``
(the connection class supplies it; a copy sits in ``orig_socket_timeout``).
A BLPOP longer than that would time out and look like a dead server. These
tests use real clients whose connection class has a short default, exactly
the redis-py 8 shape, on a real server.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
import redis.asyncio.connection as aconn

import leaseq
import leaseq.aio
from leaseq.transport import client as _redis
from tests.support.servers import RedisServer

SHORT = 0.4


class ShortConnection(redis.Connection):
    def __init__(self, *args: Any, socket_timeout: float | None = SHORT, **kwargs: Any) -> None:
        super().__init__(*args, socket_timeout=socket_timeout, **kwargs)


class AsyncShortConnection(aconn.Connection):
    def __init__(self, *args: Any, socket_timeout: float | None = SHORT, **kwargs: Any) -> None:
        super().__init__(*args, socket_timeout=socket_timeout, **kwargs)


def test_read_timeout_of_each_client_shape() -> None:
    default = _redis._class_default(redis.Connection)  # 5 on redis-py 8, None on 5.x
    expected = float(default) if isinstance(default, (int, float)) else None
    assert _redis.read_timeout(redis.Redis.from_url("redis://127.0.0.1:1/0")) == expected
    assert _redis.read_timeout(aioredis.Redis.from_url("redis://127.0.0.1:1/0")) == expected
    assert _redis.read_timeout(redis.Redis(port=1, socket_timeout=None)) is None
    assert _redis.read_timeout(redis.Redis(port=1, socket_timeout=2)) == 2.0
    assert _redis.read_timeout(redis.Redis.from_url("redis://h:1/0?socket_timeout=1.5")) == 1.5
    short = redis.Redis.from_url("redis://127.0.0.1:1/0", connection_class=ShortConnection)
    assert "socket_timeout" not in short.connection_pool.connection_kwargs
    assert _redis.read_timeout(short) == SHORT
    from redis.asyncio.cluster import RedisCluster

    assert _redis.read_timeout(RedisCluster(host="127.0.0.1", port=1, socket_timeout=0.7)) == 0.7


def test_wake_timeout_keeps_under_the_limit() -> None:
    short = redis.Redis.from_url("redis://127.0.0.1:1/0", connection_class=ShortConnection)
    assert 0.01 <= _redis.wake_timeout(short, 8.0) < SHORT
    if _redis.read_timeout(redis.Redis.from_url("redis://h/0")) == 5.0:  # redis-py 8
        assert _redis.wake_timeout(redis.Redis.from_url("redis://h/0"), 8.0) < 5.0
    assert _redis.wake_timeout(redis.Redis(socket_timeout=None), 8.0) == 8.0


def test_blocking_claim_longer_than_the_read_timeout(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, connection_class=ShortConnection)
    client.flushall()
    q = leaseq.Queue("slow", redis=client)
    started = time.monotonic()
    assert q.claim(block=3 * SHORT) is None  # was ServerUnavailable after SHORT s
    assert time.monotonic() - started >= 3 * SHORT - 0.05
    q.enqueue({"n": 1})
    lease = q.claim(block=3 * SHORT)
    assert lease is not None and lease.payload == {"n": 1}


def test_async_blocking_claim_longer_than_the_read_timeout(redis_server: RedisServer) -> None:
    async def main() -> None:
        client = aioredis.Redis.from_url(redis_server.url, connection_class=AsyncShortConnection)
        await client.flushall()
        q = leaseq.aio.Queue("slow", redis=client)
        started = time.monotonic()
        assert await q.claim(block=3 * SHORT) is None
        assert time.monotonic() - started >= 3 * SHORT - 0.05
        await client.aclose()

    asyncio.run(main())


def test_idle_worker_logs_no_claim_failure(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis.Redis.from_url(redis_server.url, connection_class=ShortConnection)
    client.flushall()
    q = leaseq.Queue("idle", redis=client)
    w = leaseq.Worker(q, lambda lease: None, concurrency=1, handle_signals=False)
    import threading

    t = threading.Thread(target=w.run)
    with caplog.at_level("WARNING", logger="leaseq"):
        t.start()
        time.sleep(4 * SHORT)  # an idle worker: nothing to poll for, only time to pass
        w.stop()
        t.join(10)
    assert not t.is_alive()
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")], caplog.text


def test_blocking_claim_on_a_cluster_client_with_a_short_timeout() -> None:
    from redis.cluster import RedisCluster

    from tests.support.cluster import shared_cluster

    cluster = shared_cluster()
    client = RedisCluster(
        host="127.0.0.1", port=cluster.client().get_default_node().port, socket_timeout=SHORT
    )
    assert _redis.read_timeout(client) == SHORT
    q = leaseq.Queue(f"slow-{time.monotonic_ns()}", redis=client)
    started = time.monotonic()
    assert q.claim(block=3 * SHORT) is None
    assert time.monotonic() - started >= 3 * SHORT - 0.05
    client.close()
