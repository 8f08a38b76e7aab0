"""CPU-bound handlers: one worker process against two (``leaseq worker --processes``).

``python -m bench.processes [--jobs 100] [--repeats 3]`` drains ``--jobs`` jobs whose
handler is a pure-Python loop of about 20 ms, with ``leaseq.Supervisor`` running
1 process x 1 thread, 1 process x 2 threads (the GIL: no gain expected) and
2 processes x 1 thread, in interleaved trials on a throwaway redis-server. The
drain time of a trial is the last ``finished_at`` minus the first ``claimed_at``
(server clock), so process start-up is left out; the wall time with start-up is
printed too. Prints medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import leaseq
from bench.server import Server

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 20.0


def cpu(lease: leaseq.Lease) -> float:
    """The benchmark's handler: ``payload['n']`` turns of a pure-Python loop;
    returns the seconds it took (wall clock: with two threads on one GIL, twice)."""
    began = time.perf_counter()
    total = 0
    for i in range(int(lease.payload["n"])):
        total += i * i % 7
    return time.perf_counter() - began + 0 * total


def calibrate(target_ms: float = TARGET_MS) -> int:
    """Loop turns that take about ``target_ms`` here (median of a few runs)."""
    n = 100_000
    lease = leaseq.Lease(
        id="x", queue="q", attempt=1, max_attempts=1, payload={"n": n}, deadline=0.0,
        enqueued_at=0.0, worker="w",
    )  # fmt: skip
    spent = []
    for _ in range(9):
        began = time.perf_counter()
        cpu(lease)
        spent.append(time.perf_counter() - began)
    return int(n * target_ms / 1000 / statistics.median(spent))


def trial(server: Server, name: str, jobs: int, n: int, processes: int, threads: int) -> Any:
    """Drain ``jobs`` jobs; (drain seconds from first claim to last finish, wall seconds)."""
    client = server.client()
    client.flushall()
    q = leaseq.Queue(name, redis=client)
    ids = q.enqueue_many([{"n": n}] * jobs)
    sup = leaseq.Supervisor(
        name,
        "bench.processes:cpu",
        processes=processes,
        concurrency=threads,
        url=server.url,
        burst=True,
        handle_signals=False,
        log_level="WARNING",
        cwd=str(ROOT),
    )
    began = time.perf_counter()
    assert sup.run() == 0
    wall = time.perf_counter() - began
    rows = [q.get(i) for i in ids]
    assert all(r is not None and r.state is leaseq.State.SUCCEEDED for r in rows)
    done = [r for r in rows if r is not None]
    first = min(r.claimed_at or 0.0 for r in done)
    last = max(r.finished_at or 0.0 for r in done)
    per_job = statistics.median(float(r.result) for r in done)  # the handler's own time
    client.close()
    return last - first, wall, per_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = calibrate()
    cases = {"1 process x 1 thread": (1, 1), "1 process x 2 threads": (1, 2)}
    cases["2 processes x 1 thread"] = (2, 1)
    drains: dict[str, list[float]] = {c: [] for c in cases}
    walls: dict[str, list[float]] = {c: [] for c in cases}
    jobs_s: dict[str, list[float]] = {c: [] for c in cases}
    print(f"{os.cpu_count()} cores; handler: {n} loop turns (~{TARGET_MS:g} ms); {args.jobs} jobs")
    with Server() as server:
        for _ in range(args.repeats):
            for case, (processes, threads) in cases.items():
                drain, wall, per_job = trial(server, "cpu", args.jobs, n, processes, threads)
                drains[case].append(drain)
                walls[case].append(wall)
                jobs_s[case].append(per_job)
    base = statistics.median(drains["1 process x 1 thread"])
    head = f"{'case':<24} {'drain s':>8} {'jobs/s':>8} {'job ms':>7} {'wall s':>7}"
    # job ms: the handler's median time per job as it ran; drain s: first claim to
    # last finish (server clock); wall s: the supervisor's run() with process start-up.
    print(head + f" {'speed-up':>9}")
    for case in cases:
        drain = statistics.median(drains[case])
        wall = statistics.median(walls[case])
        job_ms = statistics.median(jobs_s[case]) * 1000
        print(
            f"{case:<24} {drain:8.2f} {args.jobs / drain:8.1f} {job_ms:7.1f} {wall:7.2f}"
            f" {base / drain:8.2f}x"
        )


if __name__ == "__main__":
    main()
