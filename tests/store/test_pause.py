"""Pausing a queue (pause.lua, resume.lua, the check in claim.lua): nothing is
leased while paused, leases in flight finish, reaping goes on, and resume
wakes blocked claimers. On fakeredis and a real server, sync and (through
tests/transport/test_aio.py) async.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import leaseq
from tests.support.backends import Clock
from tests.support.servers import wait_until
from tests.support.store import claim_one, index, row

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


# -- sync only: blocking claimers, workers -----------------------------------------------


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


# The async re-run of these cases is tests/transport/test_aio.py's (SUITE_MODULES).
