"""ShardedQueue: one logical queue over N hash tags, on fakeredis and a real cluster."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
from redis.crc import key_slot

import leaseq
from leaseq.sharded import WAKE_SLICE, sharded_names
from leaseq.store.keys import shard_of, split_shard
from tests.support import suite
from tests.support.cluster import shared_cluster
from tests.support.servers import wait_until

SHARDS = 4


@pytest.fixture(params=["fake", "cluster"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "fake":
        yield fakeredis.FakeRedis(server=fakeredis.FakeServer())
        return
    try:
        cluster = shared_cluster()
    except RuntimeError as exc:  # redis-server not installed
        pytest.skip(str(exc))
    client = cluster.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def sq(store: Any) -> leaseq.ShardedQueue:
    return leaseq.ShardedQueue("emails", shards=SHARDS, redis=store, backoff=0.0, max_attempts=2)


def shard_index(sq: leaseq.ShardedQueue, job_id: str) -> int:
    return shard_of(job_id, len(sq.shards))


def test_every_key_is_under_its_shard_tag(sq: leaseq.ShardedQueue, store: Any) -> None:
    ids = sq.enqueue_many([{"i": i} for i in range(40)])
    sq.complete_many(sq.claim_many(10, ttl=30.0))
    tags = set()
    for key in suite.every_key(store):
        tag = key[key.index("{") + 1 : key.index("}")]
        assert key_slot(key.encode()) == key_slot(tag.encode())
        tags.add(tag)
    assert tags == {f"emails#{i}" for i in range(SHARDS)}
    for job_id in ids:  # each row sits in the shard its id hashes to
        assert store.exists(f"leaseq:{{emails#{shard_index(sq, job_id)}}}:job:{job_id}")
    assert sharded_names(leaseq.Queue.queues(store)) == {"emails": SHARDS}


def test_shards_use_every_master() -> None:
    try:
        cluster = shared_cluster()
    except RuntimeError as exc:  # redis-server not installed
        pytest.skip(str(exc))
    client = cluster.client()
    sq = leaseq.ShardedQueue("emails", shards=8, redis=client)
    nodes = {client.get_node_from_key(shard.keys.pending).name for shard in sq.shards}
    client.close()
    assert len(nodes) == 3


def test_dedup_by_id_across_calls(sq: leaseq.ShardedQueue) -> None:
    assert sq.enqueue({"v": 1}, id="job-1") == "job-1"
    assert sq.enqueue({"v": 2}, id="job-1") == "job-1"
    assert sq.enqueue_many([{"v": 3}, {"v": 4}], ids=["job-1", "job-2"]) == ["job-1", "job-2"]
    stats = sq.stats()
    assert stats.pending == 2 and stats.totals["enqueued"] == 2
    job = sq.get("job-1")
    assert job is not None and job.payload == {"v": 1}


def test_generated_ids_are_unique_and_spread(sq: leaseq.ShardedQueue) -> None:
    ids = sq.enqueue_many([{"i": i} for i in range(200)])
    assert len(set(ids)) == 200
    per_shard = Counter(shard_index(sq, i) for i in ids)
    assert set(per_shard) == set(range(SHARDS)) and min(per_shard.values()) >= 20
    assert [s.pending for s in sq.shard_stats()] == [per_shard[i] for i in range(SHARDS)]


def test_one_bad_item_writes_nothing_on_any_shard(sq: leaseq.ShardedQueue, store: Any) -> None:
    with pytest.raises(leaseq.InvalidPayload):
        sq.enqueue_many([{"i": i} for i in range(10)] + [{"bad": object()}])
    with pytest.raises(leaseq.InvalidName):
        sq.enqueue_many([{"i": 1}, {"i": 2}], ids=["ok", "not ok"])
    assert list(suite.every_key(store)) == []


def test_a_result_that_will_not_encode_completes_nothing_on_any_shard(
    sq: leaseq.ShardedQueue,
) -> None:
    sq.enqueue_many([{"i": i} for i in range(40)])
    leases = sq.claim_many(40, ttl=30.0)
    assert len({shard_index(sq, lease.id) for lease in leases}) == SHARDS
    results: list[Any] = [{"i": i} for i in range(40)]
    results[-1] = object()  # on whichever shard comes last
    with pytest.raises(leaseq.InvalidPayload):
        sq.complete_many(leases, results)
    stats = sq.stats()
    assert (stats.active, stats.succeeded) == (40, 0)
    assert sq.complete_many(leases, [*results[:-1], None]) == []
    assert sq.stats().succeeded == 40


def test_claims_rotate_so_no_shard_starves(sq: leaseq.ShardedQueue) -> None:
    busy = next(i for i in range(1000) if shard_index(sq, f"b{i}") == 0)
    hot = [f"b{i}" for i in range(busy, 3000) if shard_index(sq, f"b{i}") == 0][:50]
    quiet = next(f"q{i}" for i in range(1000) if shard_index(sq, f"q{i}") == 2)
    sq.enqueue_many([{"hot": True}] * len(hot), ids=hot)
    sq.enqueue({"hot": False}, id=quiet)
    got = [sq.claim(ttl=30.0) for _ in range(SHARDS)]
    assert quiet in [lease.id for lease in got if lease is not None]


def test_fifo_holds_within_a_shard(sq: leaseq.ShardedQueue) -> None:
    ids = [f"j{i}" for i in range(60)]
    sq.enqueue_many([{"n": i} for i in range(60)], ids=ids)
    order = [lease.id for lease in sq.claim_many(60, ttl=30.0)]
    assert sorted(order) == sorted(ids)
    for index in range(SHARDS):
        mine = [i for i in order if shard_index(sq, i) == index]
        assert mine == [i for i in ids if shard_index(sq, i) == index]


def test_lease_operations_route_to_the_jobs_shard(sq: leaseq.ShardedQueue) -> None:
    ids = sq.enqueue_many([{"i": i} for i in range(12)])
    assert len(set(ids)) == 12
    leases = sq.claim_many(12, ttl=30.0)
    assert len(leases) == 12
    a, b, c, d, *rest = leases
    assert sq.extend(a, ttl=60.0).deadline >= a.deadline
    assert sq.once(a, "charge") is True and sq.once(a, "charge") is False
    sq.complete(a, result="ok")
    assert sq.fail(b, "boom") is leaseq.State.PENDING
    assert sq.fail(c, "poison", dead=True) is leaseq.State.DEAD
    sq.release(d)
    assert sq.complete_many(rest) == []
    with pytest.raises(leaseq.LeaseLost):
        sq.complete(a)
    stats = sq.stats()
    assert (stats.succeeded, stats.pending, stats.dead, stats.active) == (9, 2, 1, 0)
    assert sq.retry_dead(c.id) == 3
    assert sq.retry_all_dead() == 0
    assert sq.cancel(b.id) is True
    assert sq.purge("succeeded") == 9
    with pytest.raises(leaseq.JobNotFound):
        sq.cancel(a.id)  # purged
    assert {j.id for j in sq.ls("pending")} == {c.id, d.id}
    assert [j.id for j in sq.ls("pending", offset=1)] == [j.id for j in sq.ls("pending")][1:]


def test_reap_covers_every_shard(sq: leaseq.ShardedQueue) -> None:
    # Fixed ids, so the spread over shards is the same every run (random ids
    # leave a shard empty about once in eighty runs).
    ids = sq.enqueue_many([{"i": i} for i in range(20)], ids=[f"job-{i}" for i in range(20)])
    leases = sq.claim_many(20, ttl=0.05)
    assert {shard_index(sq, lease.id) for lease in leases} == set(range(SHARDS))
    wait_until(lambda: sq.stats().expired == 20, 5, what="every lease to expire")
    assert sq.reap() == (20, 0)
    assert sq.stats().pending == len(ids)
    again = sq.claim_many(20, ttl=30.0)
    assert {lease.attempt for lease in again} == {2}


def test_blocking_claim_wakes_for_any_shard(sq: leaseq.ShardedQueue) -> None:
    job_id = next(f"w{i}" for i in range(1000) if shard_index(sq, f"w{i}") == SHARDS - 1)
    got: list[leaseq.Lease | None] = []
    waiter = threading.Thread(target=lambda: got.append(sq.claim(ttl=5.0, block=5.0)))
    started = time.monotonic()
    waiter.start()
    time.sleep(0.05)  # let it block first; the wait below is what we measure
    sq.enqueue({"n": 1}, id=job_id)
    waiter.join(10)
    took = time.monotonic() - started
    assert got and got[0] is not None and got[0].id == job_id
    assert took < 0.05 + 2 * WAKE_SLICE * SHARDS + 2.5  # well short of the 5 s block


def test_threaded_worker_drains_a_sharded_queue(sq: leaseq.ShardedQueue) -> None:
    sq.enqueue_many([{"i": i} for i in range(50)])
    done: list[int] = []

    def handler(lease: leaseq.Lease) -> int:
        done.append(lease.payload["i"])
        return int(lease.payload["i"])

    leaseq.Worker(sq, handler, concurrency=4, ttl=5.0).run(burst=True)  # type: ignore[arg-type]
    assert sorted(done) == list(range(50))
    assert sq.stats().succeeded == 50


def test_durable_steps_sleeps_and_waits_route_by_lease_and_signals_reach_every_shard(
    sq: leaseq.ShardedQueue,
) -> None:
    # Five fixed ids per shard: twenty random ones miss a shard in about 1% of runs.
    names = [f"d{k}" for k in range(400)]
    ids = [i for n in range(SHARDS) for i in [i for i in names if shard_index(sq, i) == n][:5]]
    assert sq.enqueue_many([{"i": i} for i in range(20)], ids=ids) == ids
    charged: Counter[int] = Counter()

    def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        i = lease.payload["i"]
        ctx.step("charge", lambda: charged.update([i]) or i)
        ctx.sleep("nap", 0)
        return [i, ctx.wait_for("approval", "all-approved")]

    worker = leaseq.Worker(sq, handler, concurrency=4, ttl=5.0)  # type: ignore[arg-type]
    worker.run(burst=True)  # each job sleeps, wakes, then waits: no slot held
    assert sq.stats().suspended == 20
    assert sq.signal("all-approved", "yes") == 20
    worker = leaseq.Worker(sq, handler, concurrency=4, ttl=5.0)  # type: ignore[arg-type]
    worker.run(burst=True)
    assert sorted(sq.results(ids)) == sorted([i, "yes"] for i in range(20))
    assert charged == Counter(range(20))
    assert sq.signal("all-approved") == 0


def test_settings_and_names(store: Any) -> None:
    for bad in (0, -1, 2000, True, 2.0):
        with pytest.raises(leaseq.InvalidArgument):
            leaseq.ShardedQueue("emails", shards=bad, redis=store)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        leaseq.ShardedQueue("emails", shards=2, redis=store, nonsense=1)
    with pytest.raises(leaseq.InvalidName):
        leaseq.Queue("emails#0", redis=store)  # shard tags are not queue names
    assert split_shard("emails#12") == ("emails", 12)
    assert split_shard("plain") == ("plain", None)
    assert sharded_names(["a", "b#0", "b#3"]) == {"a": 0, "b": 4}


def test_costs_and_deadlines_on_every_shard(sq: leaseq.ShardedQueue, store: Any) -> None:
    """A sharded queue stores cost= and expires= like a plain one; a deadline that
    passes dead-letters the job on whichever shard holds it (no limits: those are a
    plain queue's)."""
    ids = sq.enqueue_many(list(range(40)), cost=7, expires=0.2)
    keep = sq.enqueue_many(list(range(8)), cost=2.5)
    assert {sq.get(i).cost for i in ids} == {7.0} and sq.get(keep[0]).cost == 2.5
    assert len({shard_of(i, len(sq.shards)) for i in ids}) > 1
    wait_until(
        lambda: (sq.reap(), all(sq.get(i).state.value == "dead" for i in ids))[1],
        timeout=10,
        what="every job past its deadline dead on its shard",
    )
    got = []
    while len(got) < len(keep):
        got += sq.claim_many(10, ttl=30.0)
    sq.complete_many(got, costs=[1.0] * len(got))
    assert {sq.get(i).spent for i in keep} == {1.0}
