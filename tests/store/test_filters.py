"""Finding a state's jobs by kind, age and text (``leaseq.store.filters``), on both
backends and (through the shared suite) on the asyncio queue: the walk pages
through the state's index with a cursor, bounded by a budget of entries,
exact however many entries share one score; an age on the time a state's
index is scored by narrows the walk to that score range; a walk made for
acting counts its matches as gone and steps over the ones the action
refused; rows damaged by hand are reported and stepped over.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import leaseq
from leaseq.store.filters import (
    AGE_FIELDS,
    SCORED_BY,
    FoundPage,
    JobFilter,
    Mark,
    count_in_range,
    find_page,
    parse_age,
)
from leaseq.types import State
from tests.support.backends import Clock
from tests.support.security import PASSWORD


def walk(q: Any, state: str, flt: JobFilter, want: int, **how: Any) -> tuple[list[str], int]:
    """Every match's id, page by page, and how many find calls it took."""
    ids: list[str] = []
    mark: Mark | None = None
    calls = 0
    while True:
        found: FoundPage = q._drive(find_page([q._core], state, flt, mark, want=want, **how))
        calls += 1
        ids += [j.id for j in found.jobs]
        if found.mark is None:
            return ids, calls
        mark = Mark.parse(found.mark.text())  # as a URL carries it
        assert calls < 1000, "the walk does not end"


def _dead(q: Any, ids: list[str], error: str = "boom") -> None:
    q.enqueue_many([{"n": i} for i in ids], ids=ids)
    for lease in q.claim_many(len(ids)):
        q.fail(lease, error, dead=True)


def test_find_by_kind_pages_with_a_cursor_in_index_order(q: leaseq.Queue) -> None:
    for i in range(30):
        q.enqueue({"n": i}, id=f"a{i:02d}", kind="mail")
        q.enqueue({"n": i}, id=f"b{i:02d}", kind="sms")
    first = q._drive(find_page([q._core], "pending", JobFilter(kind="sms"), want=7, budget=1000))
    assert [j.id for j in first.jobs] == [f"b{i:02d}" for i in range(7)]
    assert first.looked == 14 and first.mark is not None
    ids, calls = walk(q, "pending", JobFilter(kind="sms"), 7, budget=1000)
    assert ids == [f"b{i:02d}" for i in range(30)] and calls == 5
    # A budget bounds what one call looks at: fewer matches, and a mark to go on.
    short = q._drive(find_page([q._core], "pending", JobFilter(kind="sms"), want=50, budget=9))
    assert short.looked == 9 and len(short.jobs) == 4 and short.mark is not None
    assert walk(q, "pending", JobFilter(kind="none"), 50, budget=11)[0] == []


def test_text_is_found_in_id_payload_and_error_ignoring_case(q: leaseq.Queue) -> None:
    _dead(q, ["d1"], "SMTPError: 550 mailbox Unavailable")
    q.enqueue({"to": "Ann@Example.org", "tags": ["vip"]}, id="order-1")
    q.enqueue({"to": "bob@example.org"}, id="ORDER-2")
    pending = ["order-1", "ORDER-2"]
    assert walk(q, "pending", JobFilter(text="ann@example"), 10)[0] == ["order-1"]
    assert walk(q, "pending", JobFilter(text="order-"), 10)[0] == pending
    # The payload as the dashboard shows it: compact JSON.
    assert walk(q, "pending", JobFilter(text='"tags":["vip"]'), 10)[0] == ["order-1"]
    # ...or as `leaseq ls` and `show` print it, spaced.
    assert walk(q, "pending", JobFilter(text='"tags": ["vip"]'), 10)[0] == ["order-1"]
    assert walk(q, "dead", JobFilter(text="mailbox unavailable"), 10)[0] == ["d1"]
    assert walk(q, "dead", JobFilter(text="mailbox", kind="mail"), 10)[0] == []


def test_age_bounds_are_measured_on_the_states_time(q: leaseq.Queue, clock: Clock) -> None:
    q.enqueue_many([{"n": i} for i in range(3)], ids=["old0", "old1", "old2"])
    clock.advance(0.05)
    q.enqueue_many([{"n": i} for i in range(2)], ids=["new0", "new1"])
    newest = q.get("new0")
    assert newest is not None and newest.enqueued_at is not None
    now_ms = round(newest.enqueued_at * 1000) + 10
    older = JobFilter(older_than=0.03)
    newer = JobFilter(newer_than=0.03)
    assert walk(q, "pending", older, 10, now_ms=now_ms)[0] == ["old0", "old1", "old2"]
    assert walk(q, "pending", newer, 10, now_ms=now_ms)[0] == ["new0", "new1"]
    both = JobFilter(older_than=0.001, newer_than=1.0)
    assert len(walk(q, "pending", both, 10, now_ms=now_ms)[0]) == 5
    # The age of a pending job is of its enqueue; a finished time it has not.
    with pytest.raises(leaseq.InvalidArgument, match="enqueued_at"):
        q._drive(find_page([q._core], "pending", JobFilter(older_than=1, age_of="finished_at")))


def test_the_states_scored_by_a_row_time_are_scored_by_it(q: leaseq.Queue, r: Any) -> None:
    # SCORED_BY is a table of its own (tests/test_states_declared_once.py allows it
    # here): each entry must be what the scripts really score the index with.
    _dead(q, ["gone"])
    parent = q.enqueue("p")
    child = q.enqueue("c", depends_on=[parent])
    for state, row_id in ((State.DEAD, "gone"), (State.WAITING, child)):
        job = q.get(row_id)
        assert job is not None and job.state is state
        when = getattr(job, SCORED_BY[state])
        assert r.zscore(q.keys.index(state.value), row_id) == round(when * 1000)
    assert set(SCORED_BY) == {State.DEAD, State.WAITING}
    assert all(AGE_FIELDS[s][-1] == "enqueued_at" for s in State)
    assert AGE_FIELDS[State.ACTIVE][0] == "claimed_at"
    assert all(AGE_FIELDS[s][0] == "finished_at" for s in State if s.finished)


def test_an_age_on_the_dead_index_score_walks_only_that_range(
    q: leaseq.Queue, clock: Clock
) -> None:
    _dead(q, [f"early{i}" for i in range(40)])
    clock.advance(0.05)
    _dead(q, [f"late{i}" for i in range(3)])
    late = q.get("late0")
    assert late is not None and late.finished_at is not None
    now_ms = round(late.finished_at * 1000) + 10
    newer = JobFilter(newer_than=0.03)
    found = q._drive(find_page([q._core], "dead", newer, want=100, now_ms=now_ms))
    assert sorted(j.id for j in found.jobs) == ["late0", "late1", "late2"]
    assert found.looked == 3  # the 40 early deaths were never read
    # By enqueue time instead, every row is read and checked.
    by_enqueue = JobFilter(newer_than=0.03, age_of="enqueued_at")
    found = q._drive(find_page([q._core], "dead", by_enqueue, want=100, now_ms=now_ms))
    assert found.looked == 43 and sorted(j.id for j in found.jobs) == ["late0", "late1", "late2"]
    assert JobFilter(older_than=60).exact_by_score("dead")
    assert not by_enqueue.exact_by_score("dead")


def test_many_entries_of_one_score_are_each_found_once(q: leaseq.Queue, r: Any) -> None:
    # Hand-made ties: 25 dead entries at one score, and 5 on either side.
    ids = [f"t{i:02d}" for i in range(35)]
    _dead(q, ids)
    r.zadd(q.keys.dead, {i: 1000 for i in ids[5:30]})
    r.zadd(q.keys.dead, {i: 500 for i in ids[:5]})
    r.zadd(q.keys.dead, {i: 2000 for i in ids[30:]})
    for want in (1, 3, 7, 25, 100):
        found, _ = walk(q, "dead", JobFilter(text="t"), want)
        assert sorted(found) == ids and len(found) == len(set(found)), want
    odd = JobFilter(text="1")  # t01, t10..t19, t21, t31
    assert walk(q, "dead", odd, 2, budget=4)[0] == [i for i in ids if "1" in i]


def test_a_walk_for_acting_steps_over_what_the_action_refused(q: leaseq.Queue, r: Any) -> None:
    ids = [f"j{i:02d}" for i in range(30)]
    _dead(q, ids)
    r.zadd(q.keys.dead, {i: 1000 for i in ids})  # all in one score: the hard case
    keep = {"j03", "j04", "j17", "j29"}  # the "action" refuses these
    acted: list[str] = []
    seen: list[str] = []
    mark: Mark | None = None
    for _ in range(100):
        found = q._drive(
            find_page([q._core], "dead", JobFilter(text="j"), mark, want=4, budget=6, acting=True)
        )
        seen += [j.id for j in found.jobs]
        for job in found.jobs:
            if job.id not in keep:
                assert q.delete(job.id) == "dead"
                acted.append(job.id)
        mark = found.resume(refused=keep)
        if mark is None:
            break
    assert sorted(seen) == ids  # each met once: the refused ones are stepped over
    assert sorted(acted) == sorted(set(ids) - keep)
    assert sorted(x.decode() for x in r.zrange(q.keys.dead, 0, -1)) == sorted(keep)


def test_a_walk_leaves_out_jobs_that_enter_after_it_began(q: leaseq.Queue, clock: Clock) -> None:
    _dead(q, [f"d{i}" for i in range(6)])
    first = q._drive(find_page([q._core], "dead", JobFilter(text="d"), want=2))
    assert first.mark is not None and first.mark.upto
    clock.advance(0.01)
    _dead(q, ["d-late"])  # dies after the walk took its snapshot
    rest = q._drive(find_page([q._core], "dead", JobFilter(text="d"), first.mark, want=100))
    assert [j.id for j in rest.jobs] == ["d2", "d3", "d4", "d5"] and rest.mark is None


def test_damaged_rows_and_stale_entries_are_stepped_over(q: leaseq.Queue, r: Any) -> None:
    _dead(q, ["a", "bad-attempts", "c"])
    r.hset(q.keys.job("bad-attempts"), "attempts", "abc")
    r.set(q.keys.job("not-a-hash"), "x")
    r.zadd(q.keys.dead, {"not-a-hash": 1, "gone": 2})
    q.enqueue({"n": 1}, id="moved")  # pending
    r.zadd(q.keys.dead, {"moved": 3})  # a stale entry: the row is pending
    every = q._drive(find_page([q._core], "dead", JobFilter(), want=100))
    assert [j.id for j in every.jobs] == ["a", "c"]  # every readable dead row
    found = q._drive(find_page([q._core], "dead", JobFilter(text="a"), want=100))
    assert [j.id for j in found.jobs] == ["a"]
    assert sorted(d.job_id for d in found.damaged) == ["bad-attempts", "not-a-hash"]
    assert found.looked == 6 and found.mark is None


def test_bad_filters_and_cursors_are_refused() -> None:
    assert parse_age("90s") == 90 and parse_age("10m") == 600 and parse_age("1h30m") == 5400
    assert parse_age("2d") == 172_800 and parse_age("45") == 45 and parse_age(" 1.5h ") == 5400
    for bad in ("", "10x", "m", "-5m", "1e9d", "10 minutes"):
        with pytest.raises(leaseq.InvalidArgument):
            parse_age(bad)
    with pytest.raises(leaseq.InvalidArgument, match="newer than"):
        JobFilter(older_than=3600, newer_than=60)
    with pytest.raises(leaseq.InvalidArgument):
        JobFilter(older_than=-1)
    with pytest.raises(leaseq.InvalidArgument):
        JobFilter(text="x" * 1001)
    assert Mark.parse(Mark(1, "1000", "-inf", 3).text()) == Mark(1, "1000", "-inf", 3)
    for bad in ("", "1~2~3", "a~1~2~3", "0~1~nan~0", "-1~1~1~0", "0~1~1~-2", "0~x~1~0"):
        with pytest.raises(leaseq.InvalidArgument):
            Mark.parse(bad)


def test_find_across_the_shards_of_a_sharded_queue(r: Any) -> None:
    sq = leaseq.ShardedQueue("wide", shards=3, redis=r)
    ids = [f"w{i:02d}" for i in range(30)]
    sq.enqueue_many([{"n": i} for i in range(30)], ids=ids, kind="even")
    cores = [s._core for s in sq.shards]
    seen: list[str] = []
    parts: set[int] = set()
    mark: Mark | None = None
    while True:
        found = sq._drive(find_page(cores, "pending", JobFilter(kind="even"), mark, want=4))
        seen += [j.id for j in found.jobs]
        parts |= set(found.parts)
        for job, part in zip(found.jobs, found.parts, strict=True):
            assert sq.shards[part].get(job.id) is not None
        if found.mark is None:
            break
        mark = found.mark
    assert sorted(seen) == ids and parts == {0, 1, 2}


def test_find_runs_as_the_least_privilege_acl_user(acl_server: Any) -> None:
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "emails")
    _dead(q, ["a", "b"])
    aged = JobFilter(older_than=0.0)
    found = q._drive(find_page([q._core], "dead", aged, want=10))
    assert sorted(j.id for j in found.jobs) == ["a", "b"]
    assert q._drive(count_in_range([q._core], "dead", aged, 2**50)) == 2
    q.drop(force=True)


def test_queue_find_walks_the_whole_index_to_its_limit(q: Any, r: Any, clock: Clock) -> None:
    # The public find: every page of short calls, to the end of the index or the
    # limit, whatever the page size: 1,203 pending jobs, the matches spread over them.
    kinds = ["sms" if i % 100 == 7 else "mail" for i in range(1203)]
    ids = [f"j{i:04d}" for i in range(1203)]
    for start in range(0, 1203, 400):
        q.enqueue_many(
            [{"n": i, "to": f"u{i}"} for i in range(start, min(start + 400, 1203))],
            ids=ids[start : start + 400],
            kind=None,
        )
    for job_id, kind in zip(ids, kinds, strict=True):
        if kind == "sms":
            r.hset(q.keys.job(job_id), "kind", "sms")
    sms = q.find("pending", kind="sms")
    assert [j.id for j in sms] == [f"j{i:04d}" for i in range(7, 1203, 100)]
    assert [j.id for j in q.find("pending", kind="sms", limit=3)] == ["j0007", "j0107", "j0207"]
    assert [j.id for j in q.find("pending", text='"to":"u1202"')] == ["j1202"]
    assert q.find("pending", text="nobody") == []
    clock.advance(2.0)
    assert len(q.find("pending", older_than=1.0, limit=2000)) == 1203
    assert q.find("pending", newer_than=1.0) == []
    r.hset(q.keys.job("j0007"), "attempts", "lots")
    damaged: list[leaseq.DamagedRow] = []
    assert len(q.find("pending", kind="sms", damaged=damaged)) == 11
    assert [d.job_id for d in damaged] == ["j0007"]


@pytest.mark.parametrize(
    "how",
    [
        {"limit": 0},
        {"limit": True},
        {"limit": 2.5},
        {"older_than": -1},
        {"older_than": math.nan},
        {"newer_than": "1h"},
        {"kind": None},
        {"text": "x" * 1001},
        {"age_of": "finished_at"},
        {"older_than": 5, "newer_than": 1},
    ],
)
def test_queue_find_refuses_bad_arguments_before_any_call(q: Any, how: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        q.find("pending", **how)
    with pytest.raises(leaseq.InvalidArgument):
        q.find("nosuchstate")


def test_queue_find_across_the_shards(r: Any) -> None:
    sq = leaseq.ShardedQueue("found", shards=3, redis=r)
    ids = [f"f{i:02d}" for i in range(30)]
    sq.enqueue_many([{"n": i} for i in range(30)], ids=ids, kind="x")
    assert sorted(j.id for j in sq.find("pending", kind="x")) == ids
    assert len(sq.find("pending", kind="x", limit=4)) == 4
    assert sq.find("pending", kind="y") == []
