"""Calls that stop at their time budget (lua/lib/over_budget.lua): a claim, a
completion batch or an enqueue batch that has worked ~0.75 ms on the server's
clock stops and says what it left, and the client sends the rest, so no call
holds a shared server long. What users see must not change: every job is
enqueued, claimed and completed once, in order.

On a server whose ``TIME`` stands still inside a script (Valkey 8, fakeredis
under a frozen clock) the server's CPU clock counts instead where the sandbox
keeps ``os.clock`` (lua/lib/elapsed_us.lua); with neither, the count bounds
alone apply: then each batch is one call per chunk, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

import leaseq
import leaseq.store.enqueue as enqueue_module
from leaseq.store.enqueue import ENQUEUE_CHUNK
from leaseq.store.leases import LEASE_CHUNK
from tests.support.store import a_budget_runs_out_in_a_script, index


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
    return a_budget_runs_out_in_a_script(r)


def test_a_big_enqueue_many_is_cut_by_time_and_keeps_every_job_in_order(
    q: leaseq.Queue, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Calls of 1,500 jobs (no 0.75 ms budget holds them): each stops short and
    # its rest goes in pieces; the FIFO numbers each call reserved up front keep
    # the batch's order.
    monkeypatch.setattr(enqueue_module, "ENQUEUE_CHUNK", 1_500)
    n = 3 * 1_500
    leaseq.Queue("warm", redis=r).enqueue(1)  # the script loaded: no NOSCRIPT below
    before = _evalsha_calls(r)
    ids = q.enqueue_many([{"i": i} for i in range(n)])
    calls = _evalsha_calls(r) - before
    if _counts_calls(r):
        assert calls > 3, "1,500 enqueues fit no 0.75 ms budget: the client sent the rest"
    elif not a_budget_runs_out_in_a_script(r) and calls:
        assert calls == 3
    assert len(set(ids)) == n and q.stats().pending == n
    assert q.stats().totals["enqueued"] == n
    # FIFO across the cut calls: claimed in the order enqueued.
    claimed = []
    while len(claimed) < n:
        claimed += [lease.id for lease in q.claim_many(1000, ttl=600.0)]
    assert claimed == ids


def test_enqueue_many_of_many_calls_keeps_priorities_apart(q: leaseq.Queue) -> None:
    n = 8 * ENQUEUE_CHUNK + 7  # nine calls, the last of seven jobs
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


def test_a_waiters_hold_on_3000_rows_is_cut_by_time_and_holds_each_row(
    q: leaseq.Queue, r: Any
) -> None:
    # 1,000 ids a hold call fit no 0.75 ms budget (HMGET + HSET each): each
    # call stops short and the client sends the rest, so every row is held.
    ids = q.enqueue_many([{"i": i} for i in range(3_000)])
    q.wait_many(ids[:1], timeout=0.0)  # the script loaded: no NOSCRIPT below
    before = _evalsha_calls(r)
    assert q.wait_many(ids, timeout=0.0) == [None] * 3_000
    calls = _evalsha_calls(r) - before
    if _counts_calls(r):
        assert calls > 3, "1,000 holds fit no 0.75 ms budget: the client sent the rest"
    elif calls:
        assert calls == 3
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(q.keys.job(job_id), "waited_until")
    assert all(pipe.execute())


def test_enqueue_calls_are_bounded_by_bytes_and_unique_ones_by_a_small_count(
    q: leaseq.Queue, r: Any
) -> None:
    from leaseq.store.enqueue import ENQUEUE_BYTES, UNIQUE_CHUNK, _windows

    # Redis copies a call's whole ARGV before the script runs: big payloads go
    # in windows of at most ENQUEUE_BYTES (one job at least), in order.
    bodies = [b"x" * size for size in (50_000, 50_000, 50_000, 200_000, 10, 10, 70_000)]
    windows = _windows(bodies, ENQUEUE_CHUNK)
    assert windows == [(0, 2), (2, 3), (3, 4), (4, 7)]
    assert all(
        stop - start == 1 or sum(len(b) for b in bodies[start:stop]) <= ENQUEUE_BYTES
        for start, stop in windows
    )
    assert _windows([b"x"] * 600, 256) == [(0, 256), (256, 512), (512, 600)]
    big = [{"i": i, "pad": "x" * 50_000} for i in range(30)]
    ids = q.enqueue_many(big)
    claimed = [lease.id for lease in q.claim_many(100, ttl=60.0)]
    assert claimed == ids
    # A call with uniqueness keys cannot stop at its budget: it is sent few jobs.
    before = _evalsha_calls(r)
    q.enqueue_many([{"u": i} for i in range(100)], unique=leaseq.Unique(lambda p: f"u{p['u']}"))
    if _evalsha_calls(r):
        assert _evalsha_calls(r) - before >= -(-100 // UNIQUE_CHUNK)


def test_a_repeated_id_keeps_its_first_payload_whatever_the_cuts(
    q: leaseq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Calls of 1,500 (cut by time on a real server): the later occurrence of an
    # id must not be written before the rest of the first's cut call.
    monkeypatch.setattr(enqueue_module, "ENQUEUE_CHUNK", 1_500)
    ids = [f"j{i}" for i in range(4_500)]
    ids[3_000] = "j1400"  # late in the first call: past where a cut stops it
    got = q.enqueue_many([{"i": i} for i in range(4_500)], ids=ids)
    assert got == ids
    job = q.get("j1400")
    assert job is not None and job.payload == {"i": 1_400}
    assert q.stats().pending == 4_499
