"""The short chaos profile: worker processes SIGKILLed at random, zero jobs lost.

The long profile runs by hand (``python -m bench.chaos --jobs 20000 ...``);
its figures are in docs/reliability.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import leaseq
from bench import chaos
from tests.support.servers import RedisServer


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


@pytest.mark.slow
# Enough jobs that the run lasts for several kills every 0.2 s even when the
# workers are fast (300 "once" jobs once ended after 4 kills).
@pytest.mark.parametrize(("mode", "jobs"), [("effects", 600), ("once", 600)])
def test_kill_workers_at_random_and_lose_nothing(server: RedisServer, mode: str, jobs: int) -> None:
    report = chaos.drive(
        server.url, jobs=jobs, workers=4, kill_every=0.2, mode=mode, ttl=0.4, timeout=90.0
    )
    print(report)
    assert report["kills"] >= 5, "the run must actually crash workers"
    assert report["redelivered_jobs"] > 0, "crashes must cause redeliveries"
    assert report["lost"] == 0 and report["unfinished"] == {}
    assert report["succeeded"] + report["dead"] == jobs
    # Only poison jobs die (by their error, or by a kill on their last attempt).
    assert report["dead_but_healthy"] == 0 and report["poison_not_dead"] == 0
    assert report["over_max_attempts"] == 0
    assert report["active_after_reap"] == 0 and report["expired_after_reap"] == 0
    assert report["effects_double"] == 0
    assert report["effects_missing"] == 0
    if mode == "effects":
        assert report["once_misses"] == 0
    assert chaos.ok(report)


def test_chaos_check_counts_trimmed_succeeded_rows_as_succeeded(rr: Any) -> None:
    """A worker that keeps a bounded count of succeeded rows (the CLI's default)
    deletes the oldest: the check counts them as succeeded (the queue's own
    total says how many), not as lost; a row deleted without success stays lost."""
    q = leaseq.Queue(chaos.QUEUE, redis=rr, backoff=0.0, keep_succeeded_count=3)
    ids = q.enqueue_many([{"i": i} for i in range(10)], ids=[f"j{i}" for i in range(10)])
    deliveries, _ = chaos.app_keys(q.name)
    for _ in range(8):
        lease = q.claim(ttl=5.0)
        assert lease is not None
        rr.rpush(deliveries, f"{lease.id}:{lease.attempt}")
        q.complete(lease)
    report = chaos.check(q, rr, ids, "once")
    assert report["succeeded"] == 8 and report["trimmed_succeeded"] == 5
    assert report["lost"] == 0 and report["unfinished"] == {"pending": 2}
    rr.delete(q.keys.job("j9"))  # a pending row vanishing is a loss
    assert chaos.check(q, rr, ids, "once")["lost"] == 1
