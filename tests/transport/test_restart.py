"""Server crash and restart: SIGKILL redis-server mid-run, restart it from its AOF.

With ``appendonly yes`` and ``appendfsync always`` Redis writes every
command to the AOF and fsyncs it before replying, so whatever the client saw
acknowledged survives a SIGKILL: every enqueue and every completion. The
workers (bench/chaos.py) reconnect by themselves and the run ends with
zero lost. docs/reliability.md says what weaker settings can lose.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from bench import chaos
from tests.support.servers import RedisServer


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer("--appendonly", "yes", "--appendfsync", "always")
    yield s
    s.stop()


def aof_restart(server: RedisServer) -> None:
    server.kill()  # SIGKILL: no shutdown save, only what the AOF already holds
    server.start()  # same port, same --dir: loads the AOF


@pytest.mark.slow
def test_sigkill_the_server_mid_run_loses_nothing_acknowledged(
    server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis(port=server.port)
    producer = leaseq.Queue(chaos.QUEUE, redis=client, max_attempts=chaos.MAX_ATTEMPTS)
    acked_enqueues: list[str] = []
    crashes: list[float] = []

    def during(elapsed: float) -> bool:
        # Keep enqueueing while the run goes on, across the crash; record only
        # the enqueues the server acknowledged. The run goes on until both
        # crashes and the late enqueues are done, however fast the workers are.
        if elapsed < 3.0:
            job_id = f"late{len(acked_enqueues)}-{len(crashes)}"
            try:
                producer.enqueue({"i": -1, "late": True}, id=job_id)
                acked_enqueues.append(job_id)
            except leaseq.ServerUnavailable:
                pass
        if len(crashes) < 2 and elapsed > 1.0 + 1.0 * len(crashes):
            crashes.append(elapsed)
            aof_restart(server)
        return elapsed < 3.0 or len(crashes) < 2

    report = chaos.drive(
        server.url,
        jobs=200,
        workers=3,
        kill_every=0.4,
        mode="effects",
        ttl=0.4,
        timeout=60.0,
        during=during,
        acks=str(tmp_path),
    )
    print(report, crashes)
    assert len(crashes) == 2, "the server must have been killed mid-run"
    assert report["lost"] == 0 and report["unfinished"] == {}, report
    assert report["effects_double"] == 0 and report["effects_missing"] == 0, report
    assert report["over_max_attempts"] == 0 and report["active_after_reap"] == 0

    acked_completions = {
        line for f in tmp_path.glob("*.acks") for line in f.read_text().split() if line
    }
    assert len(acked_completions) > 50
    states: dict[str, Any] = {}
    for job_id in acked_completions:
        job = producer.get(job_id)
        states[job_id] = None if job is None else job.state
    assert all(s is leaseq.State.SUCCEEDED for s in states.values()), states

    assert len(acked_enqueues) > 10
    for job_id in acked_enqueues:
        job = producer.get(job_id)
        assert job is not None, f"acknowledged enqueue {job_id} is gone after the restart"
        assert job.state is leaseq.State.SUCCEEDED
    client.close()
