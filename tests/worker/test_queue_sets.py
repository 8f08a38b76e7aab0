"""One worker over several queues: strict and weighted order, one blocking wait
over every queue's wake list, per-queue pause, the registry row that names
them, both workers, and ``leaseq worker high,default,low``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis

import leaseq
import leaseq.aio
from leaseq.queue_set import QueueSet, parse_queue_spec
from tests.support.cli import Cli
from tests.support.servers import RedisServer, wait_until


def _three(r: Any) -> list[leaseq.Queue]:
    return [leaseq.Queue(name, redis=r, backoff=0.0) for name in ("high", "default", "low")]


def test_strict_order_fills_from_the_first_queue_with_ready_jobs(r: Any) -> None:
    high, default, low = queues = _three(r)
    for q in queues:
        q.enqueue_many([{"q": q.name, "i": i} for i in range(3)])
    both = QueueSet(queues)
    assert both.name == "high,default,low"
    leases, _ = both.claim_now(4)
    assert [lease.queue for lease in leases] == ["high"] * 3 + ["default"]
    high.pause()  # pause stays per queue: the others go on
    high.enqueue({"late": True})
    leases, _ = both.claim_now(10)
    assert Counter(lease.queue for lease in leases) == {"default": 2, "low": 3}
    lost = both.complete_many(leases, [None] * len(leases))
    assert lost == [] and default.stats().succeeded == 2 and low.stats().succeeded == 3


def test_weighted_claims_follow_the_weights_over_ten_thousand_jobs(rr: Any) -> None:
    queues = _three(rr)
    for q in queues:
        q.enqueue_many([{"i": i} for i in range(10_000)])
    weighted = QueueSet(queues, weights=[5, 3, 1])
    assert weighted.name == "high:5,default:3,low:1"
    got: Counter[str] = Counter()
    sizes = itertools.cycle([1, 7, 50, 3, 13])  # a worker's claims vary in size
    while sum(got.values()) < 10_000:
        leases, _ = weighted.claim_now(min(next(sizes), 10_000 - sum(got.values())), ttl=600.0)
        got.update(lease.queue for lease in leases)
    for name, weight in (("high", 5), ("default", 3), ("low", 1)):
        share = got[name] / 10_000
        assert abs(share - weight / 9) <= 0.1 * weight / 9, got
    # Once a queue runs dry its slots pass to the others.
    leases, _ = weighted.claim_now(500, ttl=600.0)
    assert len(leases) == 500


def test_a_flood_on_low_delays_high_by_at_most_one_claim(rr: Any) -> None:
    high, default, low = _three(rr)
    low.enqueue_many([{"i": i} for i in range(40)], ids=[f"low-{i}" for i in range(40)])
    order: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        order.append(lease.id)
        if lease.id == "low-2":
            high.enqueue({}, id="urgent")

    w = leaseq.Worker(
        [high, default, low], handler, concurrency=1, prefetch=0, handle_signals=False
    )
    w.run(burst=True)
    assert order.index("urgent") == order.index("low-2") + 1
    assert len(order) == 41


def test_an_idle_worker_wakes_for_any_of_its_queues_at_once(rr: Any) -> None:
    queues = _three(rr)
    done = threading.Event()
    w = leaseq.Worker(queues, lambda lease: done.set(), concurrency=1, handle_signals=False)
    runner = threading.Thread(target=w.run)
    runner.start()
    try:
        wait_until(
            lambda: any(c.get("cmd") == "blpop" for c in rr.client_list()),
            what="the claimer blocked on the wake lists",
        )
        began = time.monotonic()
        queues[2].enqueue({"last": "queue"})
        assert done.wait(3.0)
        assert time.monotonic() - began < 3.0  # not the 5 s idle cap: the BLPOP heard it
    finally:
        w.stop(now=True)
        runner.join(10.0)


def test_leaseq_workers_shows_the_queues_a_worker_serves(rr: Any) -> None:
    queues = _three(rr)
    queues[0].enqueue({})
    w = leaseq.Worker(queues, lambda lease: None, weights=[5, 3, 1], handle_signals=False)
    seen: list[Any] = []

    def handler(lease: leaseq.Lease) -> None:  # the reporter registers meanwhile
        wait_until(lambda: all(q.workers() for q in queues), what="a row in every registry")
        seen.extend(q.workers() for q in queues)

    w.handler = handler
    w.run(burst=True)
    assert [[row.queue for row in rows] for rows in seen] == [["high:5,default:3,low:1"]] * 3
    assert all(q.workers() == [] for q in queues)  # unregistered on a clean stop


def test_the_asyncio_worker_serves_several_queues(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    other = leaseq.aio.Queue("other", redis=live.redis, backoff=0.0)
    ran: list[str] = []

    async def handler(lease: leaseq.Lease) -> str:
        ran.append(lease.queue)
        return lease.queue

    async def main() -> None:
        await other.enqueue_many([{}] * 3)
        await live.enqueue_many([{}] * 2)
        await leaseq.aio.Worker([live, other], handler, concurrency=1).run(burst=True)
        assert (await other.stats()).succeeded == 3 and (await live.stats()).succeeded == 2

    loop.run_until_complete(main())
    assert ran == ["jobs", "jobs", "other", "other", "other"]


def test_complete_many_over_a_set_names_the_queue_of_each_lost_lease(rr: Any) -> None:
    # One id in two queues, each claimed at attempt 1: a refusal's job id and token
    # fit both leases, its queue (and row) tell which one was lost.
    a, b = (leaseq.Queue(name, redis=rr, backoff=0.0) for name in ("a", "b"))
    for q in (a, b):
        q.enqueue({"q": q.name}, id="order")
    both = QueueSet([a, b])
    leases, _ = both.claim_now(2)
    assert sorted((lease.queue, lease.id, lease.attempt) for lease in leases) == [
        ("a", "order", 1),
        ("b", "order", 1),
    ]
    b.cancel("order")  # b's lease is lost
    lost = both.complete_many(leases, ["done", "done"])
    mine = next(lease for lease in leases if lease.queue == "b")
    assert [(x.job_id, x.token, x.queue, x.incarnation) for x in lost] == [
        ("order", 1, "b", mine.incarnation)
    ]
    assert [x.state for x in lost] == ["cancelled"]
    assert a.get("order").state is leaseq.State.SUCCEEDED  # type: ignore[union-attr]
    with pytest.raises(leaseq.LeaseLost) as info:  # the routed single calls too
        both.fail(mine, "late")
    assert info.value.queue == "b"
    extended = both.extend_many([mine])
    assert isinstance(extended[0], leaseq.LeaseLost) and extended[0].queue == "b"


def test_one_id_in_two_queues_is_two_jobs_to_the_worker(rr: Any) -> None:
    # The same ids in two queues of a set, all running at once, then finishing
    # together (their completions share a batch): each job's outcome is its own.
    a, b = (leaseq.Queue(name, redis=rr, backoff=0.0) for name in ("a", "b"))
    ids = [f"order-{i}" for i in range(20)]
    for q in (a, b):
        q.enqueue_many([{"q": q.name}] * 20, ids=ids)
    gate = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        assert gate.wait(10.0)
        return lease.queue

    w = leaseq.Worker([a, b], handler, concurrency=40, prefetch=0, handle_signals=False)
    runner = threading.Thread(target=w.run, kwargs={"burst": True})
    runner.start()
    try:
        wait_until(lambda: a.stats().active + b.stats().active == 40, what="40 jobs running")
        for job_id in ids[:5]:  # their leases are taken: only these outcomes are refused
            a.cancel(job_id)
        gate.set()
        runner.join(20.0)
        assert not runner.is_alive()
    finally:
        gate.set()
        w.stop(now=True)
        runner.join(10.0)
    sa, sb = a.stats(), b.stats()
    assert (sa.succeeded, sa.cancelled, sa.active) == (15, 5, 0)
    assert (sb.succeeded, sb.active) == (20, 0)
    assert w.counts["succeeded"] == 35 and w.counts["lost"] == 5
    assert {job.result for job in b.ls("succeeded")} == {"b"}


def test_the_asyncio_worker_tells_one_id_in_two_queues_apart(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    other = leaseq.aio.Queue("other", redis=live.redis, backoff=0.0)
    ids = [f"order-{i}" for i in range(20)]

    async def main() -> int:
        gate = asyncio.Event()

        async def handler(lease: leaseq.Lease) -> str:
            await gate.wait()
            return lease.queue

        for q in (live, other):
            await q.enqueue_many([{}] * 20, ids=ids)
        w = leaseq.aio.Worker([live, other], handler, concurrency=40)
        run = asyncio.ensure_future(w.run(burst=True))

        async def running() -> None:
            while (await live.stats()).active + (await other.stats()).active < 40:
                await asyncio.sleep(0.005)

        await asyncio.wait_for(running(), 10.0)
        for job_id in ids[:5]:  # their leases are taken: only these outcomes are refused
            await live.cancel(job_id)
        gate.set()
        return await asyncio.wait_for(run, 20.0)

    processed = loop.run_until_complete(main())
    mine, theirs = (loop.run_until_complete(q.stats()) for q in (live, other))
    assert (mine.succeeded, mine.cancelled, mine.active) == (15, 5, 0)
    assert (theirs.succeeded, theirs.active) == (20, 0)
    assert processed == 35  # the jobs that succeeded, no more, no fewer


def _too_big_for_small(lease: leaseq.Lease) -> Any:
    # Fits the big queue's max_payload_bytes, not the small one's.
    return "x" * 3000 if lease.payload == {"big": True} else lease.payload["i"]


def test_a_result_too_large_for_its_own_queue_dead_letters_that_job_alone(rr: Any) -> None:
    big = leaseq.Queue("big", redis=rr, backoff=0.0)
    small = leaseq.Queue("small", redis=rr, backoff=0.0, max_payload_bytes=1000)
    for q in (big, small):
        q.enqueue_many([{"i": i} for i in range(20)])
        q.enqueue({"big": True}, id="big-result")
    w = leaseq.Worker([big, small], _too_big_for_small, concurrency=8, handle_signals=False)
    w.run(burst=True)
    assert w.counts["succeeded"] == 41 and w.counts["dead"] == 1
    assert (big.stats().succeeded, big.stats().active) == (21, 0)
    assert (small.stats().succeeded, small.stats().dead, small.stats().active) == (20, 1, 0)
    dead = small.get("big-result")
    assert dead is not None and "3002 bytes" in (dead.last_error or "")
    assert big.get("big-result") is not None and big.get("big-result").result == "x" * 3000


def test_the_asyncio_worker_checks_a_result_against_its_own_queue(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    small = leaseq.aio.Queue("small", redis=live.redis, backoff=0.0, max_payload_bytes=1000)

    async def handler(lease: leaseq.Lease) -> Any:
        await asyncio.sleep(0.001)
        return _too_big_for_small(lease)

    async def main() -> int:
        for q in (live, small):
            await q.enqueue_many([{"i": i} for i in range(20)])
            await q.enqueue({"big": True}, id="big-result")
        return await leaseq.aio.Worker([live, small], handler, concurrency=8).run(burst=True)

    processed = loop.run_until_complete(main())
    mine, theirs = (loop.run_until_complete(q.stats()) for q in (live, small))
    assert (mine.succeeded, mine.active) == (21, 0)
    assert (theirs.succeeded, theirs.dead, theirs.active) == (20, 1, 0)
    assert processed == 42


def test_bad_queue_sets_are_refused(r: Any, redis_server: RedisServer) -> None:
    high, default, low = _three(r)
    with pytest.raises(leaseq.InvalidArgument, match="2 weights for 3"):
        leaseq.Worker([high, default, low], lambda lease: None, weights=[1, 2])
    with pytest.raises(leaseq.InvalidArgument, match="integer"):
        leaseq.Worker([high, low], lambda lease: None, weights=[1, 0])
    with pytest.raises(leaseq.InvalidArgument, match="twice"):
        leaseq.Worker([high, high], lambda lease: None)
    with pytest.raises(leaseq.InvalidArgument, match="list of queues"):
        leaseq.Worker(high, lambda lease: None, weights=[1])
    with pytest.raises(leaseq.InvalidArgument, match="at least one"):
        leaseq.Worker([], lambda lease: None)
    elsewhere = leaseq.Queue("far", redis=redis.Redis(port=redis_server.port, db=3))
    with pytest.raises(leaseq.InvalidArgument, match="different clients"):
        leaseq.Worker([high, elsewhere], lambda lease: None)
    packed = leaseq.Queue("packed", redis=r, serializer="msgpack")
    with pytest.raises(leaseq.InvalidArgument, match="serializer"):
        leaseq.Worker([high, packed], lambda lease: None)


def test_queue_specs() -> None:
    assert parse_queue_spec("high,default,low") == (["high", "default", "low"], None)
    assert parse_queue_spec("high:5,default:3,low:1") == (["high", "default", "low"], [5, 3, 1])
    assert parse_queue_spec("app:mail,low") == (["app:mail", "low"], None)
    # One queue takes no weight: a name ending in :<digits> is the name.
    assert parse_queue_spec("emails:2") == (["emails:2"], None)
    assert parse_queue_spec("emails:2:1,low:1") == (["emails:2", "low"], [1, 1])
    with pytest.raises(leaseq.InvalidArgument, match="every queue a weight or none"):
        parse_queue_spec("high:5,low")


def test_the_cli_worker_serves_several_queues(cli: Cli) -> None:
    for name in ("high", "low"):
        cli.queue(name).enqueue_many([{"i": i} for i in range(3)])
    code, _, err = cli("worker", "high:2,low:1", "tests.support.handlers:echo", "--burst")
    assert code == 0, err
    assert cli.queue("high").stats().succeeded == 3 and cli.queue("low").stats().succeeded == 3
    code, _, err = cli("worker", "high,low:1", "tests.support.handlers:echo", "--burst")
    assert code != 0 and "weight" in err and "Traceback" not in err


def test_leaseq_workers_lists_a_worker_of_several_queues_once(cli: Cli) -> None:
    queues = [cli.queue(name) for name in ("high", "default", "low")]
    for q in queues:
        q.enqueue({})
    QueueSet(queues).register_worker("host:1:multi", ttl=30.0, concurrency=4)
    code, out, err = cli("workers")
    assert code == 0, err
    assert out.count("host:1:multi") == 1 and "high,default,low" in out
