"""Worker logs (leaseq.observe.logs): ``--log-format json`` writes one object per line with
the job's fields, failures and dead-letters are WARNING lines with id and
attempt, and ``--log-jobs`` adds a line per finished job. Real worker
processes on a real redis-server.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import leaseq
from leaseq.observe.logs import JobLog, JsonFormatter
from tests.support.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]


LEASEQ = str(Path(sys.executable).parent / "leaseq")


def _run(url: str, queue: str, fn: str, *opts: str) -> str:
    cmd = [LEASEQ, "--url", url, "worker", queue, f"tests.support.handlers:{fn}", "--burst", *opts]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    leaseq.Queue.from_url(redis_server.url, "x").redis.flushall()
    return redis_server.url


def test_json_lines_carry_the_job_fields_and_failures_are_warnings(url: str) -> None:
    q = leaseq.Queue.from_url(url, "logs")
    ids = q.enqueue_many([{"n": 1}, {"n": 2}], max_attempts=1)
    err = _run(url, "logs", "boom", "--log-format", "json", "--log-jobs")
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line JSON
    assert all({"time", "level", "logger", "message"} <= set(doc) for doc in lines)
    warnings = [d for d in lines if d["level"] == "WARNING" and "job_id" in d]
    # One attempt each, then dead: each WARNING line names the id and the attempt.
    assert sorted((d["job_id"], d["attempt"]) for d in warnings) == sorted((i, 1) for i in ids)
    assert all("dead" in d["message"] for d in warnings)
    finished = [d for d in lines if "outcome" in d]
    assert len(finished) == 2 and {d["outcome"] for d in finished} == {"retry"}
    assert all(isinstance(d["duration"], float) and d["queue"] == "logs" for d in finished)


def test_without_log_jobs_no_line_per_success(url: str) -> None:
    q = leaseq.Queue.from_url(url, "quiet")
    q.enqueue_many([{"n": i} for i in range(20)])
    err = _run(url, "quiet", "noop", "--log-format", "json")
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert not [d for d in lines if "outcome" in d]
    assert len(lines) < 10  # start and stop lines only, whatever the job count
    q.enqueue_many([{"n": i} for i in range(20)])
    text = _run(url, "quiet", "noop")  # the default: text, no line per job
    assert "finished outcome=" not in text and "{" not in text


def test_log_jobs_in_text_format(url: str) -> None:
    q = leaseq.Queue.from_url(url, "texty")
    job_id = q.enqueue({"n": 1})
    err = _run(url, "texty", "noop", "--log-jobs")
    assert f"queue=texty job={job_id} attempt=1 finished outcome=complete duration=" in err


def test_json_formatter_redacts_passwords_and_job_log_fields() -> None:
    record = logging.LogRecord(
        "leaseq.worker", logging.WARNING, __file__, 1,
        "cannot reach redis://:s3cret@host:6379/0", (), None,
    )  # fmt: skip
    doc = json.loads(JsonFormatter().format(record))
    assert "s3cret" not in doc["message"] and doc["level"] == "WARNING"
    assert "job_id" not in doc


def test_job_log_is_silent_below_info(caplog: Any) -> None:
    lease = leaseq.Lease(
        id="a", queue="q", attempt=3, max_attempts=5, payload=None,
        deadline=0.0, enqueued_at=0.0, worker="w",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="leaseq.worker"):
        JobLog().finished("q", "complete", 0.5, lease)
    assert caplog.records == []
    with caplog.at_level(logging.INFO, logger="leaseq.worker"):
        JobLog().finished("q", "complete", 0.5, lease)
    (rec,) = caplog.records
    assert (rec.job_id, rec.attempt, rec.outcome, rec.duration) == ("a", "3", "complete", 0.5)  # type: ignore[attr-defined]
