"""Errors as an operator reads them: ``last_error`` is ``Type: message`` (the
whole message, first line first), the traceback is stored apart without
leaseq's own frames, and the row keeps a bounded attempt-by-attempt log of its
failures — for the threaded worker, the asyncio worker and process mode alike.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
import leaseq.aio
from leaseq.handler import TRACEBACK_CHARS, describe_error, format_traceback
from tests.support import handlers
from tests.support.drivers import Driver
from tests.support.servers import wait_until
from tests.support.workers import Workers, _exits

MESSAGE = "RuntimeError: SMTP 550: no such user gone0@bounce.test\nthe server said goodbye"


def _check_fields(job: leaseq.Job | None, attempts: int) -> None:
    assert job is not None and job.state is leaseq.State.DEAD
    assert job.last_error == MESSAGE
    assert job.traceback is not None
    assert job.traceback.startswith("Traceback (most recent call last):")
    assert "in smtp_bounce" in job.traceback and "in _send" in job.traceback
    assert job.traceback.rstrip().endswith("the server said goodbye")
    for own in ("worker.py", "handler.py", "_handler_loop", "leaseq/"):
        assert own not in job.traceback
    assert [f.attempt for f in job.failures] == list(range(1, attempts + 1))
    assert [f.to for f in job.failures] == ["pending"] * (attempts - 1) + ["dead"]
    for f in job.failures:
        assert f.error == MESSAGE.replace("\n", " ")
        assert f.worker and f.claimed_at and f.failed_at >= f.claimed_at


# -- the pure formatting ------------------------------------------------------------


def test_describe_error_is_type_and_whole_message_without_source_lines() -> None:
    try:
        handlers._send("gone0@bounce.test")
    except RuntimeError as exc:
        assert describe_error(exc) == MESSAGE
        tb = format_traceback(exc)
    assert "raise RuntimeError" in tb and "in _send" in tb and "test_errors.py" in tb
    assert describe_error(KeyError("k")) == "KeyError: 'k'"
    assert describe_error(ValueError()) == "ValueError"


def test_a_traceback_keeps_its_causes_and_is_bounded_from_the_outside() -> None:
    def deep(n: int) -> None:  # two functions in turn: Python folds only repeated frames
        if n == 0:
            try:
                {}["missing"]
            except KeyError as inner:
                raise ValueError("wrapped") from inner
        deeper(n - 1)

    def deeper(n: int) -> None:
        deep(n)

    try:
        deep(400)
    except ValueError as exc:
        tb = format_traceback(exc)
    assert len(tb) <= TRACEBACK_CHARS
    assert tb.startswith("...[outer frames cut]")
    assert tb.rstrip().endswith("ValueError: wrapped")


# -- the workers, on a real server --------------------------------------------------


@pytest.mark.parametrize("attempts", [3, 2])
def test_a_worker_writes_message_traceback_and_failures(live_driver: Driver, attempts: int) -> None:
    q = live_driver.queue("shop", backoff=0.0)
    job_id = q.enqueue({"to": "gone0@bounce.test"}, max_attempts=attempts)
    live_driver.worker(handlers.smtp_bounce, queue=q, ttl=5.0).run(burst=True)
    _check_fields(q.get(job_id), attempts)
    raw = live_driver.redis.hgetall(f"leaseq:{{shop}}:job:{job_id}")
    assert raw[b"last_error"].decode() == MESSAGE  # plain text, as redis-cli shows it


@pytest.mark.slow
def test_process_mode_writes_the_same_fields(rr: Any, workers: Workers) -> None:
    q = leaseq.Queue("jobs", redis=rr, backoff=0.0)
    job_id = q.enqueue({"to": "gone0@bounce.test"}, max_attempts=1)
    proc = workers.start("jobs", "smtp_bounce", "--processes", "2", "--burst")
    assert _exits(proc, 30) == 0
    _check_fields(q.get(job_id), 1)


def test_an_expired_lease_is_logged_and_clears_the_old_traceback(rr: Any) -> None:
    q = leaseq.Queue("jobs", redis=rr, backoff=0.0)
    job_id = q.enqueue({}, max_attempts=3)
    lease = q.claim(ttl=5.0, worker="w1")
    assert lease is not None
    q.fail(lease, "ValueError: first", traceback="Traceback ...\nValueError: first")
    first = q.get(job_id)
    assert first is not None and first.traceback == "Traceback ...\nValueError: first"
    lease = q.claim(ttl=0.01, worker="w2")
    assert lease is not None
    wait_until(lambda: q.reap() != (0, 0), 5, what="the expired lease reaped")
    job = q.get(job_id)
    assert job is not None and job.traceback is None
    assert job.last_error is not None and job.last_error.startswith("lease expired (attempt 2")
    assert [(f.attempt, f.worker, f.to) for f in job.failures] == [
        (1, "w1", "pending"),
        (2, "w2", "pending"),
    ]
    assert job.failures[0].error == "ValueError: first"


def test_the_failure_log_keeps_the_newest_ten_attempts(q: leaseq.Queue) -> None:
    job_id = q.enqueue({}, max_attempts=14)
    for attempt in range(1, 15):
        lease = q.claim(ttl=5.0)
        assert lease is not None and lease.attempt == attempt
        q.fail(lease, f"OSError: try {attempt}\nsecond line", retry_in=0)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.DEAD
    assert [f.attempt for f in job.failures] == list(range(5, 15))
    assert job.failures[-1].error == "OSError: try 14 second line" and job.failures[-1].to == "dead"
    assert job.traceback is None


def test_a_failure_log_edited_by_hand_is_skipped_line_by_line(r: Any, q: leaseq.Queue) -> None:
    job_id = q.enqueue({})
    r.hset(f"leaseq:{{emails}}:job:{job_id}", "failures", "garbage\n2 - 1700000000000 dead - X: y")
    job = q.get(job_id)
    assert job is not None
    assert [(f.attempt, f.claimed_at, f.worker, f.error) for f in job.failures] == [
        (2, None, None, "X: y")
    ]
