"""A crash must not spend the attempts of prefetched jobs that never reached a
handler, and a job that crashes its worker on every run still dies after a
bounded number of tries.

The scripts first (both backends); spares in both workers (on every driver);
real `leaseq worker` processes killed with SIGKILL on a real server.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import leaseq
import leaseq.aio
from leaseq.work import claims
from tests.support.backends import Clock
from tests.support.drivers import Driver
from tests.support.servers import wait_until
from tests.support.workers import Workers, _exits, _job, _q

MAX_REFUNDS = 5
"""The refund bound in lua/lib/reap_expired.lua (documented in docs/design.md)."""


def _refunds(r: Any, q: leaseq.Queue, job_id: str) -> int:
    return int(r.hget(q.keys.job(job_id), "refunds") or 0)


def test_an_expired_prefetched_lease_is_refunded(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    ids = q.enqueue_many([{"i": i} for i in range(3)], max_attempts=1)
    leases, _ = q.claim_now(3, ttl=clock.lease(30.0), started=1)
    assert [x.id for x in leases] == ids
    clock.past(max(x.deadline for x in leases))
    assert q.reap() == (2, 1)  # the started one is charged, the two prefetched are not
    assert q.stats().totals["refunded"] == 2 and q.stats().totals["expired"] == 3
    started, *prefetched = (_job(q, i) for i in ids)
    assert started.state is leaseq.State.DEAD and started.max_attempts == 1
    for job in prefetched:
        assert job.state is leaseq.State.PENDING
        assert job.attempts == 1 and job.max_attempts == 2  # attempts never goes down
        assert job.last_error is not None and "attempt refunded (1 of" in job.last_error
        assert _refunds(r, q, job.id) == 1
        assert r.hget(q.keys.job(job.id), "prefetched") is None


def test_a_prefetch_mark_goes_with_the_lease_that_ends(q: leaseq.Queue, r: Any) -> None:
    # A finished (or returned) row keeps no trace of how its last lease was
    # taken: the mark is a lease's, and a kept row should not pay for it.
    ids = q.enqueue_many([{"i": i} for i in range(4)], max_attempts=1)
    leases, _ = q.claim_now(4, ttl=30.0, started=0)
    assert all(r.hget(q.keys.job(i), "prefetched") == b"1" for i in ids)
    first, second, third, fourth = leases
    q.complete(first)
    q.fail(second, "boom")  # its last attempt: dead
    q.release(third)
    q.complete_many([fourth])
    assert [r.hget(q.keys.job(i), "prefetched") for i in ids] == [None] * 4
    assert [str(_job(q, i).state) for i in ids] == ["succeeded", "dead", "pending", "succeeded"]


def test_a_heartbeat_that_says_started_makes_a_crash_charge_the_attempt(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    a, b = q.enqueue_many([{}, {}], max_attempts=1)
    leases, _ = q.claim_now(2, ttl=clock.lease(30.0), started=0)
    assert r.hget(q.keys.job(a), "prefetched") == b"1"
    renewed = q.extend_many(leases, ttl=clock.lease(30.0), started=[True, False])
    assert r.hget(q.keys.job(a), "prefetched") is None
    clock.past(max(x.deadline for x in renewed if isinstance(x, leaseq.Lease)))
    assert q.reap() == (1, 1)
    assert _job(q, a).state is leaseq.State.DEAD  # its handler ran: the crash counts
    assert _job(q, b).state is leaseq.State.PENDING and _job(q, b).max_attempts == 2


def test_a_prefetched_leases_cap_counts_from_its_handlers_start(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    # A prefetched lease waits for a slot for most of the cap; once its handler
    # starts it gets the whole cap to run, as a lease claimed for it then would.
    cap = clock.lease(10.0, 0.4)
    capped = leaseq.Queue("capped", redis=r, lease_cap=cap)
    capped.enqueue({})
    (lease,), _ = capped.claim_now(1, ttl=cap, started=0)
    clock.advance(cap * 0.7)
    (lease,) = capped.extend_many([lease], ttl=cap, started=[True])  # it starts now
    assert isinstance(lease, leaseq.Lease)
    started_at = int(r.hget(capped.keys.job(lease.id), "claimed_at"))
    clock.advance(cap * 0.6)  # past its claim + cap; well within its start + cap
    (held,) = capped.extend_many([lease], ttl=cap, started=[True])
    assert isinstance(held, leaseq.Lease)
    # Once only: a second "started" does not move the cap again.
    assert int(r.hget(capped.keys.job(held.id), "claimed_at")) == started_at
    assert round(held.deadline * 1000) == started_at + round(cap * 1000)


def test_a_prefetched_lease_waits_past_the_cap_uncapped_and_unrefunded(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    # Waiting for a slot is no handler's time: a spare lease heartbeated while it
    # waits longer than the whole cap stays held, its refund budget untouched;
    # once it starts, the cap runs from the start and ends it as for any lease.
    cap = clock.lease(2.0, 0.3)
    capped = leaseq.Queue("capped", redis=r, lease_cap=cap)
    job_id = capped.enqueue({}, max_attempts=1)
    (lease,), _ = capped.claim_now(1, ttl=cap, started=0)
    waited = 0.0
    while waited < 3 * cap:  # three caps long, one heartbeat per half cap
        clock.advance(cap / 2)
        waited += cap / 2
        (held,) = capped.extend_many([lease], ttl=cap, started=[False])
        assert isinstance(held, leaseq.Lease), f"capped after waiting {waited:g} s"
        lease = held
    assert _refunds(r, capped, job_id) == 0
    assert r.hget(capped.keys.job(job_id), "prefetched") == b"1"
    (lease,) = capped.extend_many([lease], ttl=cap, started=[True])  # it starts now
    assert isinstance(lease, leaseq.Lease)
    started_at = int(r.hget(capped.keys.job(job_id), "claimed_at"))
    assert round(lease.deadline * 1000) == started_at + round(cap * 1000)
    clock.past(lease.deadline)
    with pytest.raises(leaseq.LeaseCapReached):
        capped.extend(lease, ttl=cap)
    assert capped.reap() == (0, 1)  # it ran: the expiry spends its one attempt
    job = _job(capped, job_id)
    assert job.state is leaseq.State.DEAD and job.max_attempts == 1
    assert _refunds(r, capped, job_id) == 0


def test_plain_claims_are_started_so_a_crash_charges_the_attempt(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    job_id = q.enqueue({}, max_attempts=1)
    lease = q.claim(ttl=clock.lease(30.0))
    assert lease is not None
    assert r.hget(q.keys.job(job_id), "prefetched") is None
    clock.past(lease.deadline)
    assert q.reap() == (0, 1)


def test_refunds_are_bounded_per_job(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    job_id = q.enqueue({}, max_attempts=1)
    for n in range(1, MAX_REFUNDS + 2):
        leases, _ = q.claim_now(1, ttl=clock.lease(30.0), started=0)
        assert [x.attempt for x in leases] == [n]
        clock.past(leases[0].deadline)
        q.reap()
    job = _job(q, job_id)
    # Five crashes refunded, the sixth charged: the job is out of attempts.
    assert job.state is leaseq.State.DEAD and job.attempts == MAX_REFUNDS + 1
    assert job.max_attempts == 1 + MAX_REFUNDS and _refunds(r, q, job_id) == MAX_REFUNDS


def test_a_later_lease_is_not_refunded_for_an_earlier_prefetch(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    job_id = q.enqueue({}, max_attempts=2)
    first, _ = q.claim_now(1, ttl=30.0, started=0)
    q.fail(first[0], "boom", retry_in=0.0)  # attempt 1 prefetched, ran and failed
    second = q.claim(ttl=clock.lease(30.0))  # attempt 2, started at once
    assert second is not None and second.attempt == 2
    clock.past(second.deadline)
    assert q.reap() == (0, 1)
    assert _job(q, job_id).state is leaseq.State.DEAD


def test_a_worker_runs_spares_that_wait_past_the_cap_on_their_first_attempt(
    live_driver: Driver,
) -> None:
    # One handler, three spares, each job 0.45 s: the last spare waits about 1.35 s
    # for the slot, past the 1 s cap, and must still run on the lease it was claimed on.
    q = live_driver.queue("spares", lease_cap=1.0)
    ids = q.enqueue_many([{} for _ in range(4)], max_attempts=1)
    runs: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        runs.append(lease.id)
        time.sleep(0.45)  # the job's work: the spares wait for it

    w = live_driver.worker(handler, queue=q, concurrency=1, prefetch=3, ttl=0.6, reap_interval=0.1)
    w.run(burst=True)
    assert sorted(runs) == sorted(ids)
    for job_id in ids:
        job = _job(q, job_id)
        assert job.state is leaseq.State.SUCCEEDED, job.last_error
        assert (job.attempts, job.max_attempts, job.last_error) == (1, 1, None)
    assert q.stats().totals.get("refunded", 0) == 0


def test_a_spare_behind_a_hung_handler_is_not_held_forever(live_driver: Driver) -> None:
    # The handler of the first job hangs past the cap (its lease is lost, its thread
    # keeps the only slot); the spare claimed behind it will never start there. No
    # lease may be held without end (extend.lua does not cap a waiting spare): the
    # worker hands it back once overdue (Prefetch.overdue), and another worker runs it.
    cap = 0.5
    q = live_driver.queue("hung", lease_cap=cap)
    hung_id = q.enqueue("hang", max_attempts=5)
    spare_id = q.enqueue("next", max_attempts=5)
    gate = threading.Event()
    ran: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        if lease.id == hung_id and lease.attempt == 1:
            gate.wait(60.0)
        ran.append(lease.id)

    stuck = live_driver.worker(
        handler, queue=q, concurrency=1, prefetch=1, ttl=0.3, reap_interval=0.1
    )
    healthy = live_driver.worker(handler, queue=q, concurrency=1, ttl=0.3, reap_interval=0.1)
    rr = live_driver.redis
    stuck.start()
    try:
        wait_until(lambda: rr.hget(q.keys.job(spare_id), "prefetched") == b"1", what="the spare")
        healthy.start()
        wait_until(lambda: spare_id in ran, timeout=20 * cap, what="the spare to run")
    finally:
        gate.set()
        stuck.stop()
        healthy.stop()
        stuck.join(10.0)
        if healthy.running:
            healthy.join(10.0)


# -- real worker processes, SIGKILL ----------------------------------------------------


@pytest.mark.slow
def test_sigkill_does_not_charge_prefetched_jobs(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    busy = q.enqueue({"s": 30}, max_attempts=1)
    spare = q.enqueue_many([{"s": 0} for _ in range(5)], max_attempts=1)
    doomed = workers.start("jobs", "sleep", "--concurrency", "1", "--prefetch", "5", "--ttl", "0.5")
    wait_until(lambda: q.stats().active == 6, 10, what="all six leased")
    # The spares are marked by the worker's first heartbeat (ttl / 3) that finds them waiting.
    wait_until(lambda: all(_marked(rr, q, i) for i in spare), 10, what="the spares marked")
    doomed.kill()
    doomed.wait()
    wait_until(lambda: q.reap() and q.stats().active == 0, 10, what="the leases to expire")
    assert _job(q, busy).state is leaseq.State.DEAD  # it was running: the crash counts
    assert all(_job(q, i).state is leaseq.State.PENDING for i in spare)
    workers.start("jobs", "sleep", "--ttl", "5")
    wait_until(lambda: q.stats().succeeded == 5, 15, what="the prefetched jobs to run")
    for job_id in spare:
        job = _job(q, job_id)
        assert job.attempts == 2 and job.result == "slept"
        assert job.last_error is not None and "never reached a handler" in job.last_error


@pytest.mark.slow
def test_a_job_that_kills_its_worker_is_charged_every_time_it_ran(
    rr: Any,
    workers: Workers,
    tmp_path: Path,
) -> None:
    q = _q(rr)
    runs = tmp_path / "runs"
    # Priority 1: each round a filler job (priority 0) is claimed first and
    # started, so the bomb is the prefetched lease: its start is recorded
    # before its handler runs (and kills the worker), so no crash is refunded.
    bomb = q.enqueue({"kill": str(runs)}, id="bomb", max_attempts=2, priority=1)
    for _ in range(20):
        wait_until(lambda: q.reap() is not None and not _active_bomb(q), 10, what="the reap")
        if _job(q, bomb).state is leaseq.State.DEAD:
            break
        # One attempt: the filler dies with its worker (it was running, so that
        # crash is charged) and does not come back ahead of the next round's filler.
        q.enqueue({}, max_attempts=1)
        proc = workers.start(
            "jobs", "kill_self", "--concurrency", "1", "--prefetch", "1", "--ttl", "0.5"
        )
        assert _exits(proc, 15) == -signal.SIGKILL
    job = _job(q, bomb)
    assert job.state is leaseq.State.DEAD
    # Every run was charged: as many runs as attempts, and no refund.
    assert len(runs.read_text().split()) == job.attempts == 2
    assert job.refunds == 0
    assert job.last_error is not None and "no attempts left" in job.last_error
    assert "never reached a handler" not in job.last_error


@pytest.mark.slow
def test_no_job_that_ran_is_refunded_after_a_sigkill(
    rr: Any, workers: Workers, tmp_path: Path
) -> None:
    # Jobs far shorter than a heartbeat (ttl / 3): before, a spare started and
    # then killed with its worker was refunded as if it never ran.
    q = _q(rr)
    log = tmp_path / "runs"
    ids = q.enqueue_many([{"log": str(log), "s": 0.3} for _ in range(40)], max_attempts=3)
    doomed = workers.start("jobs", "logged_sleep", "--concurrency", "2", "--prefetch", "6",
                           "--ttl", "0.9")  # fmt: skip
    # Spares wait up to ~0.9 s: heartbeats (every 0.3 s) mark those still waiting,
    # and a marked spare's start is recorded before it runs.
    wait_until(lambda: log.exists() and len(log.read_text().split()) >= 9, 20, what="runs")
    wait_until(lambda: any(_marked(rr, q, i) for i in ids), 10, what="a spare marked")
    doomed.kill()
    doomed.wait()
    wait_until(lambda: q.reap() is not None and q.stats().active == 0, 20, what="the reaps")
    workers.start("jobs", "logged_sleep", "--concurrency", "4", "--ttl", "6")
    wait_until(lambda: q.stats().succeeded == 40, 30, what="every job to finish")
    runs = Counter(log.read_text().split())
    refunded = [i for i in ids if _job(q, i).refunds]
    assert refunded, "the kill must have left spares that never started"
    for job_id in ids:
        job = _job(q, job_id)
        # Every run was charged: a claim is refunded only if it never ran (a spare
        # claimed since the last heartbeat is not marked yet: charged, unrefunded).
        assert job.refunds <= job.attempts - runs[job_id], (job_id, job, runs[job_id])
        if job.refunds:
            assert "never reached a handler" in str([f.error for f in job.failures])


def _marked(r: Any, q: leaseq.Queue, job_id: str) -> bool:
    """The row carries a spare's mark (``prefetched``)."""
    return r.hget(q.keys.job(job_id), "prefetched") is not None


def _active_bomb(q: leaseq.Queue) -> bool:
    return _job(q, "bomb").state is leaseq.State.ACTIVE


def test_a_sharded_claim_marks_all_but_the_first_started(r: Any, clock: Clock) -> None:
    sq = leaseq.ShardedQueue("sq", shards=3, redis=r)
    sq.enqueue_many([{} for _ in range(9)])
    leases, _ = sq.claim_now(6, ttl=clock.lease(30.0), started=2)
    assert len(leases) == 6

    def marked(lease: leaseq.Lease) -> bool:
        return r.hget(sq.shard_for(lease.id).keys.job(lease.id), "prefetched") is not None

    assert [marked(x) for x in leases] == [False, False, True, True, True, True]
    sq.extend_many(leases, ttl=clock.lease(30.0), started=[False] * 5 + [True])
    assert [marked(x) for x in leases] == [False, False, True, True, True, False]


def test_a_spare_that_waits_too_long_goes_back_for_another_worker(
    live_driver: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One slot, its handler hung (no timeout), three spares behind it. Heartbeats
    # would keep the spares forever; past the spare bound (here the 0.6 s ttl) they
    # go back to pending, unspent, and stay there for another worker.
    monkeypatch.setattr(claims, "SPARE_WAIT_FLOOR", 0.0)
    q = live_driver.queue("spares")
    rr = live_driver.redis
    blocker = q.enqueue({}, id="blocker", max_attempts=1)
    spares = q.enqueue_many([{} for _ in range(3)], max_attempts=1)
    hung, let_go = threading.Event(), threading.Event()
    runs: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        runs.append(lease.id)
        if lease.id == blocker:
            hung.set()
            let_go.wait(30)

    first = live_driver.worker(handler, queue=q, concurrency=1, prefetch=3, ttl=0.6)
    first.start()
    try:
        assert hung.wait(10)
        wait_until(lambda: q.stats().active == 4, 10, what="the spares leased")
        wait_until(lambda: q.stats().pending == 3, 10, what="the spares handed back")
        for job_id in spares:
            job = _job(q, job_id)
            assert job.state is leaseq.State.PENDING
            # The claim's attempt given back by release, not by the crash refunds.
            assert (job.attempts, job.max_attempts) == (1, 2)
            assert _refunds(rr, q, job_id) == 0
        assert q.stats().active == 1  # the worker did not take them again
        second = live_driver.worker(handler, queue=q, concurrency=3, ttl=5.0)
        second.run(burst=True)
        assert second.processed == 3
        assert second.counts["succeeded"] == 3
    finally:
        let_go.set()
        first.stop()
        first.join(10)
    assert sorted(runs) == sorted([blocker, *spares])  # each ran once
    for job_id in [blocker, *spares]:
        assert _job(q, job_id).state is leaseq.State.SUCCEEDED
    assert first.processed == 1
    assert (first.counts["succeeded"], first.counts["released"], first.counts["lost"]) == (
        1,
        3,
        0,
    )
    assert q.stats().totals.get("refunded", 0) == 0


def test_slow_handlers_do_not_claim_and_hand_back_spares_at_every_freed_slot(
    live_driver: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each job takes longer than a spare may wait (the 0.3 s ttl, no floor), so the
    # first spare goes back. Without a hold that lasts, every freed slot claimed a
    # spare again and handed it back (max_attempts +1 each time); now spares stay
    # off while jobs finish this slowly, and every job runs once.
    monkeypatch.setattr(claims, "SPARE_WAIT_FLOOR", 0.0)
    q = live_driver.queue(f"slow-{live_driver.name}")
    ids = q.enqueue_many([{} for _ in range(6)], max_attempts=1)
    runs: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        runs.append(lease.id)
        time.sleep(0.5)  # the slow work itself, not a wait for anything

    live_driver.worker(handler, queue=q, concurrency=1, prefetch=1, ttl=0.3).run(burst=True)
    assert sorted(runs) == sorted(ids)  # each ran once
    handed_back = sum(_job(q, job_id).max_attempts - 1 for job_id in ids)
    assert handed_back <= 1, f"{handed_back} hand-backs of spares"
