"""Redis Cluster: the behaviour suite on a real 3-master cluster, sync and async.

The session starts its own cluster on free loopback ports (tests/support/cluster.py)
and stops it at the end. Every queue's keys must live in that queue's
slot; every script call must be routed by its keys, including after a
SCRIPT FLUSH (NOSCRIPT reload) and for SCAN-based discovery of queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
import redis.asyncio.cluster as acluster
import redis.cluster
from redis.crc import key_slot

import leaseq
import leaseq.aio
from leaseq.store.keys import split_shard
from tests.store import (
    test_cost_limits,
    test_damage,
    test_deadlines,
    test_effects,
    test_fencing,
    test_jobs,
    test_payloads,
    test_workflows,
)
from tests.support import suite
from tests.support.backends import Clock
from tests.support.cluster import Cluster, shared_cluster
from tests.support.servers import RedisServer, replicated, wait_until

SETTINGS: dict[str, Any] = {
    "keep_succeeded": 60.0,
    "backoff": leaseq.Backoff(base=1.0, cap=10.0, jitter=0.0),
}


MODULES = (
    test_jobs,
    test_payloads,
    test_fencing,
    test_damage,
    test_effects,
    test_workflows,
    test_cost_limits,
    test_deadlines,
)
# Cases of those modules that the cluster does not run, each with the reason.
_NOT_CHECKED = (
    "shares its module's concept but came from a module the cluster run did not "
    "cover; it has not been checked on a cluster, and adding it is a change of "
    "coverage to make on its own"
)
NOT_ON_CLUSTER: dict[str, str] = {
    "store.fencing.a_stale_lease_cannot_complete_a_new_row_under_the_same_id": _NOT_CHECKED,
    "store.fencing.a_stale_lease_cannot_touch_the_new_row_at_all": _NOT_CHECKED,
    "store.fencing.every_row_under_a_chosen_id_gets_a_new_incarnation": _NOT_CHECKED,
    "store.fencing.a_row_written_before_incarnations_still_works": _NOT_CHECKED,
    "store.fencing.a_lease_of_an_old_row_is_refused_by_a_numbered_row": _NOT_CHECKED,
    "store.fencing.a_lease_from_before_a_drop_cannot_act_on_the_queue_made_again": _NOT_CHECKED,
    "store.fencing.row_numbers_stay_exact_and_unique_over_many_calls": _NOT_CHECKED,
    "store.damage.a_counter_that_is_not_a_number_is_a_damaged_key": _NOT_CHECKED,
}


def _off_cluster(func: Callable[..., Any]) -> bool:
    return suite.case_name(func) in NOT_ON_CLUSTER


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    try:
        return shared_cluster()  # stopped at exit; tests/transport/test_sharded.py shares it
    except RuntimeError as exc:  # redis-server not installed: skip, don't fail
        pytest.skip(str(exc))


class ClusterView:
    """The cluster client, with ``keys`` answered from every primary (KEYS
    alone goes to one node), so the suite's snapshots see the whole store."""

    def __init__(self, client: redis.cluster.RedisCluster) -> None:
        self._client = client

    def keys(self, pattern: str = "*") -> list[bytes]:
        return list(self._client.scan_iter(match=pattern, count=1000))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def cr(cluster: Cluster) -> Iterator[redis.cluster.RedisCluster]:
    client = cluster.client()
    client.flushall()  # every primary
    client.script_flush()  # every primary: the first call of each test reloads
    yield client
    client.close()


def assert_keys_in_their_queue_slot(client: Any) -> int:
    """Every key is ``<prefix>:{<tag>}:...`` and sits in the slot of ``<tag>``."""
    keys = list(suite.every_key(client))
    for key in keys:
        head, _, rest = key.partition("{")
        tag, closed, _ = rest.partition("}")
        assert head and closed and tag, f"key without a hash tag: {key!r}"
        assert key_slot(key.encode()) == key_slot(tag.encode()), key
        assert split_shard(tag)[0]  # a queue name, or name#shard
    for key in keys[:5]:  # and the server agrees with our CRC16
        assert client.cluster_keyslot(key) == key_slot(key.encode())
    return len(keys)


@pytest.mark.parametrize(("check", "params"), suite.cases(*MODULES, skip=_off_cluster))
def test_shared_suite_on_cluster(
    check: Callable[..., None], params: dict[str, Any], cr: redis.cluster.RedisCluster
) -> None:
    view = ClusterView(cr)
    q = leaseq.Queue("emails", redis=view, **SETTINGS)
    suite.call(check, params, q=q, r=view, clock=Clock("real", cr, None))
    assert_keys_in_their_queue_slot(cr)


def _sync_only(func: Callable[..., Any]) -> bool:
    source = inspect.getsource(func)
    return "Thread" in source or "leaseq.Queue(" in source


@pytest.mark.parametrize(
    ("check", "params"), suite.cases(*MODULES, skip=lambda f: _sync_only(f) or _off_cluster(f))
)
def test_shared_suite_on_async_cluster(
    check: Callable[..., None],
    params: dict[str, Any],
    cr: redis.cluster.RedisCluster,
    cluster: Cluster,
) -> None:
    loop = asyncio.new_event_loop()
    client = acluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    try:
        aq = leaseq.aio.Queue("emails", redis=client, **SETTINGS)
        view = ClusterView(cr)
        q = suite.SyncFacade(aq, view, loop)
        suite.call(check, params, q=q, r=view, clock=Clock("real", cr, None))
        assert_keys_in_their_queue_slot(cr)
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


# -- cluster-specific checks ------------------------------------------------------

NAMES = [f"q{i}" for i in range(12)]


def test_queues_are_spread_and_all_found(cr: redis.cluster.RedisCluster) -> None:
    for name in NAMES:
        leaseq.Queue(name, redis=cr).enqueue({"n": name})
    nodes = {cr.get_node_from_key(leaseq.QueueKeys("leaseq", n).meta).name for n in NAMES}
    assert len(nodes) == 3, "the names were chosen to land on every master"
    assert leaseq.Queue.queues(cr) == sorted(NAMES)
    assert assert_keys_in_their_queue_slot(cr) >= 3 * len(NAMES)


def test_async_queues_scan_every_primary(cr: redis.cluster.RedisCluster, cluster: Cluster) -> None:
    async def scenario() -> list[str]:
        client = acluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
        try:
            for name in NAMES:
                await leaseq.aio.Queue(name, redis=client).enqueue({"n": name})
            return await leaseq.aio.Queue.queues(client)
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == sorted(NAMES)


def test_noscript_after_flush_reloads_on_the_right_node(cr: redis.cluster.RedisCluster) -> None:
    queues = [leaseq.Queue(name, redis=cr, backoff=0.0) for name in NAMES]
    for q in queues:
        q.enqueue({"n": 1}, id="a")
    cr.script_flush()
    for q in queues:
        lease = q.claim(ttl=5.0)
        assert lease is not None and lease.id == "a"
        assert q.fail(lease, "once more") is leaseq.State.PENDING
    cr.script_flush()
    assert [q.stats().pending for q in queues] == [1] * len(NAMES)
    # A batch's calls after a flush: loaded on the queue's node, sent again.
    cr.script_flush()
    ids = queues[0].enqueue_many([{"i": i} for i in range(3_000)])
    claimed: list[str] = []
    while len(claimed) < 3_001:
        claimed += [lease.id for lease in queues[0].claim_many(1000, ttl=60.0)]
    assert claimed == ["a", *ids]


def test_noscript_loads_on_the_node_that_serves_the_key_when_the_known_primaries_miss_it(
    cr: redis.cluster.RedisCluster, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Just after a failover a client's list of primaries may lack the promoted
    # replica: its SCRIPT LOAD to "all primaries" then misses the node whose
    # NOSCRIPT sent it there, and the EVALSHA sent again got NOSCRIPT once more
    # (NoScript leaked out of a worker's fail() in the cluster-failover run). Here
    # the load to the known primaries reaches none of them.
    q = leaseq.Queue("lost-scripts", redis=cr)
    q.enqueue({"n": 1}, id="a")
    cr.script_flush()
    monkeypatch.setattr(cr, "script_load", lambda source: None)
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.id == "a"
    q.complete(lease)

    async def scenario() -> str | None:
        client = acluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
        try:
            aq = leaseq.aio.Queue("lost-scripts", redis=client)
            await aq.enqueue({"n": 2}, id="b")
            await client.script_flush()

            async def nothing(source: str) -> None:
                return None

            client.script_load = nothing  # type: ignore[method-assign]
            got = await aq.claim(ttl=5.0)
            return None if got is None else got.id
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == "b"


def test_a_batch_is_one_script_call_on_the_queue_node(cr: redis.cluster.RedisCluster) -> None:
    q = leaseq.Queue("batch", redis=cr)
    node = cr.get_node_from_key(q.keys.pending)
    q.enqueue({"warm": "up"})  # load the three scripts first (NOSCRIPT after the flush)
    lease = q.claim(ttl=30.0)
    assert lease is not None
    q.complete(lease)

    def calls() -> dict[str, int]:
        return {
            n.name: int(
                cr.info("commandstats", target_nodes=n).get("cmdstat_evalsha", {}).get("calls", 0)
            )
            for n in cr.get_primaries()
        }

    before = calls()
    ids = q.enqueue_many([{"i": i} for i in range(500)])
    leases = q.claim_many(500, ttl=30.0)
    assert q.complete_many(leases) == []
    after = calls()
    assert len(ids) == len(leases) == 500
    # One enqueue, one claim, one complete, each maybe cut in a few by its time
    # budget: all on the queue's node, none anywhere else.
    assert after[node.name] - before[node.name] >= 3
    assert all(after[n] == before[n] for n in after if n != node.name)
    assert q.stats().succeeded == 501


# -- durable=: WAIT for replicas after each state change ------------------------------


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and one replica of it, on free loopback ports."""
    try:
        primary, replica = replicated()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield primary, replica
    replica.stop()
    primary.stop()


def test_durable_waits_for_the_replica(pair: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = pair
    main, copy = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    # WAIT returns as soon as the replica acks; the long timeout only keeps a busy
    # machine (CI runs two passes at once on two cores) from failing the first one.
    q = leaseq.Queue("safe", redis=main, durable=1, durable_timeout=10.0)
    job_id = q.enqueue({"n": 1})
    # WAIT returned, so the replica already holds the row: no polling needed.
    assert copy.hget(q.keys.job(job_id), "state") == b"pending"
    lease = q.claim(ttl=30.0)
    assert lease is not None
    assert copy.hget(q.keys.job(job_id), "attempts") == b"1"
    q.complete(lease)
    assert copy.hget(q.keys.job(job_id), "state") == b"succeeded"
    main.close()
    copy.close()


def test_durable_beyond_the_replicas_raises_with_the_result(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    primary, _ = pair
    main = redis.Redis(port=primary.port)
    q = leaseq.Queue("safe2", redis=main, durable=2, durable_timeout=0.05)
    with pytest.raises(leaseq.NotReplicated) as info:
        q.enqueue({"n": 1}, id="j")
    assert (info.value.op, info.value.wanted, info.value.acked) == ("enqueue", 2, 1)
    assert info.value.result == "j"  # what enqueue returns: the job id
    assert q.stats().pending == 1  # applied on the primary; stats never waits
    assert q.wait_many(["j"], timeout=0.0) == [None]  # nor does a waiter's hold
    # A batch: every call applied (one by one, each with its WAIT), then one
    # NotReplicated whose result is what enqueue_many returns.
    with pytest.raises(leaseq.NotReplicated) as batch:
        q.enqueue_many([{"n": i} for i in range(1_000)])
    ids = batch.value.result
    assert isinstance(ids, list) and len(set(ids)) == 1_000
    assert q.stats().pending == 1_001 and all(q.get(i) is not None for i in ids[::97])
    with pytest.raises(leaseq.NotReplicated) as claimed:
        q.claim(ttl=30.0)
    assert [lease.id for lease in claimed.value.result.leases] == ["j"]
    main.close()


def test_durable_on_aio(pair: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = pair

    async def scenario() -> str:
        client = aioredis.Redis(port=primary.port)
        q = leaseq.aio.Queue("safe3", redis=client, durable=1)
        job_id = await q.enqueue({"n": 1})
        await client.aclose()
        return job_id

    job_id = asyncio.run(scenario())
    copy = redis.Redis(port=replica.port)
    assert copy.hget(leaseq.QueueKeys("leaseq", "safe3").job(job_id), "state") == b"pending"
    copy.close()


def test_durable_on_cluster_waits_on_the_queues_own_node(cr: redis.cluster.RedisCluster) -> None:
    q = leaseq.Queue("q1", redis=cr, durable=1, durable_timeout=0.02)
    node = cr.get_node_from_key(q.keys.pending)

    def waits() -> dict[str, int]:
        stats = cr.info("commandstats", target_nodes="primaries")
        return {name: int(s.get("cmdstat_wait", {}).get("calls", 0)) for name, s in stats.items()}

    before = waits()
    with pytest.raises(leaseq.NotReplicated) as info:
        q.enqueue({"n": 1})  # this test cluster has no replicas
    assert info.value.acked == 0
    after = waits()
    # One WAIT, or two when the script was not loaded yet (the first EVALSHA
    # answered NOSCRIPT; its WAIT ran all the same): all on the queue's node.
    assert after[node.name] - before[node.name] in (1, 2)
    assert {n: c for n, c in after.items() if n != node.name} == {
        n: c for n, c in before.items() if n != node.name
    }


@pytest.fixture(scope="module")
def replicated_cluster() -> Iterator[Cluster]:
    """Three masters with a replica each (no failover here: the default node timeout)."""
    try:
        made = Cluster(3, replicas=1)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield made
    made.stop()


@contextlib.contextmanager
def _replica_stopped(cluster: Cluster, master_port: int) -> Iterator[None]:
    """SIGSTOP the replica of ``master_port`` once it has acknowledged every write
    so far, SIGCONT it after: its master still counts it connected, and a WAIT
    then counts only the writes it acknowledged before."""
    master = cluster.node(master_port)

    def caught_up() -> bool:
        info = master.info("replication")
        return bool(info["slave0"]["offset"] == info["master_repl_offset"])

    wait_until(caught_up, 10, every=0.02, what="the replica to acknowledge every write")
    master.close()
    replica = cluster.procs[cluster.replica_of(master_port)]
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(replica.pid, signal.SIGCONT)


def test_a_durable_call_on_a_cluster_waits_for_its_own_write(replicated_cluster: Cluster) -> None:
    # WAIT counts the writes of its own connection. Threads sharing a cluster
    # client each take a pooled connection of the node: sent apart, the WAIT
    # may go out on one whose own writes the replica already has, and
    # acknowledge at once a write no replica holds.
    cr = replicated_cluster.client()
    q = leaseq.Queue("own-write", redis=cr, durable=1, durable_timeout=0.5)
    node = cr.get_node_from_key(q.keys.pending)
    pool = node.redis_connection.connection_pool
    release = pool.release

    def least_recent_first(connection: Any) -> None:  # as _LeastRecent in test_sentinel.py
        release(connection)
        with pool._lock:
            idle = pool._available_connections
            if idle and idle[-1] is connection:
                idle.insert(0, idle.pop())

    pool.release = least_recent_first  # type: ignore[method-assign]
    pool._available_connections.extend(pool.make_connection() for _ in range(2))
    patient = leaseq.Queue("own-write", redis=cr, durable=1, durable_timeout=10.0)
    patient.enqueue("seen")  # the replica follows: acknowledged (a loaded box: > 0.5 s)
    with _replica_stopped(replicated_cluster, node.port), pytest.raises(leaseq.NotReplicated):
        q.enqueue("unseen")
    cr.close()


def test_a_durable_call_on_an_async_cluster_waits_for_its_own_write(
    replicated_cluster: Cluster,
) -> None:
    # The asyncio cluster client hands out a node's idle connections oldest first:
    # with two of them, a call's WAIT sent apart goes out on the other one.
    async def scenario() -> None:
        client = acluster.RedisCluster(host="127.0.0.1", port=replicated_cluster.ports[0])
        q = leaseq.aio.Queue("own-write-aio", redis=client, durable=1, durable_timeout=0.5)
        # Two connections, acknowledged by the replica that follows (given longer:
        # on a loaded box a replica took more than 0.5 s).
        patient = leaseq.aio.Queue("own-write-aio", redis=client, durable=1, durable_timeout=10.0)
        await asyncio.gather(patient.enqueue("seen"), patient.enqueue("seen too"))
        node = client.get_node_from_key(q.keys.pending)
        with _replica_stopped(replicated_cluster, node.port):
            with pytest.raises(leaseq.NotReplicated):
                await q.enqueue("unseen")
            with pytest.raises(leaseq.NotReplicated):
                await q.enqueue("unseen too")
        await client.aclose()

    asyncio.run(scenario())


def test_a_durable_queue_follows_its_slot_to_the_new_master(replicated_cluster: Cluster) -> None:
    # A durable call goes to the slot's node itself (the WAIT must ride on the
    # script's connection), past the client's redirect handling: after a
    # failover the old master answers MOVED, and the client must learn where
    # the slot went, or every later call of the queue is refused the same way.
    cr = replicated_cluster.client()
    q = leaseq.Queue("moved", redis=cr, durable=1, enqueue_retry=5.0)
    q.enqueue("before")
    master = cr.get_node_from_key(q.keys.pending).port
    replica = replicated_cluster.replica_of(master)

    async def enqueue(job_id: str) -> str:
        client = acluster.RedisCluster(host="127.0.0.1", port=replicated_cluster.ports[0])
        try:
            aq = leaseq.aio.Queue("moved", redis=client, durable=1, enqueue_retry=5.0)
            first = await aq.enqueue("before", id=f"{job_id}-before")
            replicated_cluster.failover(replica)
            replicated_cluster.wait_promoted(replica)
            replicated_cluster.wait_replica_of(master, replica)
            assert first == f"{job_id}-before"
            return str(await aq.enqueue("after", id=job_id))
        finally:
            await client.aclose()

    assert asyncio.run(enqueue("after-aio")) == "after-aio"
    assert q.enqueue("after", id="after") == "after"
    assert cr.get_node_from_key(q.keys.pending).port == replica
    cr.close()


def test_a_worker_of_several_queues_on_a_cluster(cr: redis.cluster.RedisCluster) -> None:
    # Queues in different slots: one BLPOP cannot watch every wake list, so the
    # set watches them in turn (a CROSSSLOT error would end the worker).
    high, low = (leaseq.Queue(name, redis=cr, backoff=0.0) for name in ("high", "low"))
    assert key_slot(high.keys.wake.encode()) != key_slot(low.keys.wake.encode())
    both = leaseq.QueueSet([high, low])
    assert both.wait_for_wake(0.01) is False  # nothing enqueued yet
    low.enqueue_many([{"i": i} for i in range(5)])
    high.enqueue_many([{"i": i} for i in range(5)])
    ran: list[str] = []
    leaseq.Worker(
        [high, low], lambda lease: ran.append(lease.queue), concurrency=1, handle_signals=False
    ).run(burst=True)
    assert ran == ["high"] * 5 + ["low"] * 5
    assert assert_keys_in_their_queue_slot(cr) > 0
