"""``leaseq.testing``: what a team's own test suite uses. ``drain`` runs every job
to its end with a real worker, jobs due later and asleep included, without
waiting for their time; ``memory_queue`` is a fresh store per test; ``jobs``
lists what was enqueued.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from leaseq.testing import DrainLimit, drain, jobs, memory_queue
from tests.support.servers import wait_until
from tests.support.store import server_ms


def test_drain_runs_delayed_and_retried_jobs_without_waiting(q: leaseq.Queue) -> None:
    tries: dict[int, int] = {}

    @q.task(max_attempts=3)
    def flaky(n: int) -> int:
        tries[n] = tries.get(n, 0) + 1
        if n == 0 and tries[n] < 3:
            raise RuntimeError("not yet")  # retried after the queue's backoff
        return n * 10

    first = flaky.enqueue(0)
    later = flaky.options(delay=3600.0).enqueue(1)  # an hour from now
    assert drain(q) == 4  # three runs of the flaky one, one of the delayed one
    assert q.results([first, later]) == [0, 10]
    assert tries == {0: 3, 1: 1}
    assert [job.state for job in jobs(q)] == [leaseq.State.SUCCEEDED] * 2
    assert drain(q) == 0  # nothing left


def test_drain_ends_dead_jobs_and_wakes_sleepers_but_leaves_signal_waits(
    q: leaseq.Queue,
) -> None:
    def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        if lease.payload == "dies":
            raise ValueError("always")
        ctx.sleep("nap", 86_400.0)  # a day
        if lease.payload == "waits":
            return ctx.wait_for("approved", "order-7")
        return "slept"

    dies = q.enqueue("dies", max_attempts=2)
    sleeps = q.enqueue("sleeps")
    waits = q.enqueue("waits")
    ran = drain(q, handler)
    # dies: 2 attempts; sleeps and waits: before and after the nap; waits stops at its wait.
    assert ran == 2 + 2 + 2
    assert q.get(dies).state is leaseq.State.DEAD
    assert q.results([sleeps]) == ["slept"]
    assert [job.id for job in jobs(q, "suspended")] == [waits]
    assert q.signal("order-7", "yes") == 1
    assert drain(q, handler) == 1 and q.results([waits]) == ["yes"]


def test_drain_stops_at_its_limit_and_needs_handlers(q: leaseq.Queue) -> None:
    @q.task
    def forever(n: int) -> None:
        forever.enqueue(n + 1)  # a job that always makes another

    forever.enqueue(0)
    with pytest.raises(DrainLimit, match="past its limit of 5"):
        drain(q, limit=5)
    other = leaseq.Queue("no-tasks", redis=q.redis)
    other.enqueue(1)
    with pytest.raises(leaseq.InvalidArgument, match="no tasks"):
        drain(other)
    assert jobs(other, "pending")[0].payload == 1  # nothing ran, nothing changed


def test_jobs_lists_every_state_in_order_past_a_page(q: leaseq.Queue) -> None:
    ids = q.enqueue_many(list(range(2_500)))
    scheduled = q.enqueue("later", delay=60.0)
    assert [job.id for job in jobs(q, "pending")] == ids
    assert [job.id for job in jobs(q)] == [*ids, scheduled]
    assert jobs(q, "dead") == []


def test_memory_queues_are_apart_and_gone_after_the_block() -> None:
    from leaseq.transport import memory

    stores = len(memory._servers)
    with memory_queue("emails") as a, memory_queue("emails") as b:
        a.enqueue({"to": "a"})
        assert a.stats().pending == 1 and b.stats().pending == 0
        assert len(memory._servers) == stores + 2
        assert drain(a, lambda lease: lease.payload["to"]) == 1
    assert len(memory._servers) == stores  # no store left behind per test


def test_a_burst_runs_a_dead_workers_expired_lease(q: leaseq.Queue, r: Any) -> None:
    """--burst does not return while a lease that ran out is left to reap: its
    claim reaps it and runs the job."""
    q.enqueue("orphan")
    lost = q.claim(ttl=0.2)  # a worker that died holding it
    assert lost is not None
    wait_until(lambda: server_ms(r) / 1000 > lost.deadline, what="the lease to run out")
    ran: list[Any] = []
    worker = leaseq.Worker(q, lambda lease: ran.append(lease.attempt), handle_signals=False)
    worker.run(burst=True)
    assert ran == [2] and q.stats().succeeded == 1


def test_drain_runs_a_keep_last_successor_after_its_holder(q: leaseq.Queue) -> None:
    ran: list[int] = []
    keep_last = leaseq.Unique("report", replace=True)

    def handler(lease: leaseq.Lease) -> None:
        ran.append(lease.payload)
        if lease.payload == 1:
            q.enqueue(2, unique=keep_last)  # parked behind this running job
            leaseq.current_job().sleep("nap", 3600.0)  # still the key's holder, asleep

    q.enqueue(1, unique=keep_last)
    assert drain(q, handler) == 3  # 1, 1 again after its nap, then 2: never beside it
    assert ran == [1, 1, 2] and q.stats().succeeded == 2
