"""Waiting for jobs and watching them run: wait / wait_many (a job finished
before, one finishing while waited for, a timeout, a job deleted meanwhile,
10,000 ids in few round trips, sharded) and the progress a running job
reports under its lease. What a waiter holds against the count bound, and
GONE told from None: tests/store/test_results.py.

The cases that return at once run again on ``leaseq.aio.Queue``
(tests/transport/test_aio.py); those that block until a timeout or another
thread are left out there (its fake backend freezes the clock, under which
no blocking wait times out), and their aio twins are written out here on a
real server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis

import leaseq
import leaseq.aio
from tests.support.servers import RedisServer

# -- wait and wait_many ----------------------------------------------------------------


def test_wait_returns_at_once_for_a_job_finished_before(q: leaseq.Queue) -> None:
    q.enqueue({"n": 1}, id="j")
    lease = q.claim()
    assert lease is not None
    q.complete(lease, result={"ok": 1})
    started = time.monotonic()
    job = q.wait("j", timeout=5.0)
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.result == {"ok": 1}
    assert time.monotonic() - started < 1.0


def test_wait_of_an_unknown_or_expired_job_raises(q: leaseq.Queue) -> None:
    with pytest.raises(leaseq.JobNotFound):
        q.wait("never", timeout=0.1)
    with pytest.raises(leaseq.InvalidName):
        q.wait("bad id", timeout=0.1)
    with pytest.raises(leaseq.InvalidArgument):
        q.wait_many(["never"], timeout=-1.0)


def test_wait_sees_a_reap_to_dead(q: leaseq.Queue, clock: Any) -> None:
    q.enqueue({}, id="crash", max_attempts=1)
    assert q.claim(ttl=1.0) is not None
    clock.advance(2.0)
    assert q.reap() == (0, 1)
    job = q.wait("crash", timeout=1.0)
    assert job is not None and job.state is leaseq.State.DEAD


class _Counting(redis.Redis):
    """A client that counts round trips: commands, and pipelines as one."""

    trips = 0
    scripts = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.trips += 1
        self.scripts += str(args[0]).upper() == "EVALSHA"
        return super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        execute = pipe.execute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.trips += 1
            return execute(*args, **kwargs)

        pipe.execute = counted  # type: ignore[method-assign]
        return pipe


def test_wait_many_on_10000_ids_takes_few_round_trips(redis_server: RedisServer) -> None:
    client = _Counting(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("batch", redis=client)
    ids = q.enqueue_many([{"i": i} for i in range(10_000)], ids=[f"j{i}" for i in range(10_000)])
    while leases := q.claim_many(1000):
        q.complete_many(leases, [lease.payload["i"] for lease in leases])
    q.wait_many(ids[:1], timeout=0.0)  # hold_results.lua loaded
    before, held = client.trips, client.scripts
    jobs = q.wait_many(ids, timeout=5.0)
    holds = client.scripts - held  # the hold calls: ~300 ids each here, never one per id
    assert 10 <= holds <= 10_000 // 32
    assert client.trips - before - holds <= 11  # XREVRANGE, ten pipelines of 1,000 rows
    assert [j.result if j else None for j in jobs] == list(range(10_000))
    client.close()


def test_wait_times_out_with_none(q: leaseq.Queue) -> None:
    q.enqueue({}, id="slow")
    started = time.monotonic()
    assert q.wait("slow", timeout=0.3) is None
    assert 0.25 <= time.monotonic() - started < 3.0


def test_wait_many_in_order_with_every_finished_state(q: leaseq.Queue) -> None:
    q.enqueue_many([{}, {}, {}, {}], ids=["ok", "bad", "gone", "open"], max_attempts=1)
    assert q.cancel("gone")
    leases = {lease.id: lease for lease in q.claim_many(2)}
    q.complete(leases["ok"], result=7)
    q.fail(leases["bad"], "boom")
    jobs = q.wait_many(["open", "ok", "bad", "gone", "ok"], timeout=0.2)
    assert jobs[0] is None
    states = [j.state if j else None for j in jobs[1:]]
    S = leaseq.State
    assert states == [S.SUCCEEDED, S.DEAD, S.CANCELLED, S.SUCCEEDED]


def test_wait_wakes_when_the_job_finishes(q: leaseq.Queue) -> None:
    ids = q.enqueue_many([{"i": i} for i in range(3)])
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait_many(ids, timeout=20.0)))
    waiter.start()
    time.sleep(0.3)  # let it subscribe; the check after subscribing covers a late start
    started = time.monotonic()
    for lease in q.claim_many(3):
        q.complete(lease, result=lease.payload["i"])
    waiter.join(10.0)
    assert not waiter.is_alive()
    assert [j.result for j in got[0]] == [0, 1, 2]
    assert time.monotonic() - started < 5.0  # woken by the signal, not the timeout


def test_a_big_batch_signals_in_entries_of_at_most_a_hundred_ids(q: leaseq.Queue, r: Any) -> None:
    # The done stream is bounded in entries: an entry per batch would let a
    # busy worker's complete_many fill it with millions of ids.
    ids = q.enqueue_many([{"i": i} for i in range(1_000)])
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait_many(ids, timeout=20.0)))
    waiter.start()
    leases = q.claim_many(1_000)
    assert q.complete_many(leases) == []
    waiter.join(15.0)
    assert not waiter.is_alive() and all(j.state is leaseq.State.SUCCEEDED for j in got[0])
    entries = r.xrange(q.keys.done)
    signalled = [i for _, fields in entries for i in fields[b"ids"].decode().split()]
    assert sorted(signalled) == sorted(ids)
    assert all(len(fields[b"ids"].split()) <= 100 for _, fields in entries)
    assert len(entries) >= 10  # (more when a call stopped at its time budget)


@pytest.mark.parametrize("how", ["delete", "purge"])
def test_a_job_deleted_while_waited_for_is_gone_at_once(q: leaseq.Queue, how: str) -> None:
    # delete and purge signal the done stream: the waiter reads the row, finds
    # it gone and says so now (GONE in its place), not at its 20 s timeout.
    ids = q.enqueue_many([{}, {}], ids=["w1", "w2"])
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait_many(ids, timeout=20.0)))
    waiter.start()
    time.sleep(0.3)  # let it subscribe (a late start finds the row gone anyway)
    started = time.monotonic()
    if how == "delete":
        q.delete("w1")
        q.complete(q.claim() or pytest.fail("w2 is pending"), result=None)
    else:
        assert q.purge("pending") == 2
    waiter.join(10.0)
    assert not waiter.is_alive() and time.monotonic() - started < 5.0
    assert got[0][0] is leaseq.GONE
    if how == "delete":  # a None result is a Job, not GONE
        assert got[0][1].state is leaseq.State.SUCCEEDED and got[0][1].result is None
    else:
        assert got[0][1] is leaseq.GONE


def test_aio_wait_wakes_and_times_out(
    live: leaseq.aio.Queue,
    loop: asyncio.AbstractEventLoop,
) -> None:
    async def scenario() -> tuple[list[leaseq.Job | None], float, leaseq.Job | None, float]:
        ids = await live.enqueue_many([{"i": i} for i in range(3)])
        open_id = await live.enqueue({})
        waiter = asyncio.ensure_future(live.wait_many(ids, timeout=20.0))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        leases = await live.claim_many(3)
        await live.complete_many(leases, [lease.payload["i"] for lease in leases])
        jobs = await waiter
        woke = time.monotonic() - started
        started = time.monotonic()
        none = await live.wait(open_id, timeout=0.3)
        return jobs, woke, none, time.monotonic() - started

    jobs, woke, none, waited = loop.run_until_complete(scenario())
    assert [j.result if j else None for j in jobs] == [0, 1, 2] and woke < 5.0
    assert none is None and 0.25 <= waited < 3.0


def test_wait_many_of_a_string_is_a_bad_argument(q: leaseq.Queue) -> None:
    q.enqueue({}, id="a")
    for bad in ("abc", b"abc", 5):
        with pytest.raises(leaseq.InvalidArgument, match="list of job ids"):
            q.wait_many(bad, timeout=0.1)  # type: ignore[arg-type]


def test_sharded_wait_many() -> None:
    sq = leaseq.ShardedQueue.from_url("memory://jobs-sharded", "batch", shards=3)
    ids = sq.enqueue_many([{"i": i} for i in range(30)])
    while leases := sq.claim_many(10):
        for lease in leases:
            sq.complete(lease, result=lease.payload["i"])
    assert [j.result if j else None for j in sq.wait_many(ids, timeout=1.0)] == list(range(30))
    one = sq.wait(ids[5], timeout=1.0)
    assert one is not None and one.result == 5


# -- progress --------------------------------------------------------------------------


def test_progress_is_stored_under_the_lease(q: leaseq.Queue, clock: Any) -> None:
    q.enqueue({}, id="p")
    lease = q.claim(ttl=1.0)
    assert lease is not None
    q.progress(lease, {"done": 3, "of": 10})
    q.progress(lease, {"done": 4, "of": 10})
    job = q.get("p")
    assert job is not None and job.progress == {"done": 4, "of": 10}
    clock.advance(2.0)
    q.reap()
    again = q.claim(ttl=5.0)
    assert again is not None and again.attempt == 2
    with pytest.raises(leaseq.LeaseLost):
        q.progress(lease, 99)  # the stale lease writes nothing
    job = q.get("p")
    assert job is not None and job.progress == {"done": 4, "of": 10}


def test_bad_progress_is_refused_and_writes_nothing(q: leaseq.Queue) -> None:
    q.enqueue({}, id="p")
    lease = q.claim()
    assert lease is not None
    for bad in (float("nan"), {1, 2}, object()):
        with pytest.raises(leaseq.InvalidPayload):
            q.progress(lease, bad)
    with pytest.raises(leaseq.PayloadTooLarge):
        q.progress(lease, "x" * 5000)
    job = q.get("p")
    assert job is not None and job.progress is None


def test_current_job_progress_in_a_worker(q: leaseq.Queue) -> None:
    seen: list[Any] = []

    def handler(lease: leaseq.Lease) -> str:
        leaseq.current_job().progress({"step": 1})
        job = q.get(lease.id)
        seen.append(job.progress if job else None)
        leaseq.current_job().progress({"step": 2})
        return "ok"

    q.enqueue({}, id="w")
    leaseq.Worker(q, handler, handle_signals=False).run(burst=True)
    job = q.get("w")
    assert seen == [{"step": 1}] and job is not None and job.progress == {"step": 2}


def test_aio_current_job_progress_in_a_thread_handler(
    live: leaseq.aio.Queue,
    loop: asyncio.AbstractEventLoop,
) -> None:
    def handler(lease: leaseq.Lease) -> None:
        leaseq.current_job().progress([1, 2])

    async def scenario() -> leaseq.Job | None:
        await live.enqueue({}, id="t")
        await leaseq.aio.Worker(live, handler, ttl=5.0).run(burst=True)
        return await live.get("t")

    job = loop.run_until_complete(scenario())
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.progress == [1, 2]
