"""``leaseq demo``: jobs, workers, a crash mid-job, the reap that brings the job back.

On ``memory://`` it runs in this process: worker threads, and a "crashed"
worker that claims a job and then never heartbeats or completes — exactly
what a killed process leaves in Redis. With ``--url redis://...`` the
workers are real ``leaseq worker`` processes and one is SIGKILLed mid-job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from typing import Any

from rich.console import Console

from leaseq.cli import terminal as _terminal
from leaseq.errors import LeaseqError
from leaseq.queue import Queue, connect
from leaseq.transport import client as _redis
from leaseq.types import Job, Lease, State
from leaseq.worker import Worker

__all__ = ["handler", "run_demo"]

CRASH_TTL = 0.8
"""Lease of the job the crashing worker holds: short, so the demo is quick."""


def handler(lease: Lease) -> dict[str, int]:
    """The demo's job: sleep ``ms`` milliseconds, return the square of ``n``."""
    time.sleep(int(lease.payload.get("ms", 100)) / 1000)
    n = int(lease.payload["n"])
    return {"n": n, "square": n * n}


def run_demo(url: str, jobs: int, prefix: str, out: Console) -> None:
    memory = url.startswith("memory://")
    r = connect(url)
    name = "demo" if memory else f"demo-{uuid.uuid4().hex[:6]}"
    q = Queue(name, redis=r, prefix=prefix, keep_succeeded=3600.0, backoff=0.0)
    where = "an in-process memory:// store" if memory else _redis.redact(url)
    out.rule(f"leaseq demo on {where}, queue {name!r}")
    ms = 60 if memory else 400
    ids = q.enqueue_many([{"n": i, "ms": ms} for i in range(1, jobs + 1)])
    _step(out, f"1. enqueued {len(ids)} jobs (ids {ids[0]}..{ids[-1]}), each sleeps {ms} ms")
    victim = _run_memory(q, out) if memory else _run_processes(q, url, prefix, out)
    _until(lambda: q.stats().succeeded >= len(ids), 60.0, "every job to succeed")
    _step(out, f"5. every job succeeded; job {victim} did so at attempt 2")
    out.rule(f"job {victim}, as redis-cli shows it")
    out.print(f"$ redis-cli HGETALL {_quote(q.keys.job(victim))}", markup=False, soft_wrap=True)
    with _redis.translate_errors():
        raw = r.hgetall(q.keys.job(victim))
    for i, (k, v) in enumerate(sorted(raw.items()), 0):
        out.print(f"{2 * i + 1:>2}) {_quote(k)}", markup=False)
        out.print(f"{2 * i + 2:>2}) {_quote(v)}", markup=False)
    _summary(q, ids, out)


def _run_memory(q: Queue, out: Console) -> str:
    crashed = q.claim(ttl=CRASH_TTL, worker="demo-worker-3")
    assert crashed is not None
    _step(
        out,
        f"2. demo-worker-3 claimed job {crashed.id} (attempt 1, lease {CRASH_TTL} s) and "
        "crashed: no heartbeats, no completion",
    )
    workers = [
        Worker(
            q, handler, concurrency=3, ttl=5.0, worker_id=f"demo-worker-{i}", handle_signals=False
        )
        for i in (1, 2)
    ]
    _burst(workers)
    _step(
        out,
        f"3. demo-worker-1 and -2 ran the other jobs; job {crashed.id} is still "
        f"{_state(q, crashed.id)}, its lease running out",
    )
    with _redis.translate_errors():
        _until(lambda: _server_now(q) > crashed.deadline, 10.0, "the lease to expire")
    requeued, died = q.reap()
    job = _get(q, crashed.id)
    _step(
        out,
        f"4. reap(): {requeued} returned to pending, {died} dead-lettered; job {crashed.id} is "
        f"{job.state.value}, last_error={job.last_error!r}",
    )
    _burst(workers[:1])
    return crashed.id


def _burst(workers: list[Worker]) -> None:
    threads = [threading.Thread(target=w.run, kwargs={"burst": True}) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _run_processes(q: Queue, url: str, prefix: str, out: Console) -> str:
    # The URL goes in the environment, not argv, where `ps` would show its password.
    env = {**os.environ, "LEASEQ_URL": url}
    cmd = _worker_command(q, prefix)
    procs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=env) for _ in range(3)]
    try:
        _step(
            out,
            f"2. started 3 worker processes (pids {', '.join(str(p.pid) for p in procs)}),"
            " leases of 1 s",
        )
        found: tuple[subprocess.Popen[bytes], Job] = _until(
            lambda: _holding(q, procs), 30.0, "a worker's first job"
        )
        doomed, held = found
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        _step(
            out,
            f"3. SIGKILLed pid {doomed.pid} while it held job {held.id} (attempt {held.attempts})",
        )
        again = _until(
            lambda: (j := _get(q, held.id)).attempts >= 2 and j.last_error and j,
            30.0,
            "the job to come back",
        )
        _step(
            out,
            f"4. its lease expired and a claim's reap handed it back: last_error="
            f"{again.last_error!r}; now attempt {again.attempts} on {again.worker}",
        )
        _until(lambda: _drained(q), 60.0, "the queue to drain")
        return held.id
    finally:
        _stop(procs)


def _worker_command(q: Queue, prefix: str) -> list[str]:
    """``leaseq worker`` on the demo's handler, with short leases."""
    return [
        sys.executable,
        "-m",
        "leaseq.cli",
        "--prefix",
        prefix,
        "worker",
        q.name,
        "leaseq.cli.demo:handler",
        "--concurrency",
        "2",
        "--ttl",
        "1.0",
        "--grace",
        "5",
        "--log-level",
        "ERROR",
    ]


def _holding(
    q: Queue, procs: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], Job] | None:
    """One of ``procs`` that holds a job, and the job (None: none yet)."""
    if any(p.poll() is not None for p in procs):
        raise LeaseqError("demo: a worker process exited early (see its stderr above)")
    by_pid = {p.pid: p for p in procs}
    for job in q.ls(State.ACTIVE):
        pid = (job.worker or "").split(":")[-2:-1]
        if pid and pid[0].isdigit() and int(pid[0]) in by_pid:
            return by_pid[int(pid[0])], job
    return None


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each worker still running; SIGKILL one not gone in 10 s."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _drained(q: Queue) -> bool:
    stats = q.stats()
    return stats.pending + stats.active + stats.scheduled == 0


def _summary(q: Queue, ids: list[str], out: Console) -> None:
    # The CLI's tables: one line a row in the terminal's width (80 at least).
    columns = [
        _terminal.Column("job", keep="middle", share=0.4),
        _terminal.Column("state", keep=None),
        _terminal.Column("attempts", keep=None, justify="right"),
        _terminal.Column("worker", keep=None),  # which worker ran it is the point
        _terminal.Column("result", keep=None),  # short JSON: the id gives way first
    ]
    rows = []
    for job_id in ids:
        job = _get(q, job_id)
        rows.append(
            [job.id, job.state.value, str(job.attempts), job.worker or "", json.dumps(job.result)]
        )
    width = _terminal.terminal_width()
    title = f"queue {q.name}: {q.stats().succeeded} of {len(ids)} succeeded"
    out.print(_terminal.fit(_terminal.grid(title), columns, rows, width), width=width)


def _step(out: Console, text: str) -> None:
    # A step of the story, wrapped at the terminal's width under its number: a
    # terminal would break it mid-word (the console never wraps: soft_wrap).
    wrapped = textwrap.fill(
        text,
        _terminal.terminal_width(),
        subsequent_indent="   ",
        break_long_words=False,  # ids and pids stay whole
        break_on_hyphens=False,
    )
    out.print(wrapped, markup=False)


def _get(q: Queue, job_id: str) -> Job:
    job = q.get(job_id)
    if job is None:
        raise LeaseqError(f"demo job {job_id} vanished")
    return job


def _state(q: Queue, job_id: str) -> str:
    return _get(q, job_id).state.value


def _server_now(q: Queue) -> float:
    sec, usec = q.redis.time()
    return float(sec) + float(usec) / 1e6


def _until(predicate: Any, timeout: float, what: str) -> Any:
    give_up = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > give_up:
            raise LeaseqError(f"demo: timed out waiting for {what}")
        time.sleep(0.02)


def _quote(value: Any) -> str:
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
