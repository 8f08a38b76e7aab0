"""Uniqueness keys (``enqueue(unique=leaseq.Unique(...))``, lua/lib/unique_holder.lua,
lua/lib/free_unique.lua): one unfinished holder per key, the key freed by the
script that finishes its holder, throttle windows on the server clock,
keep-last replacement and the successor parked behind a running holder. On
fakeredis and a real server, sync and (through tests/transport/test_aio.py)
async; the concurrent producers race on a real server.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

import leaseq
from tests.support.backends import Clock
from tests.support.store import claim_one, index, row, snapshot

# -- the behaviour, written once (re-run on leaseq.aio.Queue) -------------------


def _rows(q: leaseq.Queue) -> int:
    """Jobs in every state's index."""
    s = q.stats()
    return s.pending + s.scheduled + s.active + s.succeeded + s.dead + s.cancelled


def test_a_duplicate_gets_the_holders_id_and_creates_nothing(q: leaseq.Queue) -> None:
    first = q.enqueue({"n": 1}, unique=leaseq.Unique("sync-user-42"))
    assert q.enqueue({"n": 2}, unique=leaseq.Unique("sync-user-42")) == first
    assert q.enqueue({"n": 3}, id="mine", unique=leaseq.Unique("sync-user-42")) == first
    assert q.get("mine") is None
    assert list(index(q, "pending")) == [first]
    assert row(q, first)["unique_key"] == "sync-user-42"
    job = q.get(first)
    assert job is not None and job.unique_key == "sync-user-42" and job.payload == {"n": 1}
    # Another key, or no key, is another job.
    assert q.enqueue({"n": 4}, unique=leaseq.Unique("sync-user-7")) != first
    assert q.enqueue({"n": 5}) != first
    assert q.stats().pending == 3


def test_an_active_or_retrying_holder_still_holds(q: leaseq.Queue) -> None:
    first = q.enqueue({"n": 1}, unique=leaseq.Unique("k"))
    lease = claim_one(q)
    assert q.enqueue({"n": 2}, unique=leaseq.Unique("k")) == first
    q.fail(lease, "boom", retry_in=5.0)  # scheduled for a retry: unfinished
    assert q.enqueue({"n": 3}, unique=leaseq.Unique("k")) == first
    assert _rows(q) == 1


def _finish(q: leaseq.Queue, how: str, job_id: str) -> None:
    if how == "succeeded":
        q.complete(claim_one(q))
    elif how == "dead":
        q.fail(claim_one(q), "bad", dead=True)
    elif how == "cancelled":
        q.cancel(job_id)
    elif how == "deleted":
        q.delete(job_id)
    else:
        q.purge("pending")


@pytest.mark.parametrize("how", ["succeeded", "dead", "cancelled", "deleted", "purged"])
def test_the_script_that_finishes_the_holder_frees_its_key(q: leaseq.Queue, how: str) -> None:
    first = q.enqueue({"n": 1}, unique=leaseq.Unique("k"))
    _finish(q, how, first)
    assert q.redis.hget(q.keys.unique, "k") is None  # no lock left behind
    second = q.enqueue({"n": 2}, unique=leaseq.Unique("k"))
    assert second != first and q.get(second) is not None
    assert q.enqueue({"n": 3}, unique=leaseq.Unique("k")) == second


def test_a_lease_reaped_to_dead_frees_its_key(q: leaseq.Queue, clock: Clock) -> None:
    first = q.enqueue({"n": 1}, max_attempts=1, unique=leaseq.Unique("k"))
    lease = claim_one(q, ttl=clock.lease(5.0))
    clock.past(lease.deadline)
    assert q.reap() == (0, 1)
    second = q.enqueue({"n": 2}, unique=leaseq.Unique("k"))
    assert second != first


def test_a_key_pointing_at_a_gone_or_finished_row_is_free(q: leaseq.Queue) -> None:
    first = q.enqueue({"n": 1}, unique=leaseq.Unique("k"))
    q.redis.delete(q.keys.job(first))  # hand damage: the row is gone
    second = q.enqueue({"n": 2}, unique=leaseq.Unique("k"))
    assert second != first
    q.redis.hset(q.keys.job(second), "state", "succeeded")  # finished by hand
    third = q.enqueue({"n": 3}, unique=leaseq.Unique("k"))
    assert third not in (first, second)
    q.redis.hset(q.keys.job(third), "unique_key", "other")  # no longer carries it
    assert q.enqueue({"n": 4}, unique=leaseq.Unique("k")) not in (first, second, third)
    q.redis.hset(q.keys.unique, "k", "not a job at all")
    assert q.enqueue({"n": 5}, unique=leaseq.Unique("k")) != "not a job at all"


def test_a_throttle_window_holds_whatever_the_state(q: leaseq.Queue, clock: Clock) -> None:
    period = 60.0 if clock.fake else 0.3
    first = q.enqueue({"n": 1}, unique=leaseq.Unique("k", period=period))
    q.complete(claim_one(q))  # finished, but the window is still open
    assert q.enqueue({"n": 2}, unique=leaseq.Unique("k", period=period)) == first
    if clock.fake:
        clock.advance(period - 1)
        assert q.enqueue({"n": 3}, unique=leaseq.Unique("k", period=period)) == first
    clock.advance(period)
    second = q.enqueue({"n": 4}, unique=leaseq.Unique("k", period=period))
    assert second != first
    assert q.enqueue({"n": 5}, unique=leaseq.Unique("k", period=period)) == second
    # Ended windows are trimmed by later enqueues: the hash does not grow.
    q.enqueue({"n": 6}, unique=leaseq.Unique("gone", period=period))
    clock.advance(period)
    q.enqueue({"n": 7}, unique=leaseq.Unique("other", period=period))
    assert q.redis.hget(q.keys.unique, "gone") is None


def test_a_throttle_window_outlives_a_deleted_row(q: leaseq.Queue, clock: Clock) -> None:
    q = leaseq.Queue("emails", redis=q.redis, keep_succeeded=0.0)
    first = q.enqueue({"n": 1}, unique=leaseq.Unique("k", period=60.0))
    q.complete(claim_one(q))
    assert q.get(first) is None  # kept for 0 s
    assert q.enqueue({"n": 2}, unique=leaseq.Unique("k", period=60.0)) == first


def test_replace_keeps_the_latest_payload_and_restarts_the_delay(
    q: leaseq.Queue, clock: Clock
) -> None:
    keep_last = leaseq.Unique("k", replace=True)
    first = q.enqueue({"v": 1}, delay=10.0, unique=keep_last)
    due = index(q, "scheduled")[first]
    clock.advance(2.0 if clock.fake else 0.05)
    assert q.enqueue({"v": 2}, delay=10.0, unique=keep_last) == first
    job = q.get(first)
    assert job is not None and job.payload == {"v": 2}
    assert index(q, "scheduled")[first] > due  # debounce: the delay starts again
    assert _rows(q) == 1
    # The old payload is in the event stream entry of the replacement.
    entries = q.redis.xrange(q.keys.events)
    edits = [fields for _, fields in entries if b"replaced" in fields]
    assert edits and edits[-1][b"old_payload"] == b'{"v":1}'
    assert edits[-1][b"replaced"] == f"{first}:0".encode()


def test_keep_last_with_an_active_holder_queues_one_successor(q: leaseq.Queue) -> None:
    keep_last = leaseq.Unique("k", replace=True)
    first = q.enqueue({"v": 1}, unique=keep_last)
    lease = claim_one(q)
    second = q.enqueue({"v": 2}, unique=keep_last)
    assert second != first
    assert q.enqueue({"v": 3}, unique=keep_last) == second
    assert q.enqueue({"v": 4}, unique=keep_last) == second
    job = q.get(second)
    assert job is not None and job.payload == {"v": 4} and job.after == first
    assert job.state == leaseq.State.SCHEDULED
    assert q.claim() is None  # the successor waits for its holder
    assert _rows(q) == 2  # one active and one queued
    # Not even run_now lets it run beside its holder (leaseq.testing.drain relies on it).
    before = snapshot(q.redis)
    with pytest.raises(leaseq.JobStateError, match="parked behind") as refused:
        q.run_now(second)
    assert first in str(refused.value) and snapshot(q.redis) == before
    q.complete(lease)
    nxt = claim_one(q)
    assert nxt.id == second and nxt.payload == {"v": 4}
    # Now the successor holds the key: a duplicate queues behind it in turn.
    third = q.enqueue({"v": 5}, unique=keep_last)
    assert third not in (first, second)
    q.fail(nxt, "bad", dead=True)
    assert claim_one(q).id == third


def test_a_cancelled_successor_frees_the_key(q: leaseq.Queue) -> None:
    keep_last = leaseq.Unique("k", replace=True)
    first = q.enqueue({"v": 1}, unique=keep_last)
    lease = claim_one(q)
    second = q.enqueue({"v": 2}, unique=keep_last)
    q.cancel(second)
    q.complete(lease)
    assert q.claim() is None  # the cancelled successor stays cancelled
    assert q.enqueue({"v": 3}, unique=keep_last) not in (first, second)


def test_enqueue_many_takes_a_key_per_item(q: leaseq.Queue) -> None:
    by_user = leaseq.Unique(lambda p: None if p["user"] is None else f"user-{p['user']}")
    ids = q.enqueue_many(
        [{"user": 1}, {"user": 2}, {"user": 1}, {"user": None}, {"user": None}], unique=by_user
    )
    assert ids[0] == ids[2] and len(set(ids)) == 4
    assert q.stats().pending == 4
    assert q.enqueue({"user": 2}, unique=by_user) == ids[1]
    # With replace, the last item of a call wins within the call too.
    keep = leaseq.Unique(lambda p: "same", replace=True)
    same = q.enqueue_many([{"v": 1}, {"v": 2}, {"v": 3}], unique=keep)
    assert len(set(same)) == 1
    job = q.get(same[0])
    assert job is not None and job.payload == {"v": 3}


def test_a_replayed_enqueue_returns_its_own_id(q: leaseq.Queue) -> None:
    first = q.enqueue({"n": 1}, id="a", unique=leaseq.Unique("k"))
    assert q.enqueue({"n": 1}, id="a", unique=leaseq.Unique("k")) == first == "a"


@pytest.mark.parametrize(
    "bad",
    [
        lambda: leaseq.Unique("has space"),
        lambda: leaseq.Unique("{brace}"),
        lambda: leaseq.Unique(lambda p: 42),
        lambda: "a string",
    ],
)
def test_a_bad_key_is_refused_and_writes_nothing(q: leaseq.Queue, bad: Any) -> None:
    q.enqueue({"n": 0}, id="before")
    before = snapshot(q.redis)
    with pytest.raises(leaseq.LeaseqError):
        q.enqueue_many([{"n": 1}, {"n": 2}], unique=bad())
    assert snapshot(q.redis) == before


def test_unique_settings_are_checked_at_construction() -> None:
    for period in (0, -1.0, float("nan"), True, "5"):
        with pytest.raises(leaseq.InvalidArgument, match="period"):
            leaseq.Unique("k", period=period)  # type: ignore[arg-type]
    with pytest.raises(leaseq.InvalidArgument, match="replace"):
        leaseq.Unique("k", replace=1)  # type: ignore[arg-type]
    with pytest.raises(leaseq.InvalidArgument, match="key"):
        leaseq.Unique(42)  # type: ignore[arg-type]


# -- concurrency on a real server -----------------------------------------------


def test_concurrent_producers_of_one_key_make_exactly_one_holder(rr: Any) -> None:
    """8 producers, each with its own connection, enqueue the same key at once
    while a consumer finishes holders as fast as it can: every reply names a
    job that was created, and at no moment are two of them unfinished."""
    port = rr.connection_pool.connection_kwargs["port"]
    queue = leaseq.Queue("race", redis=rr)
    start = threading.Barrier(9)
    replies: list[list[str]] = [[] for _ in range(8)]

    def produce(n: int) -> None:
        pq = leaseq.Queue("race", redis=redis.Redis(port=port))
        start.wait()
        replies[n].append(pq.enqueue({"by": n}, unique=leaseq.Unique("one")))
        start.wait()  # all 8 first enqueues are in before the consumer starts
        for i in range(150):
            replies[n].append(pq.enqueue({"by": n, "i": i}, unique=leaseq.Unique("one")))

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    start.wait()
    start.wait()
    assert len({r[0] for r in replies}) == 1  # exactly one holder of the first round
    assert _rows(queue) == 1
    holders = 0
    while any(t.is_alive() for t in threads):
        stats = queue.stats()
        assert stats.pending + stats.active <= 1
        lease = queue.claim()
        if lease is not None:
            holders += 1
            queue.complete(lease)
    for t in threads:
        t.join()
    seen = {job_id for r in replies for job_id in r}
    # 0 lost, 0 extra: every id a producer got is a job that exists, and
    # every job that exists was handed to some producer.
    stored = {k.decode().rsplit(":", 1)[1] for k in rr.scan_iter(match="leaseq:{race}:job:*")}
    assert seen == stored
    assert _rows(queue) == len(stored)
    assert queue.stats().pending + queue.stats().active <= 1
    assert holders >= 1


def test_concurrent_async_producers_of_one_key_make_exactly_one_holder(rr: Any) -> None:
    """The same race through leaseq.aio: 8 producers, each on its own
    connection, enqueue one key at once; one job is made and all 8 get its id."""
    import asyncio

    import redis.asyncio as aioredis

    import leaseq.aio

    port = rr.connection_pool.connection_kwargs["port"]

    async def race() -> list[str]:
        clients = [aioredis.Redis(port=port) for _ in range(8)]
        queues = [leaseq.aio.Queue("race", redis=c) for c in clients]
        got = await asyncio.gather(
            *(aq.enqueue({"by": n}, unique=leaseq.Unique("one")) for n, aq in enumerate(queues))
        )
        for c in clients:
            await c.aclose()
        return list(got)

    for _ in range(20):
        rr.flushall()
        ids = asyncio.run(race())
        assert len(set(ids)) == 1
        assert _rows(leaseq.Queue("race", redis=rr)) == 1
