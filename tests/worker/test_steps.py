"""Durable steps (docs/durable.md) on every worker driver: ``current_job().step``
in a plain handler, ``await current_job().astep`` in an ``async def`` one. A
retry skips what an earlier attempt recorded; a name used twice, or a result
the codec refuses, fails the attempt with nothing recorded."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

import leaseq
from tests.support.drivers import Driver
from tests.support.servers import wait_until


def test_a_retry_skips_the_steps_an_earlier_attempt_recorded(driver: Driver) -> None:
    ran: Counter[str] = Counter()

    def body(name: str, value: Any) -> Any:
        ran[name] += 1
        return value

    def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        charged = ctx.step("charge", body, "charge", {"amount": 5, "ids": (1, 2)})
        mailed = ctx.step("mail", body, "mail", "sent")
        if lease.attempt == 1:
            raise leaseq.Retry(0)  # after two steps: the retry starts over, from them
        shipped = ctx.step("ship", body, "ship", 3)
        return [charged, mailed, shipped]

    q = driver.q
    job_id = q.enqueue({}, max_attempts=3)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED, job
    assert job.attempts == 2
    # The recorded result comes back as the codec reads it: the tuple a list,
    # on the first run as on the retry.
    assert job.result == [{"amount": 5, "ids": [1, 2]}, "sent", 3]
    assert ran == {"charge": 1, "mail": 1, "ship": 1}
    assert job.steps == {"charge": {"amount": 5, "ids": [1, 2]}, "mail": "sent", "ship": 3}


def test_async_handlers_await_their_steps_with_plain_and_async_bodies(driver: Driver) -> None:
    ran: Counter[str] = Counter()

    def plain(value: int) -> int:
        ran["plain"] += 1
        return value

    async def slow(value: int) -> int:
        ran["slow"] += 1
        await asyncio.sleep(0)
        return value * 10

    async def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        a = await ctx.astep("a", plain, 1)
        b = await ctx.astep("b", slow, 2)
        if lease.attempt == 1:
            raise leaseq.Retry(0)
        return a + b

    q = driver.q
    job_id = q.enqueue({}, max_attempts=3)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and (job.state, job.result) == (leaseq.State.SUCCEEDED, 21), job
    assert ran == {"plain": 1, "slow": 1}


def test_a_step_name_used_twice_in_one_run_fails_the_attempt(driver: Driver) -> None:
    def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        ctx.step("page", lambda: 1)
        return ctx.step("page", lambda: 2)

    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.DEAD
    assert "InvalidArgument" in (job.last_error or "") and "ran twice" in (job.last_error or "")
    assert job.steps == {"page": 1}  # the first stands


def test_a_result_the_codec_refuses_records_nothing(driver: Driver) -> None:
    def handler(lease: leaseq.Lease) -> Any:
        return leaseq.current_job().step("ratio", lambda: math.nan)

    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.DEAD
    assert "InvalidPayload" in (job.last_error or "") and "non-finite" in (job.last_error or "")
    assert job.steps == {}


def test_a_sync_step_in_an_async_handler_says_to_await_astep(driver: Driver) -> None:
    async def handler(lease: leaseq.Lease) -> Any:
        return leaseq.current_job().step("x", lambda: 1)

    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None
    if driver.name == "asyncio":  # it would block the loop its queue's calls run on
        assert job.state is leaseq.State.DEAD and "astep" in (job.last_error or "")
    else:  # its own loop, in its own thread: the blocking call is allowed
        assert (job.state, job.result) == (leaseq.State.SUCCEEDED, 1)


def test_a_typed_task_records_its_steps(driver: Driver) -> None:
    q = driver.q
    ran: Counter[str] = Counter()

    def base(n: int) -> int:
        ran["base"] += 1
        return n * 10

    @q.task(name="steps.total", max_attempts=3)
    def total(n: int) -> int:
        ctx = leaseq.current_job()
        got = ctx.step("base", base, n)
        if ctx.lease.attempt == 1:
            raise leaseq.Retry(0)
        return got + 1

    job_id = total.enqueue(4)
    driver.worker(q.tasks).run(burst=True)
    assert total.wait(job_id, timeout=5) == 41
    assert ran == {"base": 1}


def test_a_step_that_raised_may_be_tried_again_in_the_same_run(driver: Driver) -> None:
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("try again")
        return "ok"

    def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        for _ in range(5):  # the handler's own retry loop around one step
            try:
                return ctx.step("call", flaky)
            except ConnectionError:
                continue
        return None

    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and (job.state, job.result) == (leaseq.State.SUCCEEDED, "ok"), job
    assert len(tries) == 3 and job.steps == {"call": "ok"}


def test_async_handlers_report_progress_with_aprogress(driver: Driver) -> None:
    async def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        await ctx.aprogress({"pct": 50})
        try:
            ctx.progress({"pct": 60})  # blocking: refused on aio.Worker's loop
        except leaseq.InvalidArgument as exc:
            return str(exc)
        return "blocking call allowed"

    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handler).run(burst=True)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED
    if driver.name == "asyncio":
        assert "aprogress" in job.result and job.progress == {"pct": 50}
    else:  # leaseq.Worker: the handler's loop is its thread's own
        assert job.result == "blocking call allowed" and job.progress == {"pct": 60}


# -- sleep: the suspended state ------------------------------------------------------


def _sleeper(ran: Counter[str]) -> Any:
    def handler(lease: leaseq.Lease) -> Any:
        if lease.payload.get("other"):
            return "other"
        ctx = leaseq.current_job()
        ctx.step("before", lambda: ran.update(["before"]) or 1)
        ctx.sleep("nap", 0.3)
        ran["after"] += 1
        return "woke"

    return handler


def test_a_sleep_suspends_the_job_and_frees_the_slot_then_resumes_past_its_steps(
    live_driver: Driver,
) -> None:
    ran: Counter[str] = Counter()
    q = live_driver.q
    job_id = q.enqueue({}, max_attempts=1)
    other = q.enqueue({"other": True}, max_attempts=1)
    run = live_driver.worker(_sleeper(ran), concurrency=1)
    run.start()
    try:
        wait_until(lambda: q.stats().suspended == 1, 10, what="the job to sleep")
        job = q.get(job_id)
        assert job is not None and job.state is leaseq.State.SUSPENDED and job.run_at
        assert job.steps == {"before": 1, "nap": None}
        wait_until(lambda: _state(q, job_id) is leaseq.State.SUCCEEDED, 10, what="the resume")
        # The one slot was free while it slept: the other job ran meanwhile.
        assert _state(q, other) is leaseq.State.SUCCEEDED
    finally:
        run.stop()
        run.join()
    job = q.get(job_id)
    assert job is not None and job.result == "woke"
    # A sleep is not a failure: max_attempts=1, two claims, no error.
    assert (job.attempts, job.last_error) == (2, None)
    assert ran["before"] == 1 and ran["after"] == 1
    assert run.counts["suspended"] == 1


def test_an_async_handler_sleeps_without_io_in_the_call(live_driver: Driver) -> None:
    async def handler(lease: leaseq.Lease) -> Any:
        ctx = leaseq.current_job()
        first = await ctx.astep("first", lambda: lease.attempt)
        ctx.sleep("nap", 0.2)
        return first

    q = live_driver.q
    job_id = q.enqueue({}, max_attempts=1)
    run = live_driver.worker(handler)
    run.start()
    try:
        wait_until(lambda: _state(q, job_id) is leaseq.State.SUCCEEDED, 10, what="the resume")
    finally:
        run.stop()
        run.join()
    job = q.get(job_id)
    assert job is not None and job.result == 1 and job.attempts == 2


def test_a_suspended_job_can_be_cancelled_and_then_never_resumes(live_driver: Driver) -> None:
    ran: Counter[str] = Counter()
    q = live_driver.q
    job_id = q.enqueue({}, max_attempts=1)
    live_driver.worker(_sleeper(ran)).run(burst=True)  # burst: a sleeping job does not hold it
    assert _state(q, job_id) is leaseq.State.SUSPENDED
    assert q.cancel(job_id) is True
    assert _state(q, job_id) is leaseq.State.CANCELLED and q.stats().suspended == 0
    assert ran == {"before": 1}


def _state(q: leaseq.Queue, job_id: str) -> leaseq.State | None:
    job = q.get(job_id)
    return None if job is None else job.state
