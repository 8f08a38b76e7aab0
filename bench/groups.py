"""Cost of fair groups (issue 11), side by side with no groups, in one run.

``python -m bench.groups [--jobs N] [--groups G]`` starts a throwaway
redis-server and prints two figures, each with its ratio to no groups:

- claim+complete cycles (batches of 100, one claimer) on a queue whose jobs
  are spread over G groups (default 10,000) against the same jobs ungrouped;
  and the same with ``group_concurrency`` set (high enough never to hold);
- the drain figure: one ``leaseq worker`` process draining no-op jobs
  (bench/drain.py's method), grouped over G groups against ungrouped.

Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

import leaseq
from bench.drain import ROOT, worker_command
from bench.server import Server
from bench.timing import Case, interleaved, rate, us

BATCH = 100


def fill(q: leaseq.Queue, n: int, groups: int) -> None:
    if groups == 0:
        q.enqueue_many(list(range(n)))
        return
    per = max(1, n // groups)
    for g in range(groups):
        q.enqueue_many(list(range(per)), group=f"tenant-{g}")


def drain_once(r: Any, url: str, n: int, groups: int) -> float:
    """Jobs/s of one worker process, from its first completion to its last."""
    r.flushall()
    q = leaseq.Queue("drain", redis=r)
    fill(q, n, groups)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        worker_command(url, "drain"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    first = None
    done = 0
    try:
        while True:
            done = q.stats().totals.get("succeeded", 0)
            now = time.perf_counter()
            if done and first is None:
                first = (now, done)
            if done >= n or proc.poll() is not None:
                break
            time.sleep(0.02)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or done < n or first is None:
        raise RuntimeError(f"worker exited {proc.returncode} after {done} of {n}: {err[-300:]!r}")
    return (n - first[1]) / max(now - first[0], 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.groups")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per trial and case")
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n, g = args.jobs, args.groups
    with Server() as server:
        r = server.client()
        plain = leaseq.Queue("plain", redis=r, keep_succeeded=0.0)
        grouped = leaseq.Queue("grouped", redis=r, keep_succeeded=0.0)
        capped = leaseq.Queue("capped", redis=r, keep_succeeded=0.0)
        capped.set_limits(group_concurrency=1_000_000)

        def case(q: leaseq.Queue, groups: int) -> Case:
            def drain() -> None:
                while True:
                    leases = q.claim_many(BATCH, ttl=30.0)
                    if not leases:
                        return
                    q.complete_many(leases)

            return (lambda: fill(q, n, groups)), lambda: rate(n, drain)

        cases = {
            "no groups": case(plain, 0),
            f"{g:,} groups": case(grouped, g),
            f"{g:,} groups, capped": case(capped, g),
        }
        interleaved(cases, 1)  # warm up: scripts loaded, connections made
        rates = interleaved(cases, args.repeats)
        base = rates["no groups"]
        print(f"claim+complete, batches of {BATCH}, {n} jobs, median of {args.repeats}")
        print(f"{'case':<24} {'jobs/s':>10} {'µs/job':>8} {'ratio':>6}")
        for name, value in rates.items():
            print(f"{name:<24} {value:>10,.0f} {us(value):>8.1f} {base / value:>6.2f}x")

        drains: dict[str, list[float]] = {"no groups": [], f"{g:,} groups": []}
        for _ in range(args.repeats):
            drains["no groups"].append(drain_once(r, server.url, n, 0))
            drains[f"{g:,} groups"].append(drain_once(r, server.url, n, g))
        mids = {k: sorted(v)[len(v) // 2] for k, v in drains.items()}
        print(f"drain (one worker process, no-op jobs), {n} jobs, median of {args.repeats}")
        for name, value in mids.items():
            print(f"{name:<24} {value:>10,.0f} jobs/s {mids['no groups'] / value:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
