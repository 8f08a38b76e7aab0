"""The ready list (docs/keys-and-rows.md#the-ready-list): ungrouped pending jobs
of priority 0 wait in LIST ``ready``, claimed before ZSET ``pending``; a job that
leaves without a claim leaves a stale entry, counted in meta ``ready_stale`` and
dropped by the claim that pops it, never searched for with LREM.

Cases taking ``q`` and ``r`` run on fakeredis and a real server, and again on the
asyncio queue (tests/transport/test_aio.py).
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq.store import filters as _filters
from leaseq.store import purge as _purge
from leaseq.testing import jobs
from tests.support.backends import Clock
from tests.support.store import drive_pages, index, text


def listed(q: Any, r: Any) -> list[str]:
    """LIST ready as ``redis-cli LRANGE`` shows it, stale entries included."""
    return [text(i) for i in r.lrange(q.keys.ready, 0, -1)]


def stale(q: Any, r: Any) -> int:
    return int(r.hget(q.keys.meta, "ready_stale") or 0)


def test_default_jobs_wait_in_the_list_and_the_others_in_the_set(q: Any, r: Any) -> None:
    a = q.enqueue("a", id="a")
    batch = q.enqueue_many(["b", "c"], ids=["b", "c"])
    q.enqueue("urgent-later", id="p5", priority=5)
    q.enqueue("fair", id="g", group="tenant-1")
    assert listed(q, r) == [a, *batch]
    assert [text(i) for i in r.zrange(q.keys.pending, 0, -1)] == ["p5", "g"]
    assert q.stats().pending == 5
    # Priority 0 runs first, oldest first, then the set by priority; the group
    # takes its turns between the ungrouped jobs' (fair groups).
    got = [lease.id for lease in q.claim_many(10, ttl=30.0)]
    assert [i for i in got if i != "g"] == ["a", "b", "c", "p5"] and "g" in got
    assert listed(q, r) == [] and r.zcard(q.keys.pending) == 0


def test_priorities_keep_their_order_around_the_list(q: Any, r: Any) -> None:
    for i, priority in enumerate([5, 0, 3, 0, 5, 0]):
        q.enqueue(i, id=f"j{i}", priority=priority)
    order = [lease.id for lease in q.claim_many(10, ttl=30.0)]
    assert order == ["j1", "j3", "j5", "j2", "j0", "j4"]


def test_a_cancelled_pending_job_leaves_a_stale_entry_the_claim_drops(q: Any, r: Any) -> None:
    ids = q.enqueue_many(list(range(5)), ids=[f"j{i}" for i in range(5)])
    q.cancel("j1")
    q.delete("j3")
    # O(1): nothing searched the list; its entries stay, counted stale.
    assert listed(q, r) == ids and stale(q, r) == 2
    assert q.stats().pending == 3
    assert [j.id for j in jobs(q, "pending")] == ["j0", "j2", "j4"]
    assert list(index(q, "pending")) == ["j0", "j2", "j4"]
    got = [lease.id for lease in q.claim_many(10, ttl=30.0)]
    assert got == ["j0", "j2", "j4"]
    assert listed(q, r) == [] and stale(q, r) == 0 and q.stats().pending == 0
    assert q.get("j1").state == leaseq.State.CANCELLED and q.get("j3") is None


def test_an_id_made_again_after_its_row_went_runs_once(q: Any, r: Any) -> None:
    q.enqueue("first", id="first")
    q.enqueue("old", id="same")
    q.delete("same")
    q.enqueue("new", id="same")
    q.enqueue("other", id="other")
    # Two entries of one pending job: the first claims it, the second is stale.
    assert listed(q, r) == ["first", "same", "same", "other"] and stale(q, r) == 1
    assert q.stats().pending == 3
    got = q.claim_many(10, ttl=30.0)
    assert [(lease.id, lease.payload) for lease in got] == [
        ("first", "first"),
        ("same", "new"),
        ("other", "other"),
    ]
    assert listed(q, r) == [] and stale(q, r) == 0 and q.stats().pending == 0
    assert q.claim(ttl=30.0) is None


def test_an_id_made_again_in_a_group_is_not_claimed_through_its_stale_entry(q: Any, r: Any) -> None:
    q.enqueue("first", id="first")
    q.enqueue("old", id="same")
    q.cancel("same")
    q.purge("cancelled")
    q.enqueue("new", id="same", group="tenant-1")
    assert listed(q, r) == ["first", "same"] and stale(q, r) == 1
    assert q.stats().pending == 2
    first, lease = q.claim_many(10, ttl=30.0)
    assert first.id == "first" and (lease.id, lease.payload) == ("same", "new")
    assert q.get("same").group == "tenant-1"
    # Leased through its group (the rotation's count), and the stale entry dropped.
    assert int(r.hget(q.keys.group_active, "tenant-1")) == 1
    assert listed(q, r) == [] and stale(q, r) == 0
    assert r.zcard(q.keys.pending) == 0 and r.zcard(q.keys.group("tenant-1")) == 0


def test_a_pending_job_past_its_deadline_leaves_a_stale_entry(q: Any, clock: Clock) -> None:
    per = 10.0 if clock.fake else 0.3
    late = q.enqueue("late", expires=per)
    keeps = q.enqueue("keeps")
    clock.advance(per * 1.05)
    assert [lease.id for lease in q.claim_many(10, ttl=30.0)] == [keeps]
    assert q.get(late).state == leaseq.State.DEAD
    assert q.stats().pending == 0 and q.stats().dead == 1


def test_oldest_pending_age_skips_stale_entries(q: Any, r: Any, clock: Clock) -> None:
    q.enqueue("first", id="first")
    clock.advance(clock.lease(1.0, 0.05))
    q.enqueue("second", id="second")
    q.cancel("first")
    age = q.stats().oldest_pending_age
    assert age is not None
    assert age < (1.0 if clock.fake else 0.05)
    assert (q.get("second").enqueued_at or 0) > (q.get("first").enqueued_at or 0)


def test_entries_written_by_an_older_version_are_still_claimed(q: Any, r: Any) -> None:
    """Before the list, every pending id was in the set at priority * 2^33 + seq:
    such an entry is claimed after the list's jobs, and nothing is migrated."""
    q.enqueue("new", id="new")
    q.enqueue("placeholder", id="old", priority=7)
    r.hdel(q.keys.job("old"), "priority")
    r.zadd(q.keys.pending, {"old": 42})
    assert q.stats().pending == 2
    assert [lease.id for lease in q.claim_many(10, ttl=30.0)] == ["new", "old"]
    assert q.stats().pending == 0


def test_a_pending_row_edited_into_a_group_by_hand_is_still_claimed(q: Any, r: Any) -> None:
    q.enqueue("x", id="edited")
    r.hset(q.keys.job("edited"), "group", "by-hand")
    (lease,) = q.claim_many(10, ttl=30.0)
    assert lease.id == "edited"
    assert listed(q, r) == [] and stale(q, r) == 0


def test_a_ready_key_damaged_by_hand_is_a_typed_error(q: Any, r: Any) -> None:
    r.set(q.keys.ready, "not a list")
    with pytest.raises(leaseq.DamagedKey):
        q.enqueue("x", id="x")
    assert q.get("x") is None  # refused before anything was written
    assert r.zcard(q.keys.pending) == 0


def test_purge_of_pending_takes_its_snapshot_of_the_list(q: leaseq.Queue, r: Any) -> None:
    """10,000 jobs in the list, a few stale and a few in the set: a paged purge
    deletes exactly those that were pending when it began, while claims pop the
    list's head and new jobs arrive between its pages."""
    ids = q.enqueue_many(list(range(10_000)))
    q.enqueue("p", id="prioritized", priority=3)
    for job_id in ids[100:110]:
        q.cancel(job_id)
    claimed: set[str] = set()
    late: list[str] = []

    def meanwhile(after: int) -> None:
        if after == 1:
            claimed.update(lease.id for lease in q.claim_many(50, ttl=30.0))
            late.extend(q.enqueue_many(["late"] * 20))

    pages, done = drive_pages(q, _purge.purge_op(q._core, "pending", limit=1000), meanwhile)
    assert len(claimed) == 50 and claimed <= set(ids)
    assert done == sum(page.done for page in pages) == 10_000 - 10 - 50 + 1
    assert {j.id for j in jobs(q, "pending")} == set(late)
    assert q.stats().pending == 20
    assert {lease.id for lease in q.claim_many(100, ttl=30.0)} == set(late)
    assert listed(q, r) == [] and stale(q, r) == 0


def test_a_find_pages_through_the_list_while_claims_pop_its_head(q: leaseq.Queue, r: Any) -> None:
    """A walk pages by an entry's place, which claims do not move: no pending job
    is skipped or seen twice, however many are claimed between its pages."""
    ids = q.enqueue_many([{"n": i} for i in range(12_000)])
    q.enqueue({"n": -1}, id="set", priority=2)
    flt = _filters.JobFilter()
    seen: list[str] = []
    mark = None
    claimed: set[str] = set()
    while True:
        found = q._drive(_filters.find_page([q._core], "pending", flt, mark, want=700))
        seen += [job.id for job in found.jobs]
        claimed |= {lease.id for lease in q.claim_many(300, ttl=30.0)}
        if found.mark is None:
            break
        mark = found.mark
    assert len(seen) == len(set(seen))
    # Every job still pending when the walk reached it was seen.
    assert set(ids) - claimed <= set(seen)
    assert seen[-1] == "set"
    assert q.find("pending", limit=5) == jobs(q, "pending")[:5]


def test_the_list_costs_a_fraction_of_a_sorted_set(rr: Any) -> None:
    """The reason for the list: bytes per pending id (MEMORY USAGE, a real server's)."""
    q = leaseq.Queue("emails", redis=rr)
    n = 10_000
    q.enqueue_many(list(range(n)))
    q.enqueue_many(list(range(n)), priority=1)
    per_list = rr.memory_usage(q.keys.ready, samples=0) / n
    per_set = rr.memory_usage(q.keys.pending, samples=0) / n
    # Redis 7.0: ~22 against ~125; Valkey 8's sorted sets are leaner (~89).
    assert per_list < 40 and 3 * per_list < per_set


def test_stale_entries_do_not_use_up_the_ungrouped_turn(q: Any, r: Any) -> None:
    """Fair groups rotate with the ungrouped jobs as one more turn: entries of
    jobs gone are dropped within that turn, which leases the next live one."""
    q.enqueue("x", id="x")
    for i in (1, 2, 3):
        q.enqueue(i, id=f"a{i}", group="a")
    q.enqueue("y", id="y")
    q.enqueue("z", id="z")
    q.cancel("x")
    order = []
    while (lease := q.claim(ttl=30.0)) is not None:
        order.append(lease.id)
    assert order == ["y", "a1", "z", "a2", "a3"]
    assert listed(q, r) == [] and stale(q, r) == 0


def test_purge_of_pending_reports_a_damaged_row_in_the_list(q: Any, r: Any) -> None:
    q.enqueue_many(["a", "b", "c"], ids=["a", "b", "c"])
    r.set(q.keys.job("b"), "overwritten")
    damaged: list[Any] = []
    assert q.purge("pending", damaged=damaged) == 2
    assert [d.job_id for d in damaged] == ["b"]
    assert r.get(q.keys.job("b")) == b"overwritten"  # not leaseq's to delete
    # Handed to the set as it is, where a claim dead-letters it for an operator to see.
    assert q.claim(ttl=30.0) is None
    assert [text(i) for i in r.zrange(q.keys.dead, 0, -1)] == ["b"]


def test_a_groups_stale_entry_does_not_claim_a_job_waiting_in_the_list(q: Any, r: Any) -> None:
    """An id deleted from a fair group and made again ungrouped waits in the list:
    the group's old entry must not lease it ahead of the jobs before it."""
    q.enqueue_many(["a"] * 5, ids=[f"A{i}" for i in range(5)])
    q.enqueue("x", id="X", group="h")
    q.delete("X")  # its entry in the group's set stays (dropped when popped)
    q.enqueue("x2", id="X")
    order = []
    while (lease := q.claim(ttl=30.0)) is not None:
        order.append(lease.id)
        assert q.stats().pending == 6 - len(order)
    assert order == ["A0", "A1", "A2", "A3", "A4", "X"]
    assert listed(q, r) == [] and stale(q, r) == 0


def test_purge_of_pending_keeps_an_id_made_again_after_it_began(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    ids = q.enqueue_many(list(range(3_000)))
    again = ids[2_000:2_050]

    def remake(after: int) -> None:
        if after == 1:  # deleted and made again while the purge runs: a new job
            clock.advance(0.002)  # enqueued after the purge's first call, not in its ms
            for job_id in again:
                q.delete(job_id)
                q.enqueue("again", id=job_id)

    pages, done = drive_pages(q, _purge.purge_op(q._core, "pending", limit=500), remake)
    assert len(pages) > 1 and done == 3_000 - 50
    assert sorted(j.id for j in jobs(q, "pending")) == sorted(again)
    assert q.stats().pending == 50
    assert sorted(lease.id for lease in q.claim_many(100, ttl=30.0)) == sorted(again)
    assert listed(q, r) == [] and stale(q, r) == 0


def test_a_drop_stopped_half_way_keeps_the_count(q: leaseq.Queue, r: Any) -> None:
    ids = q.enqueue_many(list(range(2_500)))
    for job_id in ids[:10]:
        q.cancel(job_id)
    q._run(_purge.drop_call(q._core, False, 300))  # one call of a drop, then stopped
    q.resume()
    left = sum(1 for j in jobs(q, "pending"))
    # A call looks at 16 entries at least: the 10 stale ones went, and some live ones.
    assert 0 < left < 2_490 and q.stats().pending == left
    assert len(q.claim_many(1000, ttl=30.0)) == min(1000, left)
    assert q.stats().pending == max(0, left - 1000)


@pytest.mark.parametrize("junk", ["abc", "1e99", "99999999999999999999", "9223372036854775807"])
def test_counts_edited_by_hand_start_over_instead_of_failing_a_call(
    q: Any, r: Any, junk: str
) -> None:
    """ready_stale and ready_popped are bookkeeping: junk in them must never fail a
    call half way (a claim whose rows say active but whose leases nobody got)."""
    q.enqueue_many(list(range(10)), ids=[f"j{i}" for i in range(10)])
    q.cancel("j1")
    r.hset(q.keys.meta, mapping={"ready_popped": junk, "ready_stale": junk})
    got = [lease.id for lease in q.claim_many(3, ttl=30.0)]
    assert got == ["j0", "j2", "j3"]
    assert r.zcard(q.keys.active) == 3 and q.stats().active == 3
    q.delete("j5")
    assert q.purge("pending") == 5
    assert q.stats().pending == 0 and q.claim(ttl=30.0) is None
    for field in ("ready_popped", "ready_stale"):
        assert int(r.hget(q.keys.meta, field) or 0) >= 0


def test_a_bulk_cancel_from_the_head_leaves_no_stale_entries(q: Any, r: Any) -> None:
    """A job cancelled at the list's head (as a bulk cancel walking pending in order
    finds each) leaves the list at once; elsewhere its entry stays, counted stale."""
    ids = q.enqueue_many(list(range(2_000)))
    for job_id in ids[:1_000]:
        q.cancel(job_id)
    assert listed(q, r) == ids[1_000:] and stale(q, r) == 0
    q.cancel(ids[1_500])
    assert len(listed(q, r)) == 1_000 and stale(q, r) == 1
    assert q.stats().pending == 999
    assert [j.id for j in q.ls("pending", limit=3)] == ids[1_000:1_003]


def test_a_sharded_ls_reads_past_a_shards_stale_entries(r: Any) -> None:
    """A sharded queue's ls counts offsets in jobs shown: a shard whose first
    entries are stale is read on, not left for the next shard."""
    sq = leaseq.ShardedQueue("wide", shards=2, redis=r)
    ids = sq.enqueue_many(list(range(400)))
    first = sq.shards[0]
    shard_ids = [text(i) for i in r.lrange(first.keys.ready, 0, -1)]
    for job_id in shard_ids[1:101]:  # out of the head: their entries stay, stale
        sq.cancel(job_id)
    live = set(ids) - set(shard_ids[1:101])
    pages = [sq.ls("pending", offset=o, limit=50) for o in range(0, 400, 50)]
    shown = [job.id for page in pages for job in page]
    assert len(shown) == len(set(shown)) == len(live) and set(shown) == live
    assert sq.stats().pending == len(live)


def test_an_id_made_again_at_a_priority_is_shown_once_behind_its_stale_entry(
    q: Any, r: Any
) -> None:
    """The list's stale entry of an id comes before the set's live one in a page:
    ls and find show the job once, from the set."""
    q.enqueue("first", id="first")
    q.enqueue("old", id="X")
    q.cancel("X")  # not the head: its entry stays, stale
    q.purge("cancelled")
    q.enqueue("new", id="X", priority=2)
    assert listed(q, r) == ["first", "X"] and stale(q, r) == 1
    assert [(j.id, j.payload) for j in q.ls("pending")] == [("first", "first"), ("X", "new")]
    assert [(j.id, j.payload) for j in q.find("pending")] == [("first", "first"), ("X", "new")]
    assert [(j.id, j.payload) for j in q.find("pending", text="new")] == [("X", "new")]
