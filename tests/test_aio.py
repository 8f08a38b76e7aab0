"""leaseq.aio: the shared behaviour suite on redis.asyncio, and the asyncio Worker.

The suite functions are the sync ones (tests/test_store.py and friends),
run against ``leaseq.aio.Queue`` through a facade that awaits each call, so
both APIs are held to one definition of every behaviour.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis

import leaseq
import leaseq.aio
from leaseq.handler import Dead, Retry
from tests import (
    suite,
    test_damaged,
    test_effects,
    test_fencing,
    test_jobs,
    test_limits,
    test_schedules,
    test_smoke,
    test_store,
)
from tests.conftest import Clock


def _needs_sync_only(func: Callable[..., Any]) -> bool:
    # Threads share one event loop badly, and tests that build their own
    # leaseq.Queue would only re-test the sync API.
    source = inspect.getsource(func)
    return "Thread" in source or "leaseq.Queue(" in source


CASES = suite.cases(
    test_store,
    test_smoke,
    test_fencing,
    test_damaged,
    test_effects,
    test_schedules,
    test_limits,
    test_jobs,
    skip=_needs_sync_only,
)


def async_client(r: Any) -> Any:
    """A redis.asyncio client on the same server (fake or real) as the sync ``r``."""
    kwargs = r.connection_pool.connection_kwargs
    if isinstance(r, fakeredis.FakeRedis):
        return fakeredis.FakeAsyncRedis(server=kwargs["server"])
    return aioredis.Redis(host=kwargs["host"], port=kwargs["port"])


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def aq(r: Any, loop: asyncio.AbstractEventLoop) -> Iterator[leaseq.aio.Queue]:
    client = async_client(r)
    yield leaseq.aio.Queue(
        "emails",
        redis=client,
        keep_succeeded=60.0,
        backoff=leaseq.Backoff(base=1.0, cap=10.0, jitter=0.0),
    )
    loop.run_until_complete(client.aclose())


def test_the_suite_is_not_empty() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("check", "params"), CASES)
def test_shared_suite_on_aio(
    check: Callable[..., None],
    params: dict[str, Any],
    aq: leaseq.aio.Queue,
    r: Any,
    clock: Clock,
    loop: asyncio.AbstractEventLoop,
) -> None:
    suite.call(check, params, q=suite.SyncFacade(aq, r, loop), r=r, clock=clock)


# -- aio-only behaviour ----------------------------------------------------------


def run(loop: asyncio.AbstractEventLoop, coro: Awaitable[Any]) -> Any:
    return loop.run_until_complete(coro)


def test_blocking_claim_wakes_on_enqueue(
    aq: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    async def scenario() -> tuple[leaseq.Lease | None, float]:
        started = loop.time()
        waiter = asyncio.ensure_future(aq.claim(ttl=5.0, block=5.0))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await aq.enqueue({"n": 1})
        lease = await asyncio.wait_for(waiter, 4.0)
        return lease, loop.time() - started

    lease, took = run(loop, scenario())
    assert lease is not None and lease.payload == {"n": 1}
    assert took < 3.0


def test_blocking_claim_times_out_empty(
    aq: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    assert run(loop, aq.claim_many(3, ttl=1.0, block=0.05)) == []


def test_noscript_reload(aq: leaseq.aio.Queue, r: Any, loop: asyncio.AbstractEventLoop) -> None:
    run(loop, aq.enqueue({"n": 1}))
    r.script_flush()
    assert run(loop, aq.enqueue({"n": 2}, id="second")) == "second"
    assert run(loop, aq.stats()).pending == 2


def test_queues_and_from_url(redis_server: Any, loop: asyncio.AbstractEventLoop) -> None:
    sync = redis.Redis(port=redis_server.port)
    sync.flushall()

    async def scenario() -> list[str]:
        q = leaseq.aio.Queue.from_url(redis_server.url, "aio-url")
        await q.enqueue({"n": 1})
        names = await leaseq.aio.Queue.queues(q.redis)
        await q.redis.aclose()
        return names

    assert run(loop, scenario()) == ["aio-url"]
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.aio.Queue.from_url("", "x")
    sync.close()


def test_redis_outage_is_server_unavailable(loop: asyncio.AbstractEventLoop) -> None:
    from redis.asyncio.retry import Retry as NoRetry
    from redis.backoff import NoBackoff

    from tests.conftest import free_port

    client = aioredis.Redis(port=free_port(), retry=NoRetry(NoBackoff(), 0))
    q = leaseq.aio.Queue("x", redis=client)
    with pytest.raises(leaseq.ServerUnavailable):
        run(loop, q.enqueue({"n": 1}))
    run(loop, q.redis.aclose())


# -- the asyncio Worker ------------------------------------------------------------


@pytest.fixture
def live(redis_server: Any, loop: asyncio.AbstractEventLoop) -> Iterator[leaseq.aio.Queue]:
    """An aio queue on the real server, for the worker tests: they run on real
    time (heartbeats, grace), and fakeredis cannot cancel a blocked BLPOP cleanly."""
    sync = redis.Redis(port=redis_server.port)
    sync.flushall()
    sync.close()
    client = aioredis.Redis(port=redis_server.port)
    yield leaseq.aio.Queue("jobs", redis=client, backoff=0.0, max_attempts=2)
    loop.run_until_complete(client.aclose())


def test_worker_outcomes_in_burst(live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop) -> None:
    async def handler(lease: leaseq.Lease) -> Any:
        kind = lease.payload["kind"]
        if kind == "boom":
            raise ValueError("boom")
        if kind == "retry":
            if lease.attempt == 1:
                raise Retry(0.0, "later")
            return "second time"
        if kind == "dead":
            raise Dead("poison")
        await asyncio.sleep(0.01)
        return {"ok": lease.payload["i"]}

    async def scenario() -> int:
        await live.enqueue_many([{"kind": "ok", "i": i} for i in range(20)])
        for kind in ("boom", "retry", "dead"):
            await live.enqueue({"kind": kind}, id=kind)
        return await leaseq.aio.Worker(live, handler, concurrency=5, ttl=5.0).run(burst=True)

    processed = run(loop, scenario())
    assert processed == 20 + 2 + 2 + 1
    stats = run(loop, live.stats())
    assert (stats.succeeded, stats.dead, stats.pending, stats.active) == (21, 2, 0, 0)
    boom = run(loop, live.get("boom"))
    assert boom is not None and boom.state is leaseq.State.DEAD and boom.attempts == 2
    assert boom.last_error is not None and "ValueError: boom" in boom.last_error
    retried = run(loop, live.get("retry"))
    assert retried is not None and retried.result == "second time" and retried.attempts == 2
    dead = run(loop, live.get("dead"))
    assert dead is not None and dead.attempts == 1 and dead.last_error == "Dead: poison"


def test_worker_concurrency_is_in_flight_tasks(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    running = 0
    peak = 0

    async def handler(lease: leaseq.Lease) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1

    async def scenario() -> int:
        await live.enqueue_many([{"i": i} for i in range(24)])
        return await leaseq.aio.Worker(live, handler, concurrency=4, ttl=5.0).run(burst=True)

    assert run(loop, scenario()) == 24
    assert peak == 4


def test_worker_heartbeats_keep_a_long_job(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    async def handler(lease: leaseq.Lease) -> str:
        await asyncio.sleep(0.6)  # six lease lengths: only heartbeats keep it
        return "done"

    async def scenario() -> None:
        await live.enqueue({"n": 1}, id="long")
        await leaseq.aio.Worker(live, handler, concurrency=1, ttl=0.1).run(burst=True)

    run(loop, scenario())
    job = run(loop, live.get("long"))
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.attempts == 1


def test_worker_cancels_a_handler_whose_lease_is_lost(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    cancelled = asyncio.Event()

    async def handler(lease: leaseq.Lease) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def scenario() -> None:
        await live.enqueue({"n": 1}, id="taken")
        worker = leaseq.aio.Worker(live, handler, concurrency=1, ttl=0.3)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).active == 0:
            await asyncio.sleep(0.01)
        # An operator (or a reaper after a stall) takes the job away:
        await live.redis.hset(live.keys.job("taken"), "attempts", 7)
        await asyncio.wait_for(cancelled.wait(), 5.0)
        worker.stop()
        await asyncio.wait_for(task, 5.0)

    run(loop, scenario())
    job = run(loop, live.get("taken"))
    assert job is not None and job.state is leaseq.State.ACTIVE and job.attempts == 7


def test_worker_graceful_stop_finishes_then_releases(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    async def handler(lease: leaseq.Lease) -> str:
        await asyncio.sleep(0.05 if lease.payload["fast"] else 30)
        return "ok"

    async def scenario() -> None:
        await live.enqueue({"fast": True}, id="fast")
        await live.enqueue({"fast": False}, id="slow")
        worker = leaseq.aio.Worker(live, handler, concurrency=2, ttl=5.0, grace=0.3)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).active < 2:
            await asyncio.sleep(0.01)
        worker.stop()
        await asyncio.wait_for(task, 5.0)

    run(loop, scenario())
    fast, slow = run(loop, live.get("fast")), run(loop, live.get("slow"))
    assert fast is not None and fast.state is leaseq.State.SUCCEEDED
    # Past the grace the slow job went back to pending, its attempt refunded.
    assert slow is not None and slow.state is leaseq.State.PENDING


def test_worker_reaps_a_crashed_workers_job(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    async def handler(lease: leaseq.Lease) -> int:
        return lease.attempt

    async def scenario() -> None:
        await live.enqueue({"n": 1}, id="orphan")
        crashed = await live.claim(ttl=0.05)  # a worker that died holding it
        assert crashed is not None
        worker = leaseq.aio.Worker(live, handler, concurrency=1, ttl=5.0)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).succeeded == 0:
            await asyncio.sleep(0.02)
        worker.stop()
        await asyncio.wait_for(task, 5.0)

    run(loop, asyncio.wait_for(scenario(), 10.0))
    job = run(loop, live.get("orphan"))
    assert job is not None and job.result == 2
    assert job.last_error is not None and "lease expired" in job.last_error


def test_worker_rejects_bad_settings(live: leaseq.aio.Queue) -> None:
    async def handler(lease: leaseq.Lease) -> None:
        return None

    for bad in ({"concurrency": 0}, {"ttl": 0.0}, {"ttl": float("nan")}, {"grace": -1.0}):
        with pytest.raises(leaseq.InvalidArgument):
            leaseq.aio.Worker(live, handler, **bad)
