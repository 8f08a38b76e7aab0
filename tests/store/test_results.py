"""Results a producer reads back (docs/events.md, "Waiting for results"):
README's "wait for results" batch pattern past the count bound, a waiter's
hold on its rows (lua/hold_results.lua, which lib/trim_count.lua steps over),
and a row that is gone told from a job that returned None (``leaseq.GONE``),
on the sync, asyncio and sharded queues alike.

The batch cases run on a real server only (10,000+ jobs through a real
worker); the rest on both backends, and the ``q`` cases again on
``leaseq.aio.Queue`` (tests/transport/test_aio.py).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis

import leaseq
import leaseq.aio
from leaseq.store.wait import HOLD_AFTER
from tests.support.backends import async_client, run
from tests.support.servers import RedisServer
from tests.support.store import server_ms


def resize(lease: leaseq.Lease) -> dict[str, str]:
    """README's batch handler."""
    return {"thumb": lease.payload["image"] + ".small.png"}


def _batch(q: leaseq.Queue, n: int) -> list[str]:
    """README's batch: n images, one resize job each, under ids the producer chose."""
    images = [f"{i}.png" for i in range(n)]
    return q.enqueue_many(
        [{"image": i} for i in images], ids=[f"thumb-{i}" for i in images], kind="resize"
    )


def _thumbs(n: int) -> list[dict[str, str]]:
    return [{"thumb": f"{i}.png.small.png"} for i in range(n)]


class _Listening(redis.Redis):
    """A client that says when a waiter first blocks on the done stream (XREAD):
    by then its rows are held."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listening = threading.Event()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if str(args[0]).upper() == "XREAD":
            self.listening.set()
        return super().execute_command(*args, **options)


# -- README's batch pattern past the count bound -------------------------------------


def test_readme_batch_with_the_defaults_reads_back_more_than_ten_thousand(
    redis_server: RedisServer,
) -> None:
    # README's order: enqueue, the worker runs the batch, then the producer
    # waits. Under the old default count bound (10,000) the first 2,000 rows
    # were gone before the wait, which raised JobNotFound for the whole call.
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("thumbs", redis=client)
    n = 12_000
    ids = _batch(q, n)
    leaseq.Worker(q, {"resize": resize}, handle_signals=False).run(burst=True)
    jobs = q.wait_many(ids, timeout=300.0)
    results = [job.result for job in jobs if job and job.state is leaseq.State.SUCCEEDED]
    assert results == _thumbs(n)
    assert q.results(ids[:3]) == _thumbs(3)
    client.close()


def test_a_waited_batch_outlives_a_small_count_bound(redis_server: RedisServer) -> None:
    # The producer waits while a worker runs the batch (README: "usually
    # elsewhere"); 10,000 jobs against a bound of 500. Its rows are held from
    # the start of the wait, so the bound steps over them: every result is
    # read, by wait_many and by a results() right after it.
    client = _Listening(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("thumbs", redis=client, keep_succeeded_count=500)
    n = 10_000
    ids = _batch(q, n)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait_many(ids, timeout=240.0)))
    waiter.start()
    assert client.listening.wait(60.0), "the producer never started waiting"
    leaseq.Worker(q, {"resize": resize}, handle_signals=False).run(burst=True)
    waiter.join(240.0)
    assert not waiter.is_alive()
    jobs = got[0]
    assert [job.result for job in jobs if job and job.state is leaseq.State.SUCCEEDED] == (
        _thumbs(n)
    )
    assert q.results(ids) == _thumbs(n)
    client.close()


# -- gone is not None -----------------------------------------------------------------


def test_a_gone_row_is_told_from_a_none_result(q: leaseq.Queue) -> None:
    q.enqueue_many([{}, {}, {}, {}], ids=["none", "five", "open", "gone"])
    leases = {lease.id: lease for lease in q.claim_many(4)}
    q.release(leases["open"])
    q.complete(leases["none"], result=None)
    q.complete(leases["five"], result=5)
    q.complete(leases["gone"], result="kept until deleted")
    q.delete("gone")
    ids = ["none", "five", "open", "gone", "never"]
    assert q.results(ids) == [None, 5, None, leaseq.GONE, leaseq.GONE]
    # wait_many says which ids are gone instead of failing the whole call.
    jobs = q.wait_many(["none", "five", "gone", "never", "none"], timeout=5.0)
    none, five, gone, never, again = jobs
    assert none and none.state is leaseq.State.SUCCEEDED and none.result is None
    assert five and five.result == 5 and again == none
    assert gone is leaseq.GONE and never is leaseq.GONE
    assert not leaseq.GONE and repr(leaseq.GONE) == "leaseq.GONE"
    assert [j.id for j in jobs if j] == ["none", "five", "none"]
    # wait() is about one job: a gone one is still JobNotFound.
    with pytest.raises(leaseq.JobNotFound):
        q.wait("gone", timeout=1.0)


def test_rows_the_count_bound_trimmed_are_gone_not_none(r: Any) -> None:
    q = leaseq.Queue("bounded", redis=r, keep_succeeded_count=2)
    ids = q.enqueue_many([{"i": i} for i in range(5)], ids=[f"j{i}" for i in range(5)])
    for lease in q.claim_many(5):
        q.complete(lease, result=lease.payload["i"])
    assert q.results(ids) == [leaseq.GONE, leaseq.GONE, leaseq.GONE, 3, 4]
    jobs = q.wait_many(ids, timeout=5.0)
    assert jobs[:3] == [leaseq.GONE] * 3 and [j.result for j in jobs[3:] if j] == [3, 4]


# -- the hold -------------------------------------------------------------------------


def test_a_waiter_holds_its_rows_against_the_count_bound_until_its_hold_ends(r: Any) -> None:
    q = leaseq.Queue("held", redis=r, keep_succeeded_count=2)
    ids = q.enqueue_many([{"i": i} for i in range(5)], ids=[f"h{i}" for i in range(5)])
    before = server_ms(r)
    assert q.wait_many(ids, timeout=0.0) == [None] * 5  # nothing finished yet: held all the same
    held = int(r.hget(q.keys.job("h0"), "waited_until"))
    assert before + HOLD_AFTER * 1000 <= held <= server_ms(r) + HOLD_AFTER * 1000
    for lease in q.claim_many(5):
        q.complete(lease, result=lease.payload["i"])
    assert q.results(ids) == [0, 1, 2, 3, 4]  # the bound of 2 stepped over them
    # Rows nobody waits on are trimmed where the bound reaches them.
    others = q.enqueue_many([{}] * 3, ids=["o0", "o1", "o2"])
    for lease in q.claim_many(3):
        q.complete(lease, result="other")
    assert q.results(others)[0] is leaseq.GONE
    assert q.results(ids) == [0, 1, 2, 3, 4]
    # A shorter wait never cuts a longer hold short (h0 has finished: no wait).
    q.wait_many(ids[:1], timeout=600.0)
    longer = int(r.hget(q.keys.job("h0"), "waited_until"))
    assert longer >= held + 600_000
    q.wait_many(ids[:1], timeout=0.0)
    assert int(r.hget(q.keys.job("h0"), "waited_until")) == longer
    # Once the hold has ended (set back by hand here), the bound catches up.
    for job_id in ids:
        r.hset(q.keys.job(job_id), "waited_until", server_ms(r) - 1)
    q.enqueue({}, id="last")
    lease = q.claim()
    assert lease is not None
    q.complete(lease)
    assert q.results(ids) == [leaseq.GONE] * 5
    assert r.zcard(q.keys.succeeded) == 2


def test_holding_skips_ids_without_a_row_and_writes_none(r: Any) -> None:
    q = leaseq.Queue("held", redis=r)
    assert q.wait_many(["never", "nor-this"], timeout=30.0) == [leaseq.GONE, leaseq.GONE]
    assert r.dbsize() == 0  # no row made for them (the done stream is not made either)


# -- the sharded and asyncio queues ----------------------------------------------------


def test_sharded_and_async_queues_hold_and_report_gone_alike(
    r: Any, loop: asyncio.AbstractEventLoop
) -> None:
    sq = leaseq.ShardedQueue("batch", shards=3, redis=r, keep_succeeded_count=1)
    ids = sq.enqueue_many([{"i": i} for i in range(30)], ids=[f"s{i}" for i in range(30)])
    # The wait holds every shard's rows (a bound of 1 per shard here).
    assert sq.wait_many(ids, timeout=0.0) == [None] * 30
    while leases := sq.claim_many(10):
        for lease in leases:
            sq.complete(lease, result=lease.payload["i"])
    assert sq.results(ids) == list(range(30))
    sq.delete("s0")
    asks = ["s0", "s1", "never"]
    assert sq.results(asks) == [leaseq.GONE, 1, leaseq.GONE]
    jobs = sq.wait_many(asks, timeout=5.0)
    assert jobs[0] is leaseq.GONE and jobs[2] is leaseq.GONE and jobs[1] and jobs[1].result == 1

    aclient = async_client(r)

    async def on_aio() -> tuple[list[Any], list[Any], list[Any]]:
        asq = leaseq.aio.ShardedQueue("batch", shards=3, redis=aclient, keep_succeeded_count=1)
        aq = leaseq.aio.Queue("plain", redis=aclient, keep_succeeded_count=1)
        mine = await aq.enqueue_many([{"i": i} for i in range(3)], ids=["a0", "a1", "a2"])
        await aq.wait_many(mine, timeout=0.0)
        await aq.complete_many(await aq.claim_many(3), [0, 1, 2])
        return (
            await asq.results(asks),
            await asq.wait_many(asks, timeout=5.0),
            await aq.results([*mine, "never"]),
        )

    results, waited, plain = run(loop, on_aio())
    loop.run_until_complete(aclient.aclose())
    assert results == [leaseq.GONE, 1, leaseq.GONE]
    assert waited[0] is leaseq.GONE and waited[1].result == 1 and waited[2] is leaseq.GONE
    assert plain == [0, 1, 2, leaseq.GONE]
