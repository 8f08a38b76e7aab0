"""The one job every side of ``bench.guard`` runs: a Redis ``INCR`` per job.

``BENCH_REDIS_URL`` names the server (set by bench/guard.py for the measuring
process and the workers it starts; it imports this file under another name, so
that a revision's own ``bench`` package cannot shadow it). ``handler`` is the
leaseq handler, ``huey`` the huey instance whose consumer runs ``incr``. huey
is a bench-only dependency.
"""

from __future__ import annotations

import os
from typing import Any

import redis

COUNTER = "bench:done"  # bench.guard polls it
_client = redis.Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))


def handler(lease: Any) -> None:
    """leaseq: count the job done."""
    _client.incr(COUNTER)


try:
    from huey import RedisHuey
except ImportError:  # huey is optional: only bench.guard needs it
    huey: Any = None
else:
    huey = RedisHuey("bench", url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))

    @huey.task()  # type: ignore[misc]
    def incr() -> None:
        """huey: count the job done."""
        _client.incr(COUNTER)
