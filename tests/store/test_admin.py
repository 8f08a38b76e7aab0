"""Operator calls on a queue, on both backends: deleting one job, dropping a
queue, running a scheduled job now, and retry-all-dead and purge.

Retry-all-dead and purge step over what they cannot act on, report it and
finish the rest; both work from a fixed snapshot, so a job that dies again
while retry-all runs is not retried twice and a purge ends however many
jobs keep arriving. The runs are sans-I/O generators (``leaseq.store.retry``,
``leaseq.store.purge``): some tests drive them by hand, with small pages, to
act between two pages.
Every operator call also runs as the least-privilege ACL user.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import redis

import leaseq
from leaseq.store import purge as _purge
from leaseq.store import retry as _retry
from leaseq.store.claim import claim_call
from leaseq.store.leases import fail_call
from tests.support.backends import Clock
from tests.support.security import PASSWORD
from tests.support.store import (
    a_budget_runs_out_in_a_script,
    claim_one,
    drive_pages,
    index,
    row,
    snapshot,
)

# -- delete, drop, run_now -------------------------------------------------------------


def test_delete_removes_row_and_index_entry_in_every_idle_state(q: leaseq.Queue) -> None:
    q.enqueue({"n": 1}, id="d", max_attempts=1)
    q.enqueue({"n": 2}, id="s", delay=600)
    lease = claim_one(q)
    assert lease.id == "d"
    q.fail(lease, "boom")  # its one attempt: dead
    q.enqueue({"n": 3}, id="p")
    q.enqueue({"n": 4}, id="c")
    q.cancel("c")
    assert q.delete("d") == "dead"
    assert q.delete("s") == "scheduled"
    assert q.delete("p") == "pending"
    assert q.delete("c") == "cancelled"
    for job_id in ("p", "s", "d", "c"):
        assert q.get(job_id) is None
    s = q.stats()
    assert (s.pending, s.scheduled, s.dead) == (0, 0, 0)


def test_delete_refuses_an_active_job_and_an_unknown_id(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"n": 1}, id="a")
    lease = claim_one(q)
    before = snapshot(r)
    with pytest.raises(leaseq.JobStateError, match="holds a lease"):
        q.delete("a")
    with pytest.raises(leaseq.JobNotFound):
        q.delete("nope")
    with pytest.raises(leaseq.InvalidName):
        q.delete("bad id")
    assert snapshot(r) == before
    q.complete(lease)
    assert q.delete("a") == "succeeded"


def test_delete_takes_a_key_damaged_by_hand(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"n": 1}, id="a")
    r.delete(q.keys.job("a"))
    r.set(q.keys.job("a"), "overwritten")
    assert q.delete("a") == "damaged"
    assert not r.exists(q.keys.job("a"))
    assert "a" not in index(q, "pending")


def test_drop_deletes_every_key_of_the_queue(q: leaseq.Queue, r: Any) -> None:
    other = leaseq.Queue("other", redis=r)
    other.enqueue({"keep": True}, id="k")
    q.enqueue_many([{"n": i} for i in range(5)])
    q.enqueue({"n": 9}, id="s", delay=600)
    done = claim_one(q)
    q.complete(done)
    q.enqueue({"n": 10}, unique=leaseq.Unique("k", period=600.0))  # a key and its window
    r.zadd(q.keys.group_rate_held, {"g": 1})
    q.pause()
    assert q.drop() == 7
    assert [k for k in r.keys("*") if b"{emails}" in k] == []
    assert leaseq.Queue.queues(r) == ["other"]
    assert other.get("k") is not None


def test_drop_refuses_leases_in_flight_unless_forced(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(3)])
    lease = claim_one(q)
    before = snapshot(r)
    with pytest.raises(
        leaseq.JobStateError, match=r"^queue .* has 1 lease\(s\) in flight: stop its workers"
    ):
        q.drop()
    assert snapshot(r) == before
    assert q.drop(force=True) == 3
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lease)
    assert q.stats().pending == 0


def test_drop_works_through_a_big_queue_in_bounded_calls(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(2500)])
    q.enqueue_many([{"n": i} for i in range(100)], delay=600)  # a second index
    steps = _purge.drop(q._core)
    call, replies = next(steps), []
    try:
        while True:
            replies.append(q._run(call))
            call = steps.send(replies[-1])
    except StopIteration as stop:
        assert stop.value == 2600
    assert r.dbsize() == 0
    # Every call deleted some jobs, at most DROP_LIMIT, and said what remained;
    # 2,600 deletions fit no call's time budget (0.75 ms) where time moves.
    left = 2600
    for gone, remaining in replies:
        assert 0 < gone <= _purge.DROP_LIMIT and remaining == left - gone
        left = remaining
    assert len(replies) > (3 if a_budget_runs_out_in_a_script(r) else 2)


def test_run_now_makes_a_scheduled_job_claimable(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"n": 1}, id="later", delay=3600, priority=5)
    q.enqueue({"n": 2}, id="p")
    assert q.claim(ttl=5.0).id == "p"  # type: ignore[union-attr]
    assert q.claim(ttl=5.0) is None
    q.run_now("later")
    assert "run_at" not in row(q, "later") and "later" not in index(q, "scheduled")
    assert row(q, "later")["state"] == "pending"
    lease = claim_one(q, ttl=5.0)
    assert (lease.id, lease.attempt) == ("later", 1)
    before = snapshot(r)
    with pytest.raises(leaseq.JobStateError, match="only a scheduled or suspended job"):
        q.run_now("later")
    with pytest.raises(leaseq.JobNotFound):
        q.run_now("nope")
    assert snapshot(r) == before


# -- retry-all-dead and purge: paged runs over a snapshot ------------------------------


def _dead(q: leaseq.Queue, ids: list[str]) -> None:
    q.enqueue_many(ids, ids=ids)
    for lease in q.claim_many(len(ids)):
        q.fail(lease, "boom", dead=True)


def _break(q: leaseq.Queue, r: Any) -> None:
    """Two damaged entries in dead: a key that is not a hash, a row with bad attempts."""
    r.set(q.keys.job("not-a-hash"), "x")
    r.zadd(q.keys.dead, {"not-a-hash": 1})
    _dead(q, ["bad-attempts"])
    r.hset(q.keys.job("bad-attempts"), "attempts", "abc")


def test_retry_all_dead_steps_over_damaged_jobs_and_names_them(q: leaseq.Queue, r: Any) -> None:
    _break(q, r)
    _dead(q, [f"ok{i}" for i in range(5)])
    damaged: list[leaseq.DamagedRow] = []
    assert q.retry_all_dead(damaged=damaged) == 5
    assert sorted((d.job_id, d.field) for d in damaged) == [
        ("bad-attempts", "attempts"),
        ("not-a-hash", "<key>"),
    ]
    assert q.stats().pending == 5
    assert sorted(m.decode() for m in r.zrange(q.keys.dead, 0, -1)) == [
        "bad-attempts",
        "not-a-hash",
    ]
    assert q.retry_all_dead() == 0  # and again: no error, nothing more


def test_purge_dead_steps_over_a_key_that_is_not_a_hash(q: leaseq.Queue, r: Any) -> None:
    _break(q, r)
    _dead(q, [f"ok{i}" for i in range(5)])
    damaged: list[leaseq.DamagedRow] = []
    assert q.purge("dead", damaged=damaged) == 6  # bad-attempts is still a dead row
    assert [(d.job_id, d.field) for d in damaged] == [("not-a-hash", "<key>")]
    assert r.get(q.keys.job("not-a-hash")) == b"x"  # not leaseq's to delete
    assert [m.decode() for m in r.zrange(q.keys.dead, 0, -1)] == ["not-a-hash"]


def test_pages_step_past_many_damaged_entries_with_one_score(q: leaseq.Queue, r: Any) -> None:
    # More damaged entries at one score than a page holds: the cursor's skip
    # count must carry the run past them, not loop on them.
    for i in range(7):
        r.set(q.keys.job(f"bad{i}"), "x")
        r.zadd(q.keys.dead, {f"bad{i}": 5})
        r.hset(
            q.keys.job(f"ok{i}"),
            mapping={"state": "dead", "attempts": 1, "max_attempts": 1, "payload": '"p"'},
        )
        r.zadd(q.keys.dead, {f"ok{i}": 5})
    result = q._drive(_retry.retry_all_dead_op(q._core, None, limit=3))
    assert result.done == 7 and len(result.damaged) == 7
    result = q._drive(_purge.purge_op(q._core, "dead", limit=2))
    assert result.done == 0 and len(result.damaged) == 7


def test_a_job_that_dies_again_during_retry_all_is_not_retried_twice(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    ids = [f"j{i}" for i in range(6)]
    _dead(q, ids)
    clock.advance(clock.lease(1.0, 0.002))

    def die_again(after: int) -> None:
        if after == 1:  # the two retried jobs run at once and die again, mid-run
            for lease in q.claim_many(2):
                q.fail(lease, "again", dead=True)

    pages, done = drive_pages(q, _retry.retry_all_dead_op(q._core, 1, limit=2), die_again)
    assert pages[0].done == 2 and done == sum(page.done for page in pages) == 6
    # The two that died again stay dead for the operator's next decision.
    assert r.zcard(q.keys.dead) == 2
    assert q.stats().pending == 4
    assert q.stats().totals["retried"] == 6


def test_purge_ends_while_jobs_keep_arriving(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many(range(10))
    run = _purge.purge_op(q._core, "pending", limit=3)
    # A producer outpacing the purge, between its pages.
    pages, done = drive_pages(q, run, lambda _: q.enqueue_many(range(3)))
    assert done == 10 and len(pages) <= 5
    assert q.stats().pending == 3 * len(pages)  # every arrival survived


def test_runs_go_on_past_a_page_cut_at_the_time_budget(q: leaseq.Queue, r: Any) -> None:
    # 1,200 dead rows (written directly: quick), retried then purged in pages of
    # up to 1,000 entries; a page cut short at the time budget says more is left.
    with r.pipeline(transaction=False) as pipe:
        for i in range(1200):
            job = {"state": "dead", "attempts": 1, "max_attempts": 1, "payload": '"p"'}
            pipe.hset(q.keys.job(f"j{i:04d}"), mapping=job)
            pipe.zadd(q.keys.dead, {f"j{i:04d}": i})
        pipe.execute()
    cuts = a_budget_runs_out_in_a_script(r)
    for run, retrying in (
        (_retry.retry_all_dead_op(q._core, None), True),
        (_purge.purge_op(q._core, "pending"), False),
    ):
        pages, done = drive_pages(q, run)
        assert done == 1200 == sum(page.done for page in pages)
        assert all(page.more for page in pages[:-1]) and not pages[-1].more
        # Each page acts on one inner page (8 retries, 16 purges) at least, on a
        # full page at most.
        assert all(8 <= page.done <= 1000 for page in pages[:-1])
        assert len(pages) > (2 if cuts else 1)
        if retrying:
            assert q.stats().pending == 1200 and r.zcard(q.keys.dead) == 0
        else:
            assert q.stats().pending == 0 and r.keys(q.keys.job_prefix + "*") == []


def test_bad_arguments_are_refused_before_any_call(q: leaseq.Queue, r: Any) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        _purge.purge_op(q._core, "active")
    with pytest.raises(leaseq.InvalidArgument):
        _retry.retry_all_dead_op(q._core, 0)
    assert r.dbsize() == 0


def test_retry_dead_of_a_key_that_is_not_a_hash_names_the_job(q: leaseq.Queue, r: Any) -> None:
    r.set(q.keys.job("k"), "x")
    r.zadd(q.keys.dead, {"k": 1})
    with pytest.raises(leaseq.DamagedRow) as exc:
        q.retry_dead("k")
    assert exc.value.job_id == "k" and exc.value.field == "<key>"
    q.enqueue("x", id="fine")
    q.fail(claim_one(q), "x", dead=True)
    assert q.retry_dead("fine") == 6
    assert row(q, "fine")["state"] == "pending"


def test_retry_all_dead_retries_each_job_once_while_they_keep_dying(
    q: leaseq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through the public API only: every retry is followed at once by the
    # job running and dying again. Paging the live dead set by offset (the
    # old loop) retried them again and again.
    _dead(q, [f"j{i}" for i in range(6)])
    kills = 0
    page = _retry.retry_page

    def page_then_kill(*args: Any, **kwargs: Any) -> Any:
        # Each page's reply, once read, is followed by the retried jobs
        # running and dying again before the run asks for its next page.
        call = page(*args, **kwargs)

        def parse(reply: Any) -> Any:
            nonlocal kills
            result = call.parse(reply)
            for lease in q._run(claim_call(q._core, 100, 30.0, None)).leases:
                q._run(fail_call(q._core, lease, "again", None, True))
                kills += 1
            assert kills <= 60, "jobs were retried again and again"
            return result

        return dataclasses.replace(call, parse=parse)

    monkeypatch.setattr(_retry, "retry_page", page_then_kill)
    assert q.retry_all_dead() == 6
    assert kills == 6 and q.stats().dead == 6
    assert q.stats().totals["retried"] == 6


def test_cancel_of_a_key_that_is_not_a_hash_names_the_job(q: leaseq.Queue, r: Any) -> None:
    r.set(q.keys.job("k"), "x")
    with pytest.raises(leaseq.DamagedRow) as exc:
        q.cancel("k")
    assert exc.value.job_id == "k" and exc.value.field == "<key>"
    assert r.get(q.keys.job("k")) == b"x"


# -- as the least-privilege ACL user ---------------------------------------------------


def test_every_operator_call_runs_as_the_least_privilege_acl_user(
    acl_server: Any,
) -> None:
    # The user of the acl_server fixture: ~leaseq:* and only the commands leaseq
    # documents. New scripts must keep to that list (HEXISTS or TYPE would not).
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "emails")
    q.enqueue_many([{"n": i} for i in range(3)], ids=["a", "b", "c"])
    q.enqueue({"n": 9}, id="later", delay=600)
    assert q.pause() and q.claim(ttl=5.0) is None and q.stats().paused
    assert q.resume() and claim_one(q, ttl=5.0).id == "a"
    q.run_now("later")
    assert q.delete("b") == "pending"
    admin = redis.Redis(port=acl_server.port)
    admin.delete(q.keys.job("c"))
    admin.set(q.keys.job("c"), "overwritten")  # damaged by hand: not a hash any more
    admin.close()
    assert q.delete("c") == "damaged"
    with pytest.raises(leaseq.JobStateError):
        q.drop()
    assert q.drop(force=True) == 2


def test_job_control_runs_as_the_least_privilege_acl_user(acl_server: Any) -> None:
    # Uniqueness (free, held, replaced, parked, freed), cancelling a running job,
    # update and edit-and-retry keep to the documented command list.
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "emails")
    keep = leaseq.Unique("k", replace=True)
    first = q.enqueue({"v": 1}, unique=keep)
    assert q.enqueue({"v": 2}, unique=keep) == first
    lease = claim_one(q, ttl=30.0)
    parked = q.enqueue({"v": 3}, unique=keep)
    q.enqueue({}, unique=leaseq.Unique("w", period=60.0))
    assert q.cancel(lease.id) is True
    q.update(parked, payload={"v": 4})
    nxt = claim_one(q, ttl=30.0)
    q.fail(nxt, "bad", dead=True)
    q.retry_dead(nxt.id, payload={"v": 5})
    assert q.drop(force=True) >= 3
