"""One implementation, four transports: the operations of ``leaseq.store.queue_ops`` and
the sync, async and sharded queues that run them.

- every public operation of each queue class is the ``_ops`` generator,
  wrapped (so no second copy can drift), and the four classes expose the same
  operations with the same signatures;
- the step pump throws a step's error back into the operation at its yield;
- the sharded suite (tests/transport/test_sharded.py) runs again on
  ``leaseq.aio.ShardedQueue``, on fakeredis and a real server;
- ``from_url("memory://...")``, ``close()`` and context managers on every queue.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis

import leaseq
import leaseq.aio
from leaseq.protocols import AsyncQueueLike, QueueLike
from leaseq.store.queue_ops import QueueOps
from leaseq.store.reads import stats_call
from leaseq.store.sharded_ops import ShardedOps
from leaseq.store.steps import Call, Command, Op
from leaseq.transport.drive import SyncDriver
from leaseq.transport.lower import Invoke, Pump
from tests.support import suite
from tests.support.servers import wait_until
from tests.transport import test_sharded

NOT_OPERATIONS = {"from_url", "close", "queues", "shard_for", "name", "keys", "worker_id", "task"}


def public_operations(cls: type) -> dict[str, Any]:
    return {
        name: getattr(cls, name)
        for name in dir(cls)
        if not name.startswith("_") and callable(getattr(cls, name)) and name not in NOT_OPERATIONS
    }


@pytest.mark.parametrize(
    ("cls", "ops"),
    [
        (leaseq.Queue, QueueOps),
        (leaseq.aio.Queue, QueueOps),
        (leaseq.ShardedQueue, ShardedOps),
        (leaseq.aio.ShardedQueue, ShardedOps),
    ],
)
def test_every_operation_is_the_one_implementation(cls: type, ops: type) -> None:
    methods = public_operations(cls)
    assert len(methods) >= 22
    for name, method in methods.items():
        wrapped = getattr(method, "__wrapped__", None)
        assert wrapped is not None, f"{cls.__qualname__}.{name} is written by hand"
        assert wrapped.__name__ == name and method.__doc__ == wrapped.__doc__
        assert inspect.isgeneratorfunction(getattr(ops, name))


def test_sync_async_and_sharded_expose_the_same_operations() -> None:
    names = {cls: set(public_operations(cls)) for cls in (leaseq.Queue, leaseq.aio.Queue)}
    assert names[leaseq.Queue] == names[leaseq.aio.Queue]
    sharded = set(public_operations(leaseq.ShardedQueue))
    assert sharded == set(public_operations(leaseq.aio.ShardedQueue))
    assert names[leaseq.Queue] <= sharded  # plus shard_stats
    for name in names[leaseq.Queue]:
        plain = inspect.signature(getattr(QueueOps, name))
        spread = inspect.signature(getattr(ShardedOps, name))
        assert plain == spread, f"{name}: {plain} != {spread}"
        method = getattr(leaseq.aio.Queue, name)
        if getattr(method, "_leaseq_feed", False):  # events(): an async iterator
            assert inspect.isasyncgen(method(leaseq.aio.Queue.from_url("memory://ops-feed", "p")))
        else:
            assert inspect.iscoroutinefunction(method)


def test_the_queues_satisfy_the_protocols() -> None:
    for url_queue in (
        leaseq.Queue.from_url("memory://ops-proto", "p"),
        leaseq.ShardedQueue.from_url("memory://ops-proto", "p", shards=2),
    ):
        assert isinstance(url_queue, QueueLike)
    for aqueue in (
        leaseq.aio.Queue.from_url("memory://ops-proto", "p"),
        leaseq.aio.ShardedQueue.from_url("memory://ops-proto", "p", shards=2),
    ):
        assert isinstance(aqueue, AsyncQueueLike)


class _Scripted(SyncDriver):
    """A driver whose client answers from a list, to test the pump alone."""

    def __init__(self, replies: list[Any]) -> None:
        self.redis = self
        self._checked = True
        self.replies = replies
        self.asked: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name == "get_node_from_key":  # a plain client, not a cluster one
            raise AttributeError(name)

        def answer(*args: Any) -> Any:
            self.asked.append((name, args))
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

        return answer


def test_a_step_error_is_thrown_into_the_operation_at_its_yield() -> None:
    def op() -> Op[list[str]]:
        seen = []
        for key in ("a", "b", "c"):
            try:
                seen.append((yield Command("get", (key,))))
            except leaseq.ServerUnavailable:
                seen.append("down")
        return seen

    driver = _Scripted(["1", redis.ConnectionError("gone"), "3"])
    assert driver._drive(op()) == ["1", "down", "3"]
    assert [args for _, args in driver.asked] == [("a",), ("b",), ("c",)]


def test_an_error_the_operation_does_not_catch_reaches_the_caller() -> None:
    def op() -> Op[None]:
        yield Command("get", ("a",))

    with pytest.raises(leaseq.ServerUnavailable):
        _Scripted([redis.ConnectionError("gone")])._drive(op())


def test_noscript_loads_the_script_and_calls_again() -> None:
    q = leaseq.Queue.from_url("memory://ops-noscript", "n")
    stats = stats_call(q._core, 1.0)
    call: Call[Any] = Call(stats.script, stats.keys, stats.args, lambda reply: reply)
    driver = _Scripted([redis.exceptions.NoScriptError("NOSCRIPT"), "sha", "the reply"])
    driver._core = q._core
    assert driver._run(call) == "the reply"
    assert [name for name, _ in driver.asked] == ["evalsha", "script_load", "evalsha"]


def test_pump_starts_at_the_first_step() -> None:
    def op() -> Op[int]:
        got = yield Command("ping", ())
        return int(got) + 1

    driver = _Scripted([])
    pump: Pump[int] = Pump(op(), driver)
    assert isinstance(pump.step, Invoke) and not pump.done
    pump.send(41)
    assert pump.done and pump.result == 42


# -- the sharded suite on leaseq.aio.ShardedQueue -------------------------------


def _sharded_cases() -> list[Any]:
    out = []
    for name, func in vars(test_sharded).items():
        if not name.startswith("test_") or not callable(func):
            continue
        args = set(inspect.signature(func).parameters)
        source = inspect.getsource(func)
        # Threads and the threaded Worker are the sync API's own; cluster-only
        # tests need the cluster fixture.
        if "sq" not in args or args - {"sq", "store"} or "Thread" in source or "Worker" in source:
            continue
        out.append(pytest.param(func, id=name[5:]))
    return out


SHARDED_CASES = _sharded_cases()


def test_the_sharded_suite_is_not_empty() -> None:
    assert len(SHARDED_CASES) >= 7


@pytest.mark.parametrize("check", SHARDED_CASES)
def test_sharded_suite_on_aio(
    check: Callable[..., None], r: Any, loop: asyncio.AbstractEventLoop
) -> None:
    kwargs = r.connection_pool.connection_kwargs
    client = (
        fakeredis.FakeAsyncRedis(server=kwargs["server"])
        if isinstance(r, fakeredis.FakeRedis)
        else aioredis.Redis(host=kwargs["host"], port=kwargs["port"])
    )
    asq = leaseq.aio.ShardedQueue(
        "emails", shards=test_sharded.SHARDS, redis=client, backoff=0.0, max_attempts=2
    )
    facade = suite.SyncFacade(asq, r, loop)
    wanted = inspect.signature(check).parameters
    check(**{k: v for k, v in {"sq": facade, "store": r}.items() if k in wanted})
    loop.run_until_complete(client.aclose())


# -- memory://, close() and context managers --------------------------------------


def test_aio_from_url_memory_shares_the_sync_store(loop: asyncio.AbstractEventLoop) -> None:
    sync = leaseq.Queue.from_url("memory://ops-shared", "shared")
    job_id = sync.enqueue({"n": 1})

    async def scenario() -> leaseq.Lease | None:
        async with leaseq.aio.Queue.from_url("memory://ops-shared", "shared") as aq:
            return await aq.claim(ttl=5.0)

    lease = loop.run_until_complete(scenario())
    assert lease is not None and lease.id == job_id
    assert sync.get(job_id).state is leaseq.State.ACTIVE  # type: ignore[union-attr]


def test_a_queue_closes_only_the_client_it_made(redis_server: Any) -> None:
    admin = redis.Redis(port=redis_server.port)

    def others() -> int:
        return len(admin.client_list()) - 1

    before = others()
    with leaseq.Queue.from_url(redis_server.url, "owned") as q:
        q.enqueue({"n": 1})
        assert others() == before + 1
    wait_until(lambda: others() == before, 5, what="the owned connection to close")
    mine = redis.Redis(port=redis_server.port)
    with leaseq.Queue("borrowed", redis=mine) as q2:
        q2.enqueue({"n": 1})
    assert mine.ping() is True  # still the caller's, still usable
    mine.close()
    with leaseq.ShardedQueue.from_url(redis_server.url, "owned-s", shards=2) as sq:
        sq.enqueue({"n": 1})
    sq.close()  # a second close is harmless
    wait_until(lambda: others() == before, 5, what="the sharded queue's connection to close")
    admin.close()


def test_aio_queues_close_what_they_made(
    redis_server: Any, loop: asyncio.AbstractEventLoop
) -> None:
    async def scenario() -> int:
        async with leaseq.aio.ShardedQueue.from_url(redis_server.url, "aio-s", shards=3) as sq:
            await sq.enqueue_many([{"i": i} for i in range(30)])
            stats = await sq.stats()
        await sq.close()
        return stats.pending

    assert loop.run_until_complete(scenario()) == 30


def test_a_sharded_queue_pauses_every_shard_and_refuses_schedules(r: Any) -> None:
    sq = leaseq.ShardedQueue("spread", shards=3, redis=r)
    sq.enqueue_many([{"i": i} for i in range(12)], ids=[f"s{i}" for i in range(12)])
    assert sq.pause() is True and sq.pause() is False
    assert sq.claim_many(12, ttl=5.0) == []
    stats = sq.stats()
    assert stats.paused and stats.paused_at is not None and stats.pending == 12
    assert sq.resume() is True
    assert len(sq.claim_many(12, ttl=5.0)) == 12
    assert sq.tick() == 0 and sq.schedules() == []
    for refused in (
        lambda: sq.schedule("nightly", {}, every=60.0),
        lambda: sq.unschedule("nightly"),
        lambda: sq.set_limits(concurrency=2),
    ):
        with pytest.raises(leaseq.InvalidArgument, match="plain queue"):
            refused()
    assert sq.limits().active == 12


def test_a_sharded_queue_records_its_shard_count_and_refuses_another(r: Any) -> None:
    # Two views with different N would each miss the other's rows: dedup by id
    # (crc32(id) % N) would enqueue an id twice.
    four = leaseq.ShardedQueue("counted", shards=4, redis=r)
    ids = four.enqueue_many([{"i": i} for i in range(20)], ids=[f"c{i}" for i in range(20)])
    assert r.hget(four.shards[0].keys.meta, "shards") in (b"4", "4")
    assert "shards" not in four.stats().totals
    for wrong in (3, 8):
        with pytest.raises(leaseq.InvalidArgument, match="has 4 shards"):
            leaseq.ShardedQueue("counted", shards=wrong, redis=r).enqueue({"again": 1}, id=ids[0])
    with pytest.raises(leaseq.InvalidArgument, match="sharded queue of 4 shards"):
        leaseq.Queue("counted", redis=r).enqueue({"again": 1}, id=ids[0])
    assert four.stats().pending == 20  # nothing was written by the refused views
    # And a plain queue's name cannot become a sharded one.
    leaseq.Queue("flat", redis=r).enqueue({"n": 1})
    with pytest.raises(leaseq.InvalidArgument, match="plain queue"):
        leaseq.ShardedQueue("flat", shards=2, redis=r).stats()
    again = leaseq.ShardedQueue("counted", shards=4, redis=r)
    assert again.enqueue({"dup": 1}, id=ids[0]) == ids[0] and again.stats().pending == 20
