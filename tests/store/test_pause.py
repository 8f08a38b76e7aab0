"""Pausing a queue (pause.lua, resume.lua, the check in claim.lua) and deleting
one job (delete.lua): on fakeredis and a real server, sync and async.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

import leaseq
from tests.support.backends import Clock
from tests.support.security import PASSWORD
from tests.support.servers import wait_until
from tests.support.store import claim_one, index, row, snapshot

# -- the behaviour, written once (re-run on leaseq.aio.Queue at the bottom) ------


def test_a_paused_queue_leases_nothing_and_resume_restores_it(q: leaseq.Queue) -> None:
    q.enqueue({"n": 1}, id="a")
    assert q.pause() is True
    assert q.pause() is False  # a replay or a second operator changes nothing
    assert q.claim(ttl=5.0) is None
    assert q.claim_many(10, ttl=5.0) == []
    assert q.enqueue({"n": 2}, id="b") == "b"  # producers are not stopped
    s = q.stats()
    assert s.paused and s.paused_at is not None and s.pending == 2
    assert "paused" not in s.totals
    assert row(q, "a")["state"] == "pending"
    assert q.resume() is True
    assert q.resume() is False
    assert not q.stats().paused and q.stats().paused_at is None
    assert {lease.id for lease in q.claim_many(10, ttl=5.0)} == {"a", "b"}


def test_leases_in_flight_finish_while_paused(q: leaseq.Queue) -> None:
    q.enqueue_many([{"n": 1}, {"n": 2}], ids=["a", "b"])
    first, second = q.claim_many(2, ttl=5.0)
    q.pause()
    q.extend(first, ttl=5.0)
    q.complete(first, result="ok")
    assert q.fail(second, "boom", retry_in=0) == leaseq.State.PENDING
    assert q.claim(ttl=5.0) is None  # the retried job waits for resume too
    assert row(q, "a")["state"] == "succeeded"
    q.resume()
    assert claim_one(q, ttl=5.0).id == "b"


def test_pause_keeps_reaping_expired_leases(q: leaseq.Queue, clock: Clock) -> None:
    q.enqueue({"n": 1}, id="a")
    lease = claim_one(q, ttl=clock.lease(5.0))
    q.pause()
    clock.past(lease.deadline)
    assert q.claim(ttl=5.0) is None
    assert row(q, "a")["state"] == "pending"  # handed back, not leased
    assert "a" in index(q, "pending")


def test_pausing_an_unknown_queue_makes_it_known(q: leaseq.Queue, r: Any) -> None:
    assert q.pause() is True
    assert leaseq.Queue.queues(r) == ["emails"]
    assert q.stats().paused


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
    q.pause()
    assert q.drop() == 6
    assert [k for k in r.keys("*") if b"{emails}" in k] == []
    assert leaseq.Queue.queues(r) == ["other"]
    assert other.get("k") is not None


def test_drop_refuses_leases_in_flight_unless_forced(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(3)])
    lease = claim_one(q)
    before = snapshot(r)
    with pytest.raises(leaseq.JobStateError, match="1 lease"):
        q.drop()
    assert snapshot(r) == before
    assert q.drop(force=True) == 3
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lease)
    assert q.stats().pending == 0


def test_drop_works_through_a_big_queue_in_bounded_calls(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(2500)])
    assert q.drop() == 2500
    assert r.dbsize() == 0


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
    with pytest.raises(leaseq.JobStateError, match="only a scheduled job"):
        q.run_now("later")
    with pytest.raises(leaseq.JobNotFound):
        q.run_now("nope")
    assert snapshot(r) == before


# -- sync only: the least-privilege ACL user, blocking claimers, workers


def test_every_operator_call_runs_as_the_least_privilege_acl_user(
    acl_server: Any,
) -> None:
    # The user of tests/test_security.py: ~leaseq:* and only the commands leaseq
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


def test_resume_wakes_a_blocked_claimer_at_once(q: leaseq.Queue, backend: str) -> None:
    if backend == "fake":
        # fakeredis serves BLPOP from one thread badly; the wake list itself is
        # checked on fake below, and the real wait here.
        assert q.pause()
        q.enqueue({"n": 1})
        assert q.claim(ttl=5.0) is None
        assert q.redis.llen(q.keys.wake) == 0  # a paused claim leaves no token to spin on
        q.resume()
        assert q.redis.llen(q.keys.wake) == 1
        return
    q.pause()
    q.enqueue({"n": 1}, id="a")
    got: list[tuple[leaseq.Lease | None, float]] = []

    def claimer() -> None:
        lease = q.claim(ttl=5.0, block=20.0)
        got.append((lease, time.monotonic()))

    thread = threading.Thread(target=claimer, daemon=True)
    thread.start()

    def blocked() -> bool:
        return any(c.get("cmd") == "blpop" for c in q.redis.client_list())

    wait_until(blocked, 10, what="the claimer to block on the wake list")
    resumed = time.monotonic()
    q.resume()
    thread.join(10)
    assert got, "the blocked claimer never returned"
    lease, at = got[0]
    assert lease is not None and lease.id == "a"
    # Without resume's token it would sleep out its 5 s slice first.
    assert at - resumed < 2.0


def test_a_burst_worker_runs_nothing_on_a_paused_queue(q: leaseq.Queue) -> None:
    q.enqueue_many([{"n": i} for i in range(3)])
    q.pause()
    ran: list[Any] = []
    leaseq.Worker(q, lambda lease: ran.append(lease.id), concurrency=2, ttl=5.0).run(burst=True)
    assert ran == []
    assert q.stats().pending == 3
    q.resume()
    leaseq.Worker(q, lambda lease: ran.append(lease.id), concurrency=2, ttl=5.0).run(burst=True)
    assert len(ran) == 3


# The async re-run of these cases is tests/test_aio.py's (SUITE_MODULES).
