"""taskiq-redis's side of ``bench.vs_peers``: the acking stream broker, one ``INCR`` per job.

``BENCH_REDIS_URL`` names the server. Needs ``pip install taskiq-redis``
(bench only; ``bench.vs_peers --peers-venv`` may point at a venv of its own).
"""

from __future__ import annotations

import os

import redis
from taskiq_redis import RedisStreamBroker

COUNTER = "bench:done"
URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
broker = RedisStreamBroker(URL)
_client = redis.Redis.from_url(URL)


@broker.task
async def incr() -> None:
    """Count the job done (a blocking call, as the other sides make)."""
    _client.incr(COUNTER)


async def enqueue(n: int) -> None:
    await broker.startup()
    for _ in range(n):
        await incr.kiq()
    await broker.shutdown()
