"""Every batch API and operator loop at 10,000 jobs, on a real redis-server,
whose Lua 5.1 cannot unpack more than about 8,000 values (fakeredis's Lua
5.4 can, so only the real server shows "too many results to unpack").

claim_many(4000) must not fail after ZPOPMIN and the row writes have run,
which would leave thousands of rows 'active' in no index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import leaseq
from leaseq.store.claim import claim_call
from tests.support.servers import RedisServer, wait_until

N = 10_000


@pytest.fixture
def rq(redis_server: RedisServer) -> Iterator[Any]:
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    yield client
    client.close()


def _claim_all(q: leaseq.Queue, ttl: float) -> list[leaseq.Lease]:
    leases: list[leaseq.Lease] = []
    while True:
        got = q.claim_many(N, ttl=ttl)
        assert len(got) <= 1000, "one claim call leases at most CLAIM_LIMIT"
        if not got:
            return leases
        leases += got


def test_the_claim_script_itself_caps_a_huge_count(rq: Any) -> None:
    q = leaseq.Queue("raw", redis=rq)
    q.enqueue_many(range(5000))
    call = claim_call(q._core, 1, 30.0, None)
    args = list(call.args)
    args[1] = 5000  # what claim_many(5000) sent before the builder capped it
    claimed = q._run(dataclasses.replace(call, args=args))
    # 1000 at most; fewer (16 at least) when the call stops at its time budget.
    got = len(claimed.leases)
    assert 16 <= got <= 1000 and (got == 1000 or claimed.cut)
    stats = q.stats()
    assert (stats.active, stats.pending) == (got, 5000 - got)
    assert rq.zcard(q.keys.active) == got  # every leased row is indexed


def test_batch_apis_at_ten_thousand_jobs(rq: Any) -> None:
    q = leaseq.Queue("big", redis=rq, keep_succeeded=600.0, keep_succeeded_count=None)
    ids = q.enqueue_many({"i": i} for i in range(N))
    assert len(set(ids)) == N and q.stats().pending == N
    leases = _claim_all(q, ttl=600.0)
    assert sorted(lease.id for lease in leases) == sorted(ids)
    stats = q.stats()
    assert (stats.active, stats.pending, rq.zcard(q.keys.active)) == (N, 0, N)
    extended = q.extend_many(leases, ttl=900.0)
    assert all(isinstance(lease, leaseq.Lease) for lease in extended)
    assert q.complete_many(extended, results=list(range(N))) == []  # type: ignore[arg-type]
    stats = q.stats()
    assert (stats.active, stats.succeeded, stats.totals["succeeded"]) == (0, N, N)
    assert q.purge("succeeded") == N
    assert rq.zcard(q.keys.succeeded) == 0 and not rq.keys(q.keys.job("*"))


def test_operator_loops_at_ten_thousand_jobs(rq: Any) -> None:
    q = leaseq.Queue("ops", redis=rq, max_attempts=1)
    q.enqueue_many(range(N))
    leases = _claim_all(q, ttl=2.0)
    assert len(leases) == N
    last = max(lease.deadline for lease in leases)
    wait_until(lambda: q.stats().server_time > last, timeout=30, what="every lease to run out")
    assert q.stats().expired == N
    requeued, died = q.reap()
    assert (requeued, died) == (0, N)
    stats = q.stats()
    assert (stats.dead, stats.active, stats.expired) == (N, 0, 0)
    found = q.find("dead", text="expired", limit=N)  # every row read, in short calls
    assert len(found) == N and {j.state for j in found} == {leaseq.State.DEAD}
    assert q.retry_all_dead(attempts=1) == N
    assert q.stats().pending == N and rq.zcard(q.keys.dead) == 0
    assert q.purge("pending") == N
    stats = q.stats()
    assert (stats.pending, stats.dead) == (0, 0) and not rq.keys(q.keys.job("*"))
