"""Uniqueness keys with real workers: the key of a job whose worker was
SIGKILLed is freed once the expired lease is reaped to dead (no lock to expire,
none to leak). The rules themselves are tests/store/test_unique.py.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import leaseq
from tests.support.servers import wait_until
from tests.support.workers import Workers, _exits, _job, _q


def test_a_killed_workers_job_reaped_to_dead_frees_its_key(
    rr: Any, workers: Workers, tmp_path: Path
) -> None:
    q = _q(rr)
    key = leaseq.Unique("nightly-report")
    first = q.enqueue({"kill": str(tmp_path / "runs")}, max_attempts=1, unique=key)
    assert q.enqueue({}, unique=key) == first
    proc = workers.start("jobs", "kill_self", "--concurrency", "1", "--ttl", "0.3")
    assert _exits(proc, 15) == -signal.SIGKILL
    assert _job(q, first).state is leaseq.State.ACTIVE  # held until its lease runs out
    assert q.enqueue({}, unique=key) == first
    wait_until(lambda: q.reap() is not None and _job(q, first).state is leaseq.State.DEAD, 10)
    second = q.enqueue({}, unique=key)
    assert second != first
    assert _job(q, second).unique_key == "nightly-report"
