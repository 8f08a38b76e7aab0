"""Workflows: dependencies, the waiting state, flows, pinning (docs/workflows.md).

Every case runs on fakeredis and on a real redis-server (and, through
tests/transport/test_aio.py, again on the asyncio queue); the large ones
(10,000 parents, children or steps) run on the real server only.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq import State, Step
from leaseq.store.enqueue import enqueue_calls
from tests.support.backends import Clock


def claim_one(q: leaseq.Queue, ttl: float = 30.0) -> leaseq.Lease:
    lease = q.claim(ttl=ttl)
    assert lease is not None
    return lease


def job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    found = q.get(job_id)
    assert found is not None, job_id
    return found


def moves(q: leaseq.Queue, job_id: str) -> list[tuple[str, str]]:
    return [(str(e.from_state), str(e.to_state)) for e in q.events() if e.job_id == job_id]


# -- dependencies -------------------------------------------------------------------


def test_a_child_waits_for_every_parent_and_runs_once_the_last_succeeds(
    q: leaseq.Queue,
) -> None:
    q.enqueue({"url": "a"}, id="fetch-1")
    q.enqueue({"url": "b"}, id="fetch-2")
    child = q.enqueue({"album": 7}, id="album", depends_on=["fetch-1", "fetch-2"])
    row = job(q, child)
    assert row.state is State.WAITING and row.parents_left == 2
    assert row.depends_on == ("fetch-1", "fetch-2") and row.on_parent_failure == "cancel"
    assert q.stats().waiting == 1 and q.stats().pending == 2
    assert [j.id for j in q.ls("waiting")] == ["album"]
    assert q.children("fetch-1") == ["album"] and job(q, "fetch-1").children == 1
    # A waiting job is never claimed.
    first = claim_one(q)
    second = claim_one(q)
    assert q.claim() is None
    q.complete(first, result="A")
    assert job(q, child).state is State.WAITING and job(q, child).parents_left == 1
    q.complete(second, result="B")
    assert job(q, child).state is State.PENDING and job(q, child).parents_left == 0
    assert q.children("fetch-1") == []
    lease = claim_one(q)
    assert lease.id == "album" and lease.depends_on == ("fetch-1", "fetch-2")
    assert q.parent_results(lease) == ["A", "B"]
    assert q.results(["fetch-2", "nope", "fetch-1"]) == ["B", leaseq.GONE, "A"]
    # The release is in the same event entry as the parent's completion.
    entry = next(e for e in q.events() if e.job_id == "album" and e.to_state is State.PENDING)
    same = [e for e in q.events() if e.stream_id == entry.stream_id]
    assert any(e.job_id == second.id and e.to_state is State.SUCCEEDED for e in same)


def test_a_parent_already_succeeded_counts_at_once_and_a_delay_counts_from_release(
    q: leaseq.Queue, clock: Clock
) -> None:
    q.enqueue("p", id="p")
    q.complete(claim_one(q), result=1)
    assert job(q, q.enqueue("c", id="c", depends_on=["p"])).state is State.PENDING
    q.enqueue("w", id="w")
    late = q.enqueue("d", id="d", depends_on=["w"], delay=0.5)
    assert job(q, late).state is State.WAITING
    q.complete(claim_one(q))  # c, first in line
    lease = claim_one(q)
    assert lease.id == "w"
    q.complete(lease)
    row = job(q, late)
    assert row.state is State.SCHEDULED and row.run_at is not None
    clock.advance(0.6)
    assert claim_one(q).id == "d"


def test_fencing_stale_lease_replay_and_reap_never_release_a_child_twice(
    q: leaseq.Queue, clock: Clock
) -> None:
    q.enqueue("p", id="p", max_attempts=3)
    q.enqueue("p2", id="p2")
    q.enqueue("c", id="c", depends_on=["p", "p2"])
    stale = claim_one(q, ttl=0.2)
    assert stale.id == "p"
    clock.advance(0.3)
    assert q.reap() == (1, 0)  # the reap gives p another attempt: no child moves
    assert job(q, "c").parents_left == 2
    fresh = claim_one(q)
    if fresh.id != "p":  # p2 may come first
        q.complete(fresh)
        fresh = claim_one(q)
    with pytest.raises(leaseq.LeaseLost):
        q.complete(stale)  # the old token: refused, nothing counted
    q.complete(fresh)
    with pytest.raises(leaseq.AlreadyFinished):
        q.complete(fresh)  # a replay of the same completion
    row = job(q, "c")
    assert row.state is State.PENDING and row.parents_left == 0
    assert moves(q, "c").count(("waiting", "pending")) == 1


def test_a_dead_parent_cancels_its_children_and_the_cascade_goes_on(q: leaseq.Queue) -> None:
    q.enqueue("p", id="p", max_attempts=1)
    q.enqueue("c1", id="c1", depends_on=["p"])
    q.enqueue("c2", id="c2", depends_on=["c1"])
    q.enqueue("runs", id="runs", depends_on=["p"], on_parent_failure="run")
    q.enqueue("grand", id="grand", depends_on=["runs"])
    assert q.fail(claim_one(q), "boom") is State.DEAD
    c1, c2 = job(q, "c1"), job(q, "c2")
    assert c1.state is State.CANCELLED and c1.last_error == "parent p is dead"
    assert c2.state is State.CANCELLED and c2.last_error == "parent c1 is cancelled"
    assert c1.failed_parents == ("p",)
    runs = job(q, "runs")
    assert runs.state is State.PENDING and runs.failed_parents == ("p",)
    assert job(q, "grand").state is State.WAITING
    assert job(q, "p").cancelled_children == 1
    assert q.stats().cancelled == 2 and q.stats().waiting == 1
    # wait() on a cascaded child returns at once.
    assert q.wait("c2", timeout=1.0) is not None
    # Retrying the parent does not bring its cancelled children back.
    q.retry_dead("p")
    q.complete(claim_one(q))
    assert job(q, "c1").state is State.CANCELLED


def test_a_cancelled_deleted_or_purged_parent_settles_its_children(q: leaseq.Queue) -> None:
    q.enqueue("p", id="p")
    q.enqueue("c", id="c", depends_on=["p"])
    assert q.cancel("p") is True
    assert job(q, "c").last_error == "parent p is cancelled"
    q.enqueue("d", id="d", delay=60.0)
    q.enqueue("dc", id="dc", depends_on=["d"], on_parent_failure="run")
    q.delete("d")
    assert job(q, "dc").state is State.PENDING and job(q, "dc").failed_parents == ("d",)
    q.enqueue("w", id="w", delay=60.0)
    q.enqueue("wc", id="wc", depends_on=["w"])
    q.purge("scheduled")
    assert job(q, "wc").state is State.CANCELLED
    assert job(q, "wc").last_error == "parent w was deleted"
    # A waiting job itself can be cancelled, deleted and purged.
    q.enqueue("x", id="x", delay=60.0)
    q.enqueue("y", id="y", depends_on=["x"])
    q.enqueue("z", id="z", depends_on=["x"])
    assert q.cancel("y") is True
    assert job(q, "x").children == 1
    q.delete("z")
    assert job(q, "x").children == 0 and q.children("x") == []
    q.enqueue("v", id="v", depends_on=["x"])
    assert q.purge("waiting") == 1 and q.stats().waiting == 0


def test_a_parent_already_failed_applies_the_policy_at_once(q: leaseq.Queue) -> None:
    q.enqueue("p", id="p")
    q.cancel("p")
    child = job(q, q.enqueue("c", id="c", depends_on=["p"]))
    assert child.state is State.CANCELLED and child.last_error == "parent p is cancelled"
    assert job(q, q.enqueue("r", id="r", depends_on=["p"], on_parent_failure="run")).state is (
        State.PENDING
    )


@pytest.mark.parametrize(
    ("depends_on", "error"),
    [
        (["nope"], leaseq.JobNotFound),
        (["a", "nope"], leaseq.JobNotFound),
        (["self"], leaseq.InvalidArgument),
        ("a", leaseq.InvalidArgument),
        (["bad id"], leaseq.InvalidName),
    ],
)
def test_bad_parents_are_refused_and_nothing_is_written(
    q: leaseq.Queue, r: Any, depends_on: Any, error: type[Exception]
) -> None:
    q.enqueue("a", id="a")
    before = sorted(r.keys("*"))
    with pytest.raises(error):
        q.enqueue("x", id="self", depends_on=depends_on)
    with pytest.raises(error):
        q.enqueue_many(["x", "y"], ids=["self", "other"], depends_on=depends_on)
    assert sorted(r.keys("*")) == before
    with pytest.raises(leaseq.InvalidArgument):
        q.enqueue("x", depends_on=["a"], on_parent_failure="ignore")  # type: ignore[typeddict-item]


def test_a_damaged_parent_row_cancels_its_children_never_strands_them(
    q: leaseq.Queue, r: Any
) -> None:
    q.enqueue("p", id="p")
    q.enqueue("c", id="c", depends_on=["p"])
    r.delete(q.keys.job("p"))
    r.set(q.keys.job("p"), "junk")  # overwritten by hand with another type
    assert q.claim() is None  # the claim parks p in dead and settles its child
    row = job(q, "c")
    assert row.state is State.CANCELLED and row.last_error == "parent p is dead"
    with pytest.raises(leaseq.DamagedRow):
        q.enqueue("d", depends_on=["p"])


# -- retention ------------------------------------------------------------------------


def test_parents_stay_while_children_need_them_then_retention_resumes(r: Any) -> None:
    q = leaseq.Queue("pins", redis=r, keep_succeeded_count=3)
    q.enqueue("p", id="p")
    q.enqueue("c", id="c", depends_on=["p"], priority=9)  # runs after the x jobs below
    q.complete(claim_one(q), result="kept")
    for i in range(10):  # many later completions trim by count...
        q.enqueue(i, id=f"x{i}")
    for _ in range(10):
        q.complete(claim_one(q))
    assert job(q, "p").result == "kept" and job(q, "p").children == 1  # ...but not p
    lease = claim_one(q)
    assert lease.id == "c" and q.parent_results(lease) == ["kept"]
    q.complete(lease)
    assert q.get("p") is None or q.get("p").children == 0  # unpinned: trimmed, or due to be
    for i in range(5):
        q.enqueue(i, id=f"y{i}")
    for _ in range(5):
        q.complete(claim_one(q))
    assert q.get("p") is None


def test_a_queue_that_keeps_nothing_keeps_a_parent_until_its_child_finished(r: Any) -> None:
    q = leaseq.Queue("nothing", redis=r, keep_succeeded=0)
    q.enqueue("p", id="p")
    q.enqueue("c", id="c", depends_on=["p"])
    q.complete(claim_one(q), result=42)
    assert job(q, "p").result == 42
    lease = claim_one(q)
    assert q.parent_results(lease) == [42]
    q.complete(lease)
    assert q.get("p") is None and q.get("c") is None


@pytest.mark.slow
def test_a_parent_keeps_its_pins_through_batches_of_its_children(rr: Any) -> None:
    # complete_many unpins each parent once per call with all its children of the
    # call: the count goes down by the batch, and the last batch gives the parent
    # its retention (here: none, so it goes), however the children are split.
    q = leaseq.Queue("batches", redis=rr, keep_succeeded=0)
    q.enqueue("a", id="a", priority=0)
    q.enqueue("b", id="b", priority=0)
    q.enqueue_many(list(range(6_000)), depends_on=["a"])
    of_both = set(q.enqueue_many(list(range(4_000)), depends_on=["a", "b"]))
    q.complete(claim_one(q), result="A")
    q.complete(claim_one(q), result="B")
    assert (job(q, "a").children, job(q, "b").children) == (10_000, 4_000)
    leases = q.claim_many(1000, ttl=600.0)
    while len(leases) < 10_000:
        leases += q.claim_many(1000, ttl=600.0)
    done = 0
    for end in (2_500, 6_001, 9_999, 10_000):
        batch = leases[done:end]
        q.complete_many(batch)
        done = end
        left_a, left_b = 10_000 - done, len(of_both - {lease.id for lease in leases[:done]})
        for parent, left in (("a", left_a), ("b", left_b)):
            if left:
                assert job(q, parent).children == left
            else:
                assert q.get(parent) is None  # its last pin gone: it keeps nothing
    assert not rr.exists(q.keys.graph("a")) and q.stats().succeeded == 0


@pytest.mark.parametrize("keep", [0, 3600.0])
@pytest.mark.parametrize("parent_first", [True, False])
def test_a_parent_completed_with_its_running_child_in_one_batch_gets_its_retention(
    r: Any, keep: float, parent_first: bool
) -> None:
    # A child that runs on its parent's failure still pins it; the parent retried
    # and both run at once. Whatever their order in one complete_many, the
    # parent's last pin goes in that call: its retention applies, never an
    # index entry kept forever (for a row deleted, or one that expires).
    q = leaseq.Queue("together", redis=r, keep_succeeded=keep)
    q.enqueue("p", id="p", max_attempts=1)
    q.enqueue("c", id="c", depends_on=["p"], on_parent_failure="run")
    q.fail(claim_one(q), "boom")
    q.retry_dead("p")
    leases = {lease.id: lease for lease in q.claim_many(2)}
    assert sorted(leases) == ["c", "p"] and job(q, "p").children == 1
    q.complete_many([leases["p"], leases["c"]] if parent_first else [leases["c"], leases["p"]])
    if keep == 0:
        assert q.get("p") is None and q.stats().succeeded == 0
        assert r.zscore(q.keys.succeeded, "p") is None
    else:
        assert job(q, "p").children == 0 and r.pttl(q.keys.job("p")) > 0
        assert r.zscore(q.keys.succeeded, "p") < 10**15  # expires, not kept


def test_retrying_a_dead_child_pins_its_parents_again(r: Any) -> None:
    q = leaseq.Queue("repin", redis=r, keep_succeeded_count=1)
    q.enqueue("p", id="p")
    q.enqueue("c", id="c", depends_on=["p"], max_attempts=1, priority=9)
    q.complete(claim_one(q), result="v")
    q.fail(claim_one(q), "boom")
    assert job(q, "p").children == 0
    q.retry_dead("c")
    assert job(q, "p").children == 1
    q.enqueue("x", id="x")
    q.complete(claim_one(q))  # would trim p by count if it were not pinned
    lease = claim_one(q)
    assert lease.id == "c" and q.parent_results(lease) == ["v"]


# -- flows ----------------------------------------------------------------------------


def test_a_flow_is_created_whole_and_runs_in_order(q: leaseq.Queue) -> None:
    ids = q.enqueue_flow(
        [
            Step({"resize": "a"}, id="ra"),
            Step({"resize": "b"}, id="rb", priority=5),
            Step({"album": 1}, id="album", depends_on=["ra", "rb"], kind="album"),
            Step({"notify": 1}, depends_on=["album"], on_parent_failure="run", delay=1.0),
        ],
        flow="album-1",
    )
    assert ids[:3] == ["ra", "rb", "album"] and len(ids) == 4
    assert [job(q, i).state for i in ids] == [
        State.PENDING,
        State.PENDING,
        State.WAITING,
        State.WAITING,
    ]
    assert {job(q, i).flow for i in ids} == {"album-1"}
    assert job(q, ids[3]).on_parent_failure == "run" and job(q, "album").kind == "album"
    # A replay of the same call (same flow name) creates nothing and raises nothing.
    assert q.enqueue_flow([Step("x", id="ra")], flow="album-1") == ["ra"]
    assert q.stats().totals["enqueued"] == 4


@pytest.mark.parametrize(
    ("steps", "error"),
    [
        ([Step(1, id="s1"), Step(2, id="s2", depends_on=["missing"])], leaseq.JobNotFound),
        ([Step(1, id="s1", depends_on=["s2"]), Step(2, id="s2")], leaseq.InvalidArgument),
        ([Step(1, id="s1"), Step(2, id="s1")], leaseq.InvalidArgument),
        ([Step(1, id="s1"), Step(2, id="s2", depends_on=["s2"])], leaseq.InvalidArgument),
        ([Step(1, id="s1"), Step(2, id="taken")], leaseq.InvalidArgument),
        ([Step(1, id="s1"), Step(float("nan"), id="s2")], leaseq.InvalidPayload),
        ([Step(1, id="s1"), Step(2, id="s2", priority=-1)], leaseq.InvalidArgument),
        ([Step(1, id="s1"), "not a step"], leaseq.InvalidArgument),
    ],
)
def test_a_bad_flow_writes_nothing(
    q: leaseq.Queue, r: Any, steps: list[Any], error: type[Exception]
) -> None:
    q.enqueue("t", id="taken")
    before = sorted(r.keys("*"))
    with pytest.raises(error):
        q.enqueue_flow(steps)
    assert sorted(r.keys("*")) == before


def test_an_empty_batch_callback_runs_at_once(q: leaseq.Queue) -> None:
    assert job(q, q.enqueue("cb", depends_on=[])).state is State.PENDING
    assert q.enqueue_flow([]) == []


# -- sharded queues -------------------------------------------------------------------


def test_a_sharded_queue_places_children_on_their_parents_shard(r: Any) -> None:
    sq = leaseq.ShardedQueue("sh", redis=r, shards=4)
    parent = sq.enqueue("p")
    child = sq.enqueue("c", depends_on=[parent])
    assert sq.shard_for(child).keys.tag == sq.shard_for(parent).keys.tag
    kids = sq.enqueue_many(["a", "b", "c"], depends_on=[parent])
    assert {sq.shard_for(k).keys.tag for k in kids} == {sq.shard_for(parent).keys.tag}
    ids = sq.enqueue_flow([Step(1, id=None), Step(2)], flow="placed")
    assert len({sq.shard_for(i).keys.tag for i in ids}) == 1
    other = next(
        i for i in (f"id{n}" for n in range(100)) if sq.shard_for(i) != sq.shard_for(parent)
    )
    with pytest.raises(leaseq.InvalidArgument, match="span shards"):
        sq.enqueue("x", id=other, depends_on=[parent])
    assert sq.get(other) is None
    lease = sq.claim()
    assert lease is not None


# -- at scale, on a real server ------------------------------------------------------


@pytest.mark.slow
def test_fan_in_of_ten_thousand_parents_releases_the_child_once(rr: Any) -> None:
    q = leaseq.Queue("fanin", redis=rr)
    parents = q.enqueue_many([{"n": i} for i in range(10_000)])
    child = q.enqueue("callback", depends_on=parents)
    assert job(q, child).parents_left == 10_000
    done = 0
    while done < 10_000:
        leases = q.claim_many(1000)
        assert leases and child not in {lease.id for lease in leases}
        q.complete_many(leases, [lease.payload["n"] for lease in leases])
        done += len(leases)
    row = job(q, child)
    assert row.state is State.PENDING and row.parents_left == 0
    assert moves(q, child).count(("waiting", "pending")) == 1
    lease = q.claim()
    assert lease is not None and lease.id == child
    assert q.parent_results(lease) == list(range(10_000))


@pytest.mark.slow
def test_fan_out_of_ten_thousand_children_is_settled_in_bounded_calls(rr: Any) -> None:
    q = leaseq.Queue("fanout", redis=rr)
    root = q.enqueue("root")
    kids = q.enqueue_many(list(range(10_000)), depends_on=[root])
    assert q.stats().waiting == 10_000
    q.complete(claim_one(q))
    # The completion settles a page of children itself (16: the call stays
    # short); reaps go on with the rest, each within its time budget.
    stats = q.stats()
    assert (stats.waiting, stats.pending) == (10_000 - 16, 16)
    assert rr.llen(q.keys.releasing) == 1
    assert q.reap() == (0, 0)
    stats = q.stats()
    assert (stats.waiting, stats.pending) == (0, 10_000)
    assert rr.llen(q.keys.releasing) == 0 and not rr.exists(q.keys.graph(root))
    assert job(q, root).children == 10_000
    released = [e.job_id for e in q.events() if e.from_state is State.WAITING]
    assert sorted(released) == sorted(kids)  # each exactly once
    # Claims settle what a completion left, too: a failed parent's 10,000 children,
    # at least a page (8) a claim, however slow the server.
    q2 = leaseq.Queue("fanout-2", redis=rr)
    other = q2.enqueue("other", max_attempts=1)
    q2.enqueue_many(list(range(10_000)), depends_on=[other])
    q2.fail(claim_one(q2), "boom")
    assert q2.stats().cancelled == 16
    claims = 0
    while q2.stats().waiting:
        assert q2.claim() is None
        claims += 1
        assert claims <= (10_000 - 16) // 8
    assert q2.stats().cancelled == 10_000 and rr.llen(q2.keys.releasing) == 0


@pytest.mark.slow
def test_a_flow_of_ten_thousand_steps_in_one_call(rr: Any) -> None:
    q = leaseq.Queue("bigflow", redis=rr)
    steps = [
        Step("root", id="root"),
        *(Step(i, id=f"s{i}", depends_on=["root"]) for i in range(9_998)),
        Step("fin", id="fin", depends_on=[f"s{i}" for i in range(9_998)]),
    ]
    ids = q.enqueue_flow(steps)
    assert len(ids) == 10_000 and q.stats().waiting == 9_999
    assert job(q, "fin").parents_left == 9_998
    # All or nothing at that size too: one bad parent at the end writes nothing.
    rr.flushall()
    with pytest.raises(leaseq.JobNotFound):
        q.enqueue_flow([*steps[:-1], Step("fin", id="fin", depends_on=["missing"])])
    assert rr.dbsize() == 0


# -- ids used again, damage, retries: what an operator can do mid-workflow ----------


def test_a_finished_parent_children_still_need_cannot_be_deleted_or_purged(
    q: leaseq.Queue,
) -> None:
    q.enqueue("p", id="p")
    q.enqueue("c", id="c", depends_on=["p"])
    q.complete(claim_one(q), result=1)
    with pytest.raises(leaseq.JobStateError, match="still depend on it"):
        q.delete("p")
    assert q.purge("succeeded") == 0 and job(q, "p").result == 1
    q.complete(claim_one(q))  # c finishes: p is free to go
    assert q.purge("succeeded") == 2 and q.get("p") is None


def test_a_deleted_parent_settles_every_child_at_once_so_its_id_can_be_reused(
    q: leaseq.Queue,
) -> None:
    q.enqueue("p", id="P", delay=60.0)
    q.enqueue_many([{}] * 1_500, depends_on=["P"])
    q.delete("P")  # more than one call's budget, all settled now
    assert q.stats().waiting == 0 and q.stats().cancelled == 1_500
    q.enqueue("p again", id="P")
    q.enqueue("n", id="N", depends_on=["P"])
    q.reap()
    assert job(q, "N").state is State.WAITING  # waits for the new P, untouched by the old
    q.complete(claim_one(q))
    assert job(q, "N").state is State.PENDING


def test_a_child_made_again_under_its_id_is_not_settled_by_its_old_parent(
    q: leaseq.Queue,
) -> None:
    q.enqueue("p", id="P")
    q.enqueue_many([{}] * 1_100, ids=[f"k{i:04d}" for i in range(1_100)], depends_on=["P"])
    q.enqueue("other", id="Q", delay=60.0)
    q.complete(claim_one(q))  # settles 1,000 now; 100 wait on the releasing list
    late = next(k for k in (f"k{i:04d}" for i in range(1_100)) if job(q, k).state is State.WAITING)
    q.delete(late)
    q.enqueue("again", id=late, depends_on=["Q"])
    q.reap()  # settles P's last children
    assert job(q, late).state is State.WAITING and job(q, late).depends_on == ("Q",)
    assert q.stats().waiting == 1


def test_a_dead_parent_is_retried_only_once_its_children_are_settled(q: leaseq.Queue) -> None:
    q.enqueue("p", id="P", max_attempts=1)
    q.enqueue_many([{}] * 1_200, depends_on=["P"])
    q.fail(claim_one(q), "boom")
    with pytest.raises(leaseq.JobStateError, match="still being settled"):
        q.retry_dead("P")
    q.reap()
    assert q.stats().waiting == 0 and q.stats().cancelled == 1_200  # all by the policy
    q.retry_dead("P")
    q.complete(claim_one(q))
    assert q.stats().cancelled == 1_200 and q.stats().pending == 0


def test_damage_by_hand_never_releases_early_nor_half_writes(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("a", id="A")
    q.enqueue("b", id="B", delay=60.0)
    q.enqueue("c", id="C", depends_on=["A", "B"])
    r.hset(q.keys.job("C"), "parents_left", "abc")
    q.complete(claim_one(q))  # A finishes; C must not run on a guess
    row = job(q, "C")
    assert row.state is State.CANCELLED and row.last_error == "damaged row: parents_left=abc"
    assert (job(q, "A").children, job(q, "B").children) == (0, 0)  # it pins nothing now
    # A parent's set overwritten by hand: its completion still writes whole.
    q.enqueue("p", id="P")
    q.enqueue("k", id="K", depends_on=["P"])
    r.delete(q.keys.graph("P"))
    r.set(q.keys.graph("P"), "junk")
    q.complete(claim_one(q))
    assert job(q, "P").state is State.SUCCEEDED and q.stats().active == 0
    assert job(q, "K").state is State.WAITING  # its edge is gone: an operator's to settle


def test_options_that_do_not_apply_are_refused(q: leaseq.Queue) -> None:
    q.enqueue("p", id="p")
    with pytest.raises(leaseq.InvalidArgument, match="no parents"):
        q.schedule("nightly", {}, every=60.0, depends_on=["p"])
    with pytest.raises(leaseq.InvalidArgument, match="cannot be combined"):
        q.enqueue("x", depends_on=["p"], unique=leaseq.Unique("k"))


def test_a_batch_of_children_of_many_parents_is_cut_by_edges(q: leaseq.Queue) -> None:
    parents = [f"p{i}" for i in range(10_000)]
    _, calls = enqueue_calls(q._core, [{}] * 200, None, {"depends_on": parents})
    assert len(calls) == 100  # 2 children a call: 20,000 edges at most


def test_a_parent_with_a_damaged_pin_count_is_refused_before_anything_is_written(
    q: leaseq.Queue, r: Any
) -> None:
    q.enqueue("p", id="P")
    q.enqueue("c", id="C", depends_on=["P"])
    r.hset(q.keys.job("P"), "children", "abc")
    before = sorted(r.keys("*"))
    with pytest.raises(leaseq.DamagedRow):
        q.enqueue("d", id="D", depends_on=["P"])
    assert sorted(r.keys("*")) == before


def test_a_parent_deleted_or_damaged_by_hand_never_strands_its_children(
    q: leaseq.Queue, r: Any
) -> None:
    q.enqueue("a", id="A", delay=60.0)
    q.enqueue("b", id="B", delay=60.0)
    q.enqueue("w", id="W", delay=60.0)
    q.enqueue("wait", id="WAITING", depends_on=["W"])  # a parent that is itself waiting
    q.enqueue("c", id="C", depends_on=["A"])
    q.enqueue("d", id="D", depends_on=["B"], on_parent_failure="run")
    q.enqueue("e", id="E", depends_on=["WAITING"])
    r.delete(q.keys.job("A"))  # by hand, not through leaseq
    r.delete(q.keys.job("WAITING"))
    r.set(q.keys.job("WAITING"), "junk")
    r.hset(q.keys.job("B"), "state", "bogus")
    q.reap()  # the waiting sweep
    assert (job(q, "C").state, job(q, "C").last_error) == (State.CANCELLED, "parent A was deleted")
    assert job(q, "D").state is State.PENDING and job(q, "D").failed_parents == ("B",)
    assert job(q, "E").last_error == "parent WAITING is damaged"
    q.reap()
    assert q.stats().waiting == 0
