"""Issue 9, defects 4 and 7: retry-all-dead and purge step over what they
cannot act on, report it and finish the rest; and both work from a fixed
snapshot, so a job that dies again while retry-all runs is not retried twice
and a purge ends however many jobs keep arriving.

The runs are sans-I/O generators (``leaseq.store.admin``): these tests drive
them by hand, with small pages, to act between two pages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import leaseq
from leaseq.store import admin as _admin
from tests.support.backends import Clock
from tests.support.store import claim_one, row


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
    result = q._drive(_admin.retry_all_dead_op(q._core, None, limit=3))
    assert result.done == 7 and len(result.damaged) == 7
    result = q._drive(_admin.purge_op(q._core, "dead", limit=2))
    assert result.done == 0 and len(result.damaged) == 7


def test_a_job_that_dies_again_during_retry_all_is_not_retried_twice(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    ids = [f"j{i}" for i in range(6)]
    _dead(q, ids)
    clock.advance(clock.lease(1.0, 0.002))
    run = _admin.retry_all_dead_op(q._core, 1, limit=2)
    call = next(run)
    page = q._run(call)
    assert page.done == 2
    # The two retried jobs run at once and die again, mid-run.
    for lease in q.claim_many(2):
        q.fail(lease, "again", dead=True)
    done = page.done
    try:
        while True:
            page = q._run(run.send(page))
            done += page.done
    except StopIteration as stop:
        result = stop.value
    assert result.done == 6
    # The two that died again stay dead for the operator's next decision.
    assert r.zcard(q.keys.dead) == 2
    assert q.stats().pending == 4
    assert q.stats().totals["retried"] == 6


def test_purge_ends_while_jobs_keep_arriving(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many(range(10))
    run = _admin.purge_op(q._core, "pending", limit=3)
    page = q._run(next(run))
    pages = 1
    try:
        while True:
            q.enqueue_many(range(3))  # a producer outpacing the purge
            page = q._run(run.send(page))
            pages += 1
    except StopIteration as stop:
        result = stop.value
    assert result.done == 10 and pages <= 5
    assert q.stats().pending == 3 * pages  # every arrival survived


def test_bad_arguments_are_refused_before_any_call(q: leaseq.Queue, r: Any) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        _admin.purge_op(q._core, "active")
    with pytest.raises(leaseq.InvalidArgument):
        _admin.retry_all_dead_op(q._core, 0)
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
    page = q._core.retry_page

    def page_then_kill(*args: Any, **kwargs: Any) -> Any:
        # Each page's reply, once read, is followed by the retried jobs
        # running and dying again before the run asks for its next page.
        call = page(*args, **kwargs)

        def parse(reply: Any) -> Any:
            nonlocal kills
            result = call.parse(reply)
            for lease in q._run(q._core.claim(100, 30.0, None)).leases:
                q._run(q._core.fail(lease, "again", None, True))
                kills += 1
            assert kills <= 60, "jobs were retried again and again"
            return result

        return dataclasses.replace(call, parse=parse)

    monkeypatch.setattr(q._core, "retry_page", page_then_kill)
    assert q.retry_all_dead() == 6
    assert kills == 6 and q.stats().dead == 6
    assert q.stats().totals["retried"] == 6


def test_cancel_of_a_key_that_is_not_a_hash_names_the_job(q: leaseq.Queue, r: Any) -> None:
    r.set(q.keys.job("k"), "x")
    with pytest.raises(leaseq.DamagedRow) as exc:
        q.cancel("k")
    assert exc.value.job_id == "k" and exc.value.field == "<key>"
    assert r.get(q.keys.job("k")) == b"x"
