"""Durable waits (docs/durable.md) on every worker driver: ``current_job().wait_for``
suspends a job until ``q.signal`` (or its timeout); the resumed run gets the
signal's payload past its recorded steps. A signal sent first is kept; a
cancelled waiter is resumed by nothing; run_now ends a wait as a timeout."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import leaseq
from tests.support.drivers import Driver
from tests.support.servers import wait_until


def _waiter(ran: Counter[str], timeout: float | None = None) -> Any:
    """Charges once, waits for 'approved:<order>', ships: the order of docs/durable.md."""

    def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        order = lease.payload["order"]
        ctx.step("charge", lambda: ran.update(["charge"]) or 100)
        try:
            approval = ctx.wait_for("approval", f"approved:{order}", timeout=timeout)
        except leaseq.SignalTimeout:
            ran["timed out"] += 1
            return "refunded"
        ran["ship"] += 1
        return {"shipped": order, "by": approval["by"]}

    return handler


def test_a_wait_suspends_until_its_signal_then_runs_on_past_its_steps(live_driver: Driver) -> None:
    ran: Counter[str] = Counter()
    q = live_driver.q
    job_id = q.enqueue({"order": 7}, max_attempts=1)
    other = q.enqueue({"order": 8}, max_attempts=1)
    live_driver.worker(_waiter(ran), concurrency=1).run(burst=True)  # no slot held while waiting
    assert q.stats().suspended == 2
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUSPENDED
    assert (job.wait_key, job.wait_step, job.run_at) == ("approved:7", "approval", None)
    assert job.steps == {"charge": 100}

    assert q.signal("approved:7", {"by": "ann"}) == 1
    assert q.signal("approved:7", {"by": "bob"}) == 0  # resumed already: nothing waits
    live_driver.worker(_waiter(ran)).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED, job
    assert job.result == {"shipped": 7, "by": "ann"}
    assert job.steps == {"charge": 100, "approval": {"by": "ann"}}
    assert (job.attempts, job.last_error, job.wait_key) == (2, None, None)
    assert ran == {"charge": 2, "ship": 1}  # both orders charged once; one shipped
    assert _state(q, other) is leaseq.State.SUSPENDED


def test_a_signal_sent_before_the_wait_is_kept_and_resumes_it_at_once(live_driver: Driver) -> None:
    ran: Counter[str] = Counter()
    q = live_driver.q
    assert q.signal("approved:1", {"by": "early"}) == 0
    assert q.signal("approved:2", {"by": "unkept"}, keep=0) == 0
    kept = q.enqueue({"order": 1}, max_attempts=1)
    unkept = q.enqueue({"order": 2}, max_attempts=1)
    live_driver.worker(_waiter(ran)).run(burst=True)
    job = q.get(kept)
    assert job is not None and job.result == {"shipped": 1, "by": "early"}, job
    assert job.attempts == 2  # it suspended and went straight back to pending
    assert _state(q, unkept) is leaseq.State.SUSPENDED  # keep=0: only those waiting then


def test_a_wait_that_times_out_raises_signal_timeout_on_the_resumed_run(
    live_driver: Driver,
) -> None:
    ran: Counter[str] = Counter()
    q = live_driver.q
    job_id = q.enqueue({"order": 3}, max_attempts=1)
    run = live_driver.worker(_waiter(ran, timeout=0.3))
    started = time.monotonic()
    run.start()
    try:
        wait_until(lambda: _state(q, job_id) is leaseq.State.SUCCEEDED, 10, what="the timeout")
        # The idle claimer is woken for the new wake time, not left to its
        # seconds-long idle cap (it took 4 s before suspend left a token).
        assert time.monotonic() - started < 2.5
    finally:
        run.stop()
        run.join()
    job = q.get(job_id)
    assert job is not None and job.result == "refunded"
    assert job.steps == {"charge": 100, "approval": leaseq.TimedOut()}
    assert ran == {"charge": 1, "timed out": 1}
    # It waits no more: a signal now resumes nothing, and the index is empty.
    assert q.signal("approved:3") == 0
    assert q.redis.zcard(q.keys.waiters) == 0


def test_cancel_delete_and_run_now_end_a_wait(live_driver: Driver) -> None:
    ran: Counter[str] = Counter()
    q = live_driver.q
    ids = [q.enqueue({"order": n}, max_attempts=1) for n in (1, 2, 3)]
    live_driver.worker(_waiter(ran)).run(burst=True)
    assert q.redis.zcard(q.keys.waiters) == 3
    assert q.cancel(ids[0]) is True
    q.delete(ids[1])
    q.run_now(ids[2])  # an operator ends the wait: it counts as timed out
    assert q.redis.zcard(q.keys.waiters) == 0
    assert q.signal("approved:1") + q.signal("approved:2") + q.signal("approved:3") == 0
    live_driver.worker(_waiter(ran)).run(burst=True)
    assert _state(q, ids[0]) is leaseq.State.CANCELLED and q.get(ids[1]) is None
    job = q.get(ids[2])
    assert job is not None and job.result == "refunded"


def test_run_now_wakes_a_sleeping_job_early(live_driver: Driver) -> None:
    def handler(lease: leaseq.Lease) -> str:
        leaseq.current_job().sleep("nap", 3600)
        return "woke"

    q = live_driver.q
    job_id = q.enqueue({}, max_attempts=1)
    live_driver.worker(handler).run(burst=True)
    assert _state(q, job_id) is leaseq.State.SUSPENDED
    q.run_now(job_id)
    live_driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.result == "woke" and job.run_at is None


def test_an_async_handler_waits_for_a_signal(live_driver: Driver) -> None:
    async def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        first = await ctx.astep("first", lambda: lease.attempt)
        return [first, ctx.wait_for("go", "go-key")]

    q = live_driver.q
    job_id = q.enqueue({}, max_attempts=1)
    live_driver.worker(handler).run(burst=True)
    assert q.signal("go-key", [1, 2]) == 1
    live_driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.result == [1, [1, 2]]


def test_a_bad_key_or_timeout_fails_the_attempt_with_nothing_suspended(driver: Driver) -> None:
    def handler(lease: leaseq.Lease) -> Any:
        return leaseq.current_job().wait_for("w", lease.payload["key"], timeout=lease.payload["t"])

    q = driver.q
    bad = [q.enqueue({"key": k, "t": t}, max_attempts=1) for k, t in [("a b", None), ("k", -1)]]
    driver.worker(handler).run(burst=True)
    for job_id in bad:
        job = q.get(job_id)
        assert job is not None and job.state is leaseq.State.DEAD, job
        assert "invalid signal key" in (job.last_error or "") or "timeout" in (job.last_error or "")
    assert q.redis.zcard(q.keys.waiters) == 0


def test_a_typed_task_waits_for_its_signal(driver: Driver) -> None:
    q = driver.q

    @q.task(name="orders.approve", max_attempts=1)
    def approve(order: int) -> str:
        got = leaseq.current_job().wait_for("approval", f"approved:{order}")
        return f"{order} by {got}"

    job_id = approve.enqueue(9)
    driver.worker(q.tasks).run(burst=True)
    assert q.signal("approved:9", "ann") == 1
    driver.worker(q.tasks).run(burst=True)
    assert approve.wait(job_id, timeout=5) == "9 by ann"


def _state(q: leaseq.Queue, job_id: str) -> leaseq.State | None:
    job = q.get(job_id)
    return None if job is None else job.state
