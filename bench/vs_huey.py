"""leaseq against huey, side by side on one throwaway redis-server.

``python -m bench.vs_huey [--jobs N] [--rounds R]`` (needs ``pip install huey``)
measures, round after round, alternating which goes first:

- **drain**: one worker process with its defaults (``leaseq worker Q
  bench.peer_tasks:handler --burst``; ``huey_consumer bench.peer_tasks.huey``)
  running N jobs that each do one Redis ``INCR``; jobs/s from the first
  completion to the last, timed from outside by polling the counter;
- **enqueue**: N single enqueues from one client (``q.enqueue`` against
  calling the huey task), jobs/s;
- **bytes per job**: ``used_memory`` delta over those N pending jobs.

It prints each figure's median per side and the ratio leaseq / huey (for
bytes, lower is leaner). An acking queue (leases, attempts, an index per
state) against huey's plain list: the ratios are the point, not the rates.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import leaseq
from bench.server import Server

ROOT = Path(__file__).resolve().parent.parent


COUNTER = "bench:done"
"""The key both sides' handlers INCR (bench/peer_tasks.py)."""


def drain(r: Any, url: str, jobs: int, command: list[str], cpu: list[float] | None = None) -> float:
    """Start ``command`` on ``jobs`` queued jobs; jobs/s first to last completion.
    With ``cpu``: wait for the command to exit by itself (``--burst``) and append
    the CPU seconds it and the children it waited for used."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_REDIS_URL": url}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    first: tuple[float, int] | None = None
    give_up = time.monotonic() + 300
    try:
        while True:
            done = int(r.get(COUNTER) or 0)
            now = time.perf_counter()
            if done and first is None:
                first = (now, done)
            if done >= jobs:
                break
            if time.monotonic() > give_up or (proc.poll() is not None and done < jobs):
                raise RuntimeError(f"{command[0]}: {done} of {jobs} jobs done")
            time.sleep(0.01)
    finally:
        if cpu is not None and proc.poll() is None:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            cpu.append(usage.ru_utime + usage.ru_stime)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert first is not None
    return (jobs - first[1]) / max(now - first[0], 1e-9)


def enqueue(r: Any, jobs: int, one: Callable[[int], object]) -> tuple[float, float]:
    """(jobs/s of ``jobs`` single enqueues, bytes of Redis memory per pending job)."""
    r.flushall()
    one(-1)  # warm: scripts loaded, keys made
    base = r.info("memory")["used_memory"]
    start = time.perf_counter()
    for i in range(jobs):
        one(i)
    rate = jobs / (time.perf_counter() - start)
    return rate, (r.info("memory")["used_memory"] - base) / jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vs_huey")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    bin_dir = Path(sys.executable).parent
    leaseq_exe = shutil.which("leaseq", path=str(bin_dir)) or "leaseq"
    consumer = shutil.which("huey_consumer", path=str(bin_dir)) or "huey_consumer"
    n = args.jobs
    got: dict[str, dict[str, list[float]]] = {
        side: {"drain": [], "enqueue": [], "bytes/job": []} for side in ("leaseq", "huey")
    }
    with Server() as server:
        r = server.client()
        os.environ["BENCH_REDIS_URL"] = server.url  # read by bench.peer_tasks at import
        from bench import peer_tasks

        if peer_tasks.huey is None:
            raise SystemExit("bench.vs_huey needs huey: pip install huey")
        q = leaseq.Queue("bench", redis=r)

        def leaseq_round() -> None:
            rate, size = enqueue(r, n, lambda i: q.enqueue({"i": i}))
            got["leaseq"]["enqueue"].append(rate)
            got["leaseq"]["bytes/job"].append(size)
            r.flushall()
            q.enqueue_many([{"i": i} for i in range(n)])
            command = [leaseq_exe, "--url", server.url, "worker", "bench",
                       "bench.peer_tasks:handler", "--burst"]  # fmt: skip
            got["leaseq"]["drain"].append(drain(r, server.url, n, command))

        def huey_round() -> None:
            rate, size = enqueue(r, n, lambda i: peer_tasks.incr())
            got["huey"]["enqueue"].append(rate)
            got["huey"]["bytes/job"].append(size)
            r.flushall()
            for _ in range(n):
                peer_tasks.incr()
            got["huey"]["drain"].append(
                drain(r, server.url, n, [consumer, "bench.peer_tasks.huey", "-w", "1"])
            )

        for k in range(args.rounds):
            for run in (leaseq_round, huey_round) if k % 2 == 0 else (huey_round, leaseq_round):
                run()
            print(f"round {k + 1}/{args.rounds} done", flush=True)
    print(f"{n} jobs, median of {args.rounds} rounds, alternating")
    print(f"{'figure':<10} {'leaseq':>12} {'huey':>12} {'leaseq/huey':>12}")
    for figure in ("drain", "enqueue", "bytes/job"):
        a = statistics.median(got["leaseq"][figure])
        b = statistics.median(got["huey"][figure])
        print(f"{figure:<10} {a:>12,.0f} {b:>12,.0f} {a / b:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
