"""One ``leaseq worker`` process draining no-op jobs, timed from outside.

The bench enqueues the jobs, starts ``leaseq worker QUEUE bench.noop:handler
--burst`` with default settings and polls the queue's ``succeeded`` counter
every 20 ms. Two rates: ``leaseq`` counts from the first completion to the
last (the worker's steady drain) and ``with_start`` from the process start
(Python and import time included).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import figures
from bench.timing import REPEATS

JOBS = 20_000
QUEUE = "drain"
ROOT = Path(__file__).resolve().parent.parent


def worker_command(url: str, queue: str = QUEUE) -> list[str]:
    exe = Path(sys.executable).with_name("leaseq")
    head = [str(exe)] if exe.exists() else [sys.executable, "-m", "leaseq.cli"]
    return [*head, "--url", url, "worker", queue, "bench.noop:handler", "--burst"]


def once(r: Any, url: str, jobs: int) -> tuple[float, float]:
    """(jobs/s from first to last completion, jobs/s from process start)."""
    r.flushall()
    q = figures.queue(r, QUEUE)
    q.enqueue_many(figures.payloads(jobs))
    return run_worker(q, url, jobs)


def run_worker(q: Any, url: str, jobs: int) -> tuple[float, float]:
    """Start one ``leaseq worker --burst`` on ``q`` (already holding ``jobs``
    jobs) and poll its ``succeeded`` counter every 20 ms until all are done:
    (jobs/s from first to last completion, jobs/s from process start)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        worker_command(url, q.name),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    first = None
    try:
        while True:
            done = q.stats().totals.get("succeeded", 0)
            now = time.perf_counter()
            if done and first is None:
                first = (now, done)
            if done >= jobs or proc.poll() is not None:
                break
            time.sleep(0.02)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or done < jobs or first is None:
        raise RuntimeError(
            f"worker exited {proc.returncode} after {done} of {jobs} jobs: {err.decode()[-500:]}"
        )
    steady = (jobs - first[1]) / max(now - first[0], 1e-9)
    return steady, jobs / (now - start)


def measure(r: Any, server: Any, size: figures.Size) -> dict[str, Any]:
    jobs = JOBS if size.bulk >= 100_000 else JOBS // 2
    runs = sorted(once(r, server.url, jobs) for _ in range(REPEATS))
    mid = runs[len(runs) // 2]
    r.flushall()
    return {"leaseq": mid[0], "with_start": mid[1], "jobs": jobs}
