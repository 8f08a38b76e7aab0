"""The worker's core loop, on every driver (``driver``: the threaded
``leaseq.Worker`` and ``leaseq.aio.Worker``, tests/support/drivers.py):
outcomes, the job context, burst mode, logging, settings.

Each case is written once and runs on both workers. The rest of the worker
suite is by concept (leases and heartbeats: test_leases.py; stop and grace:
test_lifecycle.py; timeouts, cancels, kinds, errors, refunds, the registry);
what only one worker does is test_thread_worker.py or test_aio_worker.py.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

import leaseq
from tests.support import handlers
from tests.support.drivers import Driver
from tests.support.servers import wait_until


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


# -- outcomes ---------------------------------------------------------------------------


def test_return_value_completes_with_result(driver: Driver) -> None:
    q = driver.q
    ids = q.enqueue_many([{"i": i} for i in range(25)])
    w = driver.worker(handlers.echo, concurrency=3)
    w.run(burst=True)
    assert w.processed == 25
    assert w.counts["succeeded"] == 25
    for i, job_id in enumerate(ids):
        job = _job(q, job_id)
        assert job.state is leaseq.State.SUCCEEDED and job.result == {"i": i}


def test_exception_fails_with_type_message_and_traceback(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    driver.worker(handlers.boom).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD
    assert job.last_error is not None
    assert job.last_error == f"ValueError: boom on {job_id}"
    assert job.traceback is not None and "handlers.py" in job.traceback
    assert "in boom" in job.traceback


def test_exception_with_attempts_left_schedules_a_retry(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=3)
    w = driver.worker(handlers.boom)
    w.run(burst=True)  # the retry is due later: burst does not wait for it
    job = _job(q, job_id)
    assert job.state is leaseq.State.SCHEDULED and job.attempts == 1
    assert w.processed == 1
    assert w.counts["failed"] == 1


def test_retry_exception_sets_the_delay(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({"in": 120.0})
    driver.worker(handlers.retry_later).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.SCHEDULED
    assert job.run_at is not None and job.claimed_at is not None
    assert job.run_at - job.claimed_at == pytest.approx(120.0, abs=1.0)
    assert job.last_error == "Retry: not yet"


def test_retry_in_zero_runs_again_within_the_same_burst(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({"in": 0.0}, max_attempts=3)
    driver.worker(handlers.retry_later).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 3


def test_dead_exception_dead_letters_at_once(driver: Driver) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=5)
    w = driver.worker(handlers.give_up)
    w.run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 1
    assert job.last_error == "Dead: bad input"
    assert w.processed == 1
    assert w.counts["dead"] == 1


def test_every_outcome_in_one_burst(live_driver: Driver) -> None:
    """Completions, a failure retried then dead, a Retry that runs again, a Dead:
    one burst writes each as the one outcome policy says, and counts them all."""
    q = live_driver.queue("jobs", backoff=0.0, max_attempts=2)

    def handler(lease: leaseq.Lease) -> Any:
        kind = lease.payload["kind"]
        if kind == "boom":
            raise ValueError("boom")
        if kind == "retry":
            if lease.attempt == 1:
                raise leaseq.Retry(0.0, "later")
            return "second time"
        if kind == "dead":
            raise leaseq.Dead("poison")
        time.sleep(0.01)
        return {"ok": lease.payload["i"]}

    q.enqueue_many([{"kind": "ok", "i": i} for i in range(20)])
    for kind in ("boom", "retry", "dead"):
        q.enqueue({"kind": kind}, id=kind)
    w = live_driver.worker(handler, queue=q, concurrency=5, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 20 + 2 + 2 + 1
    stats = q.stats()
    assert (stats.succeeded, stats.dead, stats.pending, stats.active) == (21, 2, 0, 0)
    boom = _job(q, "boom")
    assert boom.state is leaseq.State.DEAD and boom.attempts == 2
    assert boom.last_error is not None and "ValueError: boom" in boom.last_error
    retried = _job(q, "retry")
    assert retried.result == "second time" and retried.attempts == 2
    dead = _job(q, "dead")
    # The one outcome policy (leaseq.work.outcomes.decide): the exception's kind, then its reason.
    assert dead.attempts == 1 and dead.last_error == "Dead: poison"


def test_unencodable_result_dead_letters_only_that_job_at_once(driver: Driver) -> None:
    # The handler ran to the end: running it again would repeat its side effects
    # for a result that still cannot be stored, so no retry.
    q = driver.q
    bad = q.enqueue({}, max_attempts=5)
    calls: list[str] = []

    def handler(lease: leaseq.Lease) -> Any:
        calls.append(lease.id)
        return object() if lease.id == bad else "fine"

    good = q.enqueue_many([{}, {}, {}])
    driver.worker(handler, concurrency=4).run(burst=True)
    job = _job(q, bad)
    assert job.state is leaseq.State.DEAD and job.attempts == 1 and calls.count(bad) == 1
    assert job.last_error is not None
    assert job.last_error.startswith("InvalidResult: the handler's result (of type object)")
    assert "not run again" in job.last_error
    assert [_job(q, i).result for i in good] == ["fine"] * 3


def test_oversized_result_is_dead_lettered_naming_size_and_limit(driver: Driver) -> None:
    q = driver.queue("big", max_payload_bytes=1000)
    job_id = q.enqueue({}, max_attempts=5)
    driver.worker(lambda lease: "x" * 5000, queue=q).run(burst=True)
    job = _job(q, job_id)
    assert job.state is leaseq.State.DEAD and job.attempts == 1 and job.result is None
    assert job.last_error is not None
    assert job.last_error.startswith(
        "ResultTooLarge: the handler returned a result of 5002 bytes encoded, over the "
        "queue's max_payload_bytes of 1000"
    )
    assert "x" * 50 not in job.last_error  # the reason, not a dump of the result


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_a_handler_that_exits_fails_its_job_not_the_worker(live_driver: Driver, kind: str) -> None:
    # A SystemExit let out of the worker would end it and release the job,
    # refunding its attempt, on every start without bound: it is the job's
    # failure, and the worker goes on.
    q = live_driver.queue("jobs", backoff=leaseq.Backoff(base=0.0, cap=0.0, jitter=0.0))
    exits = q.enqueue({"exit": True}, max_attempts=2)
    fine = q.enqueue({"exit": False})

    async def async_handler(lease: leaseq.Lease) -> str:
        if lease.payload["exit"]:
            raise SystemExit(3)
        return "ok"

    def plain_handler(lease: leaseq.Lease) -> str:
        if lease.payload["exit"]:
            raise SystemExit(3)
        return "ok"

    handler = async_handler if kind == "async" else plain_handler
    w = live_driver.worker(handler, queue=q, concurrency=1, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 3  # two attempts and the fine job: nothing escapes
    job = _job(q, exits)
    assert job.state is leaseq.State.DEAD and job.attempts == 2
    assert (job.last_error or "").startswith("SystemExit: 3")
    assert _job(q, fine).state is leaseq.State.SUCCEEDED


def test_a_plain_handlers_keyboard_interrupt_fails_its_job_not_the_worker(
    live_driver: Driver,
) -> None:
    # No signal reaches a handler's thread: a KeyboardInterrupt there is the
    # handler's own, not a Ctrl-C. Let out, it would end the worker and release
    # the job, refunding its attempt, on every start without bound.
    q = live_driver.queue("jobs")
    job_id = q.enqueue({}, max_attempts=1)

    def plain(lease: leaseq.Lease) -> None:
        raise KeyboardInterrupt

    w = live_driver.worker(plain, queue=q, concurrency=1, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 1
    job = _job(q, job_id)
    assert (job.state, job.attempts) == (leaseq.State.DEAD, 1)
    assert (job.last_error or "").startswith("KeyboardInterrupt")


# -- the job context ----------------------------------------------------------------------


def test_current_job_is_the_running_lease(driver: Driver) -> None:
    q = driver.q
    seen: list[tuple[str, int, bool]] = []

    def handler(lease: leaseq.Lease) -> None:
        ctx = leaseq.current_job()
        seen.append((ctx.lease.id, ctx.lease.attempt, ctx.lost.is_set()))
        ctx.raise_if_lost()

    job_id = q.enqueue({})
    driver.worker(handler).run(burst=True)
    assert seen == [(job_id, 1, False)]
    with pytest.raises(LookupError):
        leaseq.current_job()


def test_a_job_contexts_flags_work_as_events() -> None:
    """``lost`` and ``cancelled`` are cheap Events (one shared condition): a set
    wakes its waiters, and a set of another flag never ends a wait early."""
    from leaseq.handler import Flag

    a, b = Flag(), Flag()
    assert isinstance(a, threading.Event) and not a.is_set() and not a.wait(0.01)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(a.wait(10.0)))
    waiter.start()
    b.set()  # wakes the waiter, which sees its own flag still clear and waits on
    wait_until(lambda: b.is_set())
    assert waiter.is_alive() and not woke
    a.set()
    waiter.join(10.0)
    assert woke == [True] and a.wait() and a.is_set()
    a.clear()
    assert not a.is_set() and not a.wait(0.01) and b.is_set()


# -- burst mode -----------------------------------------------------------------------------


def test_burst_with_nothing_returns(driver: Driver) -> None:
    w = driver.worker(handlers.noop)
    w.run(burst=True)
    assert w.processed == 0
    assert w.counts["succeeded"] == 0


@pytest.mark.parametrize("groups", [True, False], ids=["queue-and-group", "queue"])
def test_burst_waits_out_limits_that_hold_pending_jobs_back(
    live_driver: Driver, groups: bool
) -> None:
    """Pending jobs a rate limit (queue-wide or per fair group) holds back are
    still pending: a burst run waits for them and returns only once they ran."""
    q = live_driver.queue("limited", backoff=0.0)
    if groups:
        q.set_limits(rate=4, per=0.2, group_rate=2, group_per=0.2)
        q.enqueue_many([{}] * 6)
        q.enqueue_many([{}] * 4, group="tenant")
    else:
        q.set_limits(rate=4, per=0.2)
        q.enqueue_many([{}] * 10)
    w = live_driver.worker(handlers.noop, queue=q, ttl=5.0)
    w.run(burst=True)
    assert w.processed == 10
    assert w.counts["succeeded"] == 10
    assert q.stats().pending == 0


def test_burst_on_a_paused_queue_returns(live_driver: Driver) -> None:
    q = live_driver.queue("paused", backoff=0.0)
    q.enqueue_many([{}] * 3)
    q.pause()
    w = live_driver.worker(handlers.noop, queue=q)
    w.run(burst=True)
    assert w.processed == 0 and q.stats().pending == 3


# -- logging and settings -----------------------------------------------------------------------


def test_every_log_line_names_queue_job_and_attempt(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    q = driver.q
    job_id = q.enqueue({}, max_attempts=1)
    with caplog.at_level(logging.DEBUG, logger="leaseq.worker"):
        driver.worker(handlers.boom).run(burst=True)
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "leaseq.worker"]
    assert any(
        f"job={job_id} attempt=1 error -> dead: ValueError: boom on {job_id}" in x for x in lines
    )
    assert all(x.startswith("queue=") and " job=" in x and " attempt=" in x for x in lines)
    assert any(x.startswith("queue=emails job=-") and " started (" in x for x in lines)
    assert any(x.startswith("queue=emails job=-") and " stopped (" in x for x in lines)


@pytest.mark.parametrize(
    "kw",
    [
        {"concurrency": 0},
        {"concurrency": 1.5},
        {"ttl": 0},
        {"ttl": float("nan")},
        {"grace": -1},
        {"prefetch": -1},
        {"prefetch": 1.5},
    ],
)
def test_bad_settings_are_rejected(driver: Driver, kw: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        driver.worker(handlers.noop, **kw)


def test_handler_must_be_callable(driver: Driver) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        driver.worker("tests.support.handlers:noop")
