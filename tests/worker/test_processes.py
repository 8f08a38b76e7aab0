"""Real `leaseq worker` processes against a real redis-server: signals, crashes,
heartbeats, lost leases and wake-up latency.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from tests.support.servers import RedisServer, wait_until
from tests.support.workers import Workers, _exits, _job, _q

ROOT = Path(__file__).resolve().parents[2]


LEASEQ = str(Path(sys.executable).parent / "leaseq")


pytestmark = pytest.mark.slow


def _active(q: leaseq.Queue, job_id: str) -> bool:
    return _job(q, job_id).state is leaseq.State.ACTIVE


def test_sigterm_lets_the_running_job_finish(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    job_id = q.enqueue({"s": 0.6})
    proc = workers.start("jobs", "sleep", "--grace", "10", "--log-level", "DEBUG")
    wait_until(lambda: "attempt=1 started" in workers.log(proc), 10, what="the handler")
    proc.send_signal(signal.SIGTERM)
    assert _exits(proc, 10) == 0
    job = _job(q, job_id)
    assert job.state is leaseq.State.SUCCEEDED and job.attempts == 1 and job.result == "slept"
    assert "SIGTERM" in workers.log(proc)


def test_sigterm_after_grace_releases_the_job(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    job_id = q.enqueue({"s": 30})
    proc = workers.start("jobs", "sleep", "--grace", "0.3", "--log-level", "DEBUG")
    wait_until(lambda: "attempt=1 started" in workers.log(proc), 10, what="the handler")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert _exits(proc, 10) == 0
    assert time.monotonic() - started < 5
    job = _job(q, job_id)
    assert job.state is leaseq.State.PENDING and job.attempts == 1
    assert f"job={job_id} attempt=1 released unfinished at shutdown" in workers.log(proc)


def test_second_signal_stops_at_once(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    ids = q.enqueue_many([{"s": 30}, {"s": 30}, {"s": 30}])
    proc = workers.start(
        "jobs", "sleep", "--grace", "60", "--concurrency", "2", "--log-level", "DEBUG"
    )
    wait_until(lambda: workers.log(proc).count("attempt=1 started") == 2, 10, what="two handlers")
    assert q.stats().active == 3
    proc.send_signal(signal.SIGTERM)
    # The prefetched job that never started goes back at once, before any grace ends.
    wait_until(lambda: q.stats().pending == 1, 5, what="the unstarted job's release")
    proc.send_signal(signal.SIGINT)
    assert _exits(proc, 5) == 0
    assert [_job(q, i).state for i in ids] == [leaseq.State.PENDING] * 3


def test_sigkill_mid_job_is_reaped_and_finished_elsewhere(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    job_id = q.enqueue({"s": 0.3})
    doomed = workers.start("jobs", "sleep", "--ttl", "0.5")
    wait_until(lambda: _active(q, job_id), 10, what="the job to start")
    first = _job(q, job_id).worker
    doomed.kill()
    doomed.wait()
    workers.start("jobs", "sleep", "--ttl", "0.5")
    wait_until(
        lambda: _job(q, job_id).state is leaseq.State.SUCCEEDED, 15, what="the job to finish"
    )
    job = _job(q, job_id)
    assert job.attempts == 2
    assert job.worker != first
    assert job.last_error is not None and "lease expired (attempt 1" in job.last_error


def test_a_job_killed_at_its_sixth_step_resumes_there(
    rr: Any, workers: Workers, tmp_path: Path
) -> None:
    # Durable steps (docs/durable.md): steps 1-5 were recorded before the SIGKILL,
    # so the next worker skips them; step 6's body had run, unrecorded: it runs again.
    q = _q(rr)
    log = tmp_path / "steps.log"
    job_id = q.enqueue({"log": str(log), "kill_at": 6})
    doomed = workers.start("jobs", "ten_steps", "--ttl", "0.5")
    assert doomed.wait(timeout=30) == -signal.SIGKILL
    workers.start("jobs", "ten_steps", "--ttl", "0.5")
    wait_until(
        lambda: _job(q, job_id).state is leaseq.State.SUCCEEDED, 15, what="the job to finish"
    )
    job = _job(q, job_id)
    assert [int(n) for n in log.read_text().split()] == [1, 2, 3, 4, 5, 6, 6, 7, 8, 9, 10]
    assert job.result == [n * n for n in range(1, 11)] and job.attempts == 2
    assert job.steps == {f"step-{n}": n * n for n in range(1, 11)}


def test_worker_processes_sleep_and_wait_for_signals(
    rr: Any, workers: Workers, tmp_path: Path
) -> None:
    # --processes 2: the children run the one worker core, so sleeps and waits
    # suspend there as in-process; no child holds a job while it waits.
    q = _q(rr)
    log = tmp_path / "charges.log"
    ids = [q.enqueue({"order": n, "nap": 0.2, "log": str(log)}) for n in range(6)]
    supervisor = workers.start("jobs", "order", "--processes", "2", "--concurrency", "1")
    wait_until(
        lambda: q.stats().suspended == 6 and all(_job(q, i).wait_key for i in ids),
        20,
        what="every order to wait for its approval",
    )
    assert sum(q.signal(f"approved:{n}", {"ok": n}) for n in range(6)) == 6
    wait_until(lambda: q.stats().succeeded == 6, 20, what="every order to ship")
    assert [_job(q, i).result for i in ids] == [[f"ch_{n}", {"ok": n}] for n in range(6)]
    assert sorted(int(n) for n in log.read_text().split()) == list(range(6))  # charged once
    supervisor.send_signal(signal.SIGTERM)  # its children stop with it, none left to
    assert supervisor.wait(timeout=30) == 0  # claim the next test's jobs


def test_heartbeats_hold_a_job_five_times_its_lease(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    job_id = q.enqueue({"s": 1.0})
    proc = workers.start("jobs", "sleep", "--ttl", "0.2")
    wait_until(lambda: _active(q, job_id), 10, what="the job to start")
    reaped = []

    def done() -> bool:
        reaped.append(q.reap())  # a rival reaper, as hard as it can
        return _job(q, job_id).state is not leaseq.State.ACTIVE

    wait_until(done, 15, every=0.02, what="the job to finish")
    job = _job(q, job_id)
    assert job.state is leaseq.State.SUCCEEDED and job.attempts == 1
    assert set(reaped) == {(0, 0)}
    assert len(reaped) > 10
    proc.send_signal(signal.SIGTERM)
    assert _exits(proc, 10) == 0


def test_lease_lost_while_running_discards_the_outcome(
    rr: Any, workers: Workers, tmp_path: Path
) -> None:
    q = _q(rr)
    flag = tmp_path / "flag"
    job_id = q.enqueue({"flag": str(flag), "s": 10})
    proc = workers.start(
        "jobs", "wait_for_loss", "--ttl", "0.3", "--concurrency", "1", "--prefetch", "0"
    )  # no free slot: it cannot re-claim the job itself
    wait_until(lambda: _active(q, job_id), 10, what="the job to start")
    # Make the running lease look expired, reap it and take the job ourselves:
    # the worker's next heartbeat must find its lease gone.
    rr.hset(q.keys.job(job_id), "lease_until", 1)
    rr.zadd(q.keys.active, {job_id: 1})
    assert q.reap() == (1, 0)
    mine = q.claim(ttl=30.0, worker="thief")
    assert mine is not None and mine.attempt == 2
    # write_text creates the file before it writes: wait for the word, not the file.
    wait_until(lambda: flag.exists() and flag.read_text(), 10, what="the handler to return")
    assert flag.read_text() == "lost"
    wait_until(lambda: "outcome discarded" in workers.log(proc), 10, what="the discard log")
    job = _job(q, job_id)
    assert job.state is leaseq.State.ACTIVE and job.attempts == 2 and job.result is None
    assert job.worker == "thief"
    q.complete(mine, result="mine")
    assert _job(q, job_id).result == "mine"


def _blocked(rr: Any) -> bool:
    """Some client is blocked in BLPOP right now (flag b; cmd alone is the last command)."""
    return any(c.get("cmd") == "blpop" and "b" in c.get("flags", "") for c in rr.client_list())


def _idle(rr: Any, workers: Workers, proc: subprocess.Popen[bytes]) -> bool:
    # "started" first: a killed worker of the previous test may linger in CLIENT LIST.
    return "started" in workers.log(proc) and _blocked(rr)


def test_idle_worker_wakes_within_50_ms_of_an_enqueue(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    proc = workers.start("jobs", "noop")
    latencies = []
    for _ in range(8):
        wait_until(lambda: _idle(rr, workers, proc), 10, what="the worker to block")
        job_id = q.enqueue({})
        job = wait_until(lambda j=job_id: (x := _job(q, j)).claimed_at and x, 5, what="claim")
        assert job.enqueued_at is not None
        latencies.append(job.claimed_at - job.enqueued_at)  # both on the server's clock
    assert statistics.median(latencies) < 0.05, latencies
    assert max(latencies) < 0.25, latencies


def test_idle_worker_sleeps_until_a_delayed_job_is_due(rr: Any, workers: Workers) -> None:
    q = _q(rr)
    proc = workers.start("jobs", "noop")
    wait_until(lambda: _idle(rr, workers, proc), 10, what="the worker to block")
    job_id = q.enqueue({}, delay=0.4)
    job = wait_until(
        lambda: (x := _job(q, job_id)).state is leaseq.State.SUCCEEDED and x, 5, what="the job"
    )
    assert job.claimed_at is not None and job.enqueued_at is not None
    # Due 0.4 s after enqueue (server clock); claimed then, not at the 5 s nap cap.
    assert 0.4 <= job.claimed_at - job.enqueued_at < 0.6


def test_worker_rides_out_a_redis_restart() -> None:
    server = RedisServer()
    try:
        client = redis.Redis(port=server.port)
        q = leaseq.Queue("jobs", redis=client)
        w = Workers(server.url)
        try:
            proc = w.start("jobs", "noop", "--ttl", "2")
            first = q.enqueue({})
            wait_until(lambda: _job(q, first).state is leaseq.State.SUCCEEDED, 10, what="job 1")
            server.kill()
            wait_until(lambda: "retrying in" in w.log(proc), 15, what="the worker to back off")
            assert proc.poll() is None
            server.start()
            second = q.enqueue({})
            wait_until(lambda: _job(q, second).state is leaseq.State.SUCCEEDED, 15, what="job 2")
            assert proc.poll() is None
        finally:
            w.close()
        client.close()
    finally:
        server.stop()


def test_cli_worker_burst_exits_when_drained(rr: Any, redis_server: RedisServer) -> None:
    q = _q(rr)
    q.enqueue_many([{"i": i} for i in range(50)])
    done = subprocess.run(
        [
            LEASEQ,
            "--url",
            redis_server.url,
            "worker",
            "jobs",
            "tests.support.handlers:echo",
            "--burst",
        ],
        cwd=ROOT,
        capture_output=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert q.stats().succeeded == 50


def test_blocking_claim_wakes_within_50_ms_of_an_enqueue(rr: Any) -> None:
    q = _q(rr)
    got: list[tuple[leaseq.Lease | None, float]] = []

    def claimer() -> None:
        lease = q.claim(ttl=30.0, block=5.0)
        got.append((lease, time.monotonic()))

    t = threading.Thread(target=claimer)
    t.start()
    wait_until(lambda: _blocked(rr), 10, what="the claim to block")
    enqueued = time.monotonic()
    job_id = q.enqueue({})
    t.join(10)
    lease, woke = got[0]
    assert lease is not None and lease.id == job_id
    assert woke - enqueued < 0.05


def test_idle_wait_stays_under_the_socket_timeout(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port, socket_timeout=0.3)
    q = leaseq.Queue("quiet", redis=client)
    started = time.monotonic()
    assert q.wait_for_wake(5.0) is False  # no ServerUnavailable: it waited less
    assert time.monotonic() - started < 2.0  # well short of the 5 s asked for
    client.close()
