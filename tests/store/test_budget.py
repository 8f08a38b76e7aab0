"""Calls that stop at their time budget (lua/lib/over_budget.lua): a claim, a
completion batch or an enqueue batch that has worked ~0.75 ms on the server's
clock stops and says what it left, and the client sends the rest, so no call
holds a shared server long. What users see must not change: every job is
enqueued, claimed and completed once, in order.

On a server whose ``TIME`` stands still inside a script (Valkey 8, fakeredis
under a frozen clock) the budget never runs out and the count bounds alone
apply: then each batch is one call per chunk, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

import leaseq
import leaseq.store.enqueue as enqueue_module
from leaseq.store.enqueue import ENQUEUE_AHEAD, ENQUEUE_CHUNK
from leaseq.store.leases import LEASE_CHUNK
from tests.support.store import index, time_moves_in_a_script


def _evalsha_calls(r: Any) -> int:
    """Script calls so far (0 on fakeredis, which keeps no command stats)."""
    try:
        stats = r.info("commandstats")
    except redis.ResponseError:
        return 0
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_evalsha"))


def _counts_calls(r: Any) -> bool:
    """A real server (it keeps command stats) whose TIME moves inside a script."""
    try:
        r.info("commandstats")
    except redis.ResponseError:
        return False
    return time_moves_in_a_script(r)


def test_a_big_enqueue_many_is_cut_by_time_and_keeps_every_job_in_order(
    q: leaseq.Queue, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Calls of 1,500 jobs (no 0.75 ms budget holds them), three in one pipeline:
    # each stops short and its rest is sent after the next ones have run; the
    # FIFO numbers each reserved up front keep the batch's order all the same.
    monkeypatch.setattr(enqueue_module, "ENQUEUE_CHUNK", 1_500)
    n = 3 * 1_500
    leaseq.Queue("warm", redis=r).enqueue(1)  # the script loaded: no NOSCRIPT below
    before = _evalsha_calls(r)
    ids = q.enqueue_many([{"i": i} for i in range(n)])
    calls = _evalsha_calls(r) - before
    if _counts_calls(r):
        assert calls > 3, "1,500 enqueues fit no 0.75 ms budget: the client sent the rest"
    elif not time_moves_in_a_script(r) and calls:
        assert calls == 3
    assert len(set(ids)) == n and q.stats().pending == n
    assert q.stats().totals["enqueued"] == n
    # FIFO across the cut calls: claimed in the order enqueued.
    claimed = []
    while len(claimed) < n:
        claimed += [lease.id for lease in q.claim_many(1000, ttl=600.0)]
    assert claimed == ids


def test_enqueue_many_pipelines_its_calls_and_keeps_priorities_apart(q: leaseq.Queue) -> None:
    n = ENQUEUE_AHEAD * ENQUEUE_CHUNK + 7  # two pipelines, the second of one call
    low = q.enqueue_many([{"i": i} for i in range(n)], priority=5)
    high = q.enqueue_many([{"i": i} for i in range(n)])
    claimed = []
    while len(claimed) < 2 * n:
        claimed += [lease.id for lease in q.claim_many(1000, ttl=600.0)]
    assert claimed == high + low


def test_a_cut_enqueue_replayed_creates_nothing_twice(q: leaseq.Queue, r: Any) -> None:
    ids = [f"job-{i}" for i in range(1_000)]
    payloads = [{"i": i} for i in range(1_000)]
    assert q.enqueue_many(payloads[:400], ids=ids[:400]) == ids[:400]
    # The whole batch again (a producer retrying after a lost reply): the first
    # 400 exist, the rest are created, each once.
    assert q.enqueue_many(payloads, ids=ids) == ids
    assert q.stats().pending == 1_000 and q.stats().totals["enqueued"] == 1_000
    assert set(index(q, "pending")) == set(ids)


def test_claim_many_goes_on_past_a_cut_claim_and_complete_many_past_a_cut_completion(
    q: leaseq.Queue, r: Any
) -> None:
    ids = q.enqueue_many([{"i": i} for i in range(800)])
    before = _evalsha_calls(r)
    leases = q.claim_many(500, ttl=600.0)
    claims = _evalsha_calls(r) - before
    assert [lease.id for lease in leases] == ids[:500]
    leases += q.claim_many(500, ttl=600.0)
    assert len(leases) == 800 and q.stats().active == 800
    # Heartbeats too: every lease extended, in order, whatever the cuts.
    before = _evalsha_calls(r)
    extended = q.extend_many(leases, ttl=900.0)
    extends = _evalsha_calls(r) - before
    assert [lease.id for lease in extended] == [lease.id for lease in leases]  # type: ignore[union-attr]
    assert all(
        isinstance(new, leaseq.Lease) and new.deadline > old.deadline
        for new, old in zip(extended, leases, strict=True)
    )
    before = _evalsha_calls(r)
    assert q.complete_many(leases, results=[lease.payload["i"] for lease in leases]) == []
    completes = _evalsha_calls(r) - before
    if _counts_calls(r):
        chunks = -(-800 // LEASE_CHUNK)
        assert claims > 1 and extends > chunks and completes > chunks
    stats = q.stats()
    assert (stats.active, stats.succeeded, stats.totals["succeeded"]) == (0, 800, 800)
    assert q.results(ids[:3]) == [0, 1, 2]
    # A stale lease among them is refused alone, wherever a call was cut.
    again = q.complete_many(leases[700:710])
    assert [lost.job_id for lost in again] == ids[700:710]
