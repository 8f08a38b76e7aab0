"""The overview and ``leaseq stats --json`` over thousands of queues (the targets:
the overview page under 300 ms and ``stats --json`` under 1 s for 5,000 queues).

    python -m bench.overview --queues 5000 --big 100000

Makes ``--queues`` queues of a few jobs each (a queue per tenant) and one of
``--big`` jobs on a throwaway redis-server, then times ``GET /`` through
Starlette's TestClient (the app's work plus its Redis round trips, the queue
list already scanned, as it is between rescans), a filtered and a sorted
overview, and ``leaseq stats --json`` as a subprocess (start-up included).
Prints the median and worst of several runs, and the page's size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings

import leaseq
from bench.server import Server


def _timed(fn: object, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=5000)
    ap.add_argument("--big", type=int, default=100_000, help="jobs in the one big queue")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

        from leaseq.web import create_app

    server = Server()
    try:
        r = server.client()
        started = time.perf_counter()
        for i in range(args.queues):
            q = leaseq.Queue(f"tenant-{i:05d}", redis=r)
            q.enqueue_many([{"n": n} for n in range(3)])
            if i % 10 == 0:
                lease = q.claim(ttl=600.0)
                if lease is not None:
                    q.fail(lease, "RuntimeError: boom", dead=True)
        big = leaseq.Queue("big", redis=r)
        for lo in range(0, args.big, 10_000):
            big.enqueue_many([{"i": i} for i in range(lo, min(args.big, lo + 10_000))])
        print(f"filled in {time.perf_counter() - started:.1f} s: {args.queues + 1:,} queues")
        c = TestClient(create_app(r))
        size = len(c.get("/").content)
        print(f"overview page: {size / 1024:.0f} KiB")
        print(f"{'what':<36} {'median ms':>10} {'worst ms':>10}")
        for label, path in {
            "GET / (first page of 50)": "/",
            "GET /?sort=dead": "/?sort=dead",
            "GET /?filter=tenant-042": "/?filter=tenant-042",
            "GET /?partial=live": "/?partial=live",
        }.items():
            med, worst = _timed(lambda p=path: c.get(p), args.runs)
            print(f"{label:<36} {med:>10.1f} {worst:>10.1f}")
        env = {**os.environ, "LEASEQ_URL": server.url}
        cmd = [sys.executable, "-m", "leaseq", "stats", "--json"]
        med, worst = _timed(
            lambda: subprocess.run(cmd, env=env, check=True, capture_output=True), args.runs
        )
        print(f"{'leaseq stats --json (process)':<36} {med:>10.1f} {worst:>10.1f}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
