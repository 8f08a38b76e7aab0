"""dramatiq's side of ``bench.vs_peers``: its Redis broker (acks), one ``INCR`` per job.

``BENCH_REDIS_URL`` names the server. Needs ``pip install dramatiq[redis]``
(bench only; ``bench.vs_peers --peers-venv`` may point at a venv of its own).
"""

from __future__ import annotations

import os

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

COUNTER = "bench:done"
URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
broker = RedisBroker(url=URL)
dramatiq.set_broker(broker)
_client = redis.Redis.from_url(URL)


@dramatiq.actor
def incr() -> None:
    """Count the job done."""
    _client.incr(COUNTER)


def enqueue(n: int) -> None:
    for _ in range(n):
        incr.send()
