"""Workflows run by real ``leaseq worker`` processes, one of them SIGKILLed mid-run."""

from __future__ import annotations

import signal
from typing import Any

import pytest

import leaseq
from tests.support.servers import wait_until
from tests.support.workers import Workers


@pytest.mark.slow
def test_a_fan_in_survives_a_killed_worker_and_its_callback_runs_once_after_all(
    workers: Workers, rr: Any
) -> None:
    q = leaseq.Queue("fanin", redis=rr)
    parents = q.enqueue_many([{"n": i} for i in range(10_000)])
    callback = q.enqueue({"callback": True}, depends_on=parents)
    first = workers.start("fanin", "echo", "--ttl", "1", "--concurrency", "8")
    wait_until(lambda: q.stats().succeeded >= 1_000, 60, what="the first worker to get going")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert q.get(callback).state is leaseq.State.WAITING  # type: ignore[union-attr]
    workers.start("fanin", "echo", "--ttl", "1", "--concurrency", "8")
    done = lambda: (j := q.get(callback)) is not None and j.state.finished  # noqa: E731
    wait_until(done, 120, what="the callback to finish")
    job = q.get(callback)
    assert job is not None and job.state is leaseq.State.SUCCEEDED
    assert job.attempts == 1 and job.result == {"callback": True}
    events = list(q.events())
    moves = [(e.from_state, e.to_state) for e in events if e.job_id == callback]
    assert moves.count((leaseq.State.WAITING, leaseq.State.PENDING)) == 1
    # Every parent succeeded (once each), all before the callback was released.
    wanted = set(parents)
    done_at = [
        i
        for i, e in enumerate(events)
        if e.job_id in wanted and e.to_state is leaseq.State.SUCCEEDED
    ]
    assert len(done_at) == 10_000 and q.stats().totals["succeeded"] == 10_001
    released = next(
        i
        for i, e in enumerate(events)
        if e.job_id == callback and e.to_state is leaseq.State.PENDING
    )
    assert max(done_at) < released
