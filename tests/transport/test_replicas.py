"""A claim lost to a failover, on real servers: a primary and its replica on
loopback, the replica promoted before it saw a claim, then the primary killed.
The promoted replica hands the job out again at the same attempt; the lost
claim's holder must change nothing there (lua/lib/lease_check.lua, fences).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

import leaseq
from tests.support.servers import RedisServer, replicated, wait_until


@pytest.fixture
def pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    primary, replica = replicated()
    try:
        yield primary, replica
    finally:
        primary.stop()
        replica.stop()


def test_a_claim_the_promoted_replica_never_saw_is_refused_there(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = pair
    p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    old = leaseq.Queue("emails", redis=p)
    old.enqueue({"to": "a@example.com"}, id="job")
    wait_until(lambda: r.exists("leaseq:{emails}:job:job") == 1, 10, what="the replica to sync")
    r.replicaof("no", "one")  # promoted: the link is cut before the claim
    lost = old.claim(ttl=60.0)
    assert lost is not None and lost.attempt == 1
    primary.kill()
    new = leaseq.Queue("emails", redis=r)
    fresh = new.claim(ttl=60.0)
    assert fresh is not None and fresh.attempt == lost.attempt  # the same attempt again
    for stale in (
        lambda: new.extend(lost, ttl=60.0),
        lambda: new.complete(lost, result="stale"),
        lambda: new.fail(lost, "stale"),
        lambda: new.release(lost),
        lambda: new.record_step(lost, "charge", 1),
        lambda: new.once(lost, "charge"),
    ):
        with pytest.raises(leaseq.LeaseLost) as info:
            stale()
        assert info.value.state == "active" and info.value.attempts == "1"
    new.complete(fresh, result="mine")
    job = new.get("job")
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.result == "mine"
    assert job.steps == {} and job.once == {}
    p.close()
    r.close()
