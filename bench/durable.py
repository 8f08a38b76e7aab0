"""Durable jobs (docs/durable.md), measured on a throwaway redis-server in one run.

    python -m bench.durable [--jobs 1000] [--nap 1.0] [--waiters 10000] [--steps 2000]

Prints three figures:

- **sleeps that hold no worker**: ``--jobs`` jobs, each sleeping ``--nap``
  seconds twice, on one ``leaseq.Worker`` with ``concurrency=4``: the wall
  time beside the two naps (what it would be if nothing held a slot) and
  beside ``jobs x 2 x nap / 4`` (what a worker that slept in its handler
  would take);
- **one signal, many waiters**: ``--waiters`` jobs suspended in ``wait_for``
  on one key, then one ``q.signal``: its wall time, its script calls, and
  their server time from the slow log (threshold 0: every call), median and
  longest;
- **the cost of a step**: ``--steps`` ``record_step`` calls on held leases,
  against as many ``progress`` calls (the smallest fenced write there is):
  server microseconds per call (``INFO commandstats``) and round trips (one
  script call each; a retried run's first step adds one ``HGETALL``).

The drain of plain jobs is ``python -m bench.guard``'s to measure; the crash
case (a 10-step job SIGKILLed at step 6 resumes at step 6) is
tests/worker/test_processes.py; the chaos soak with steps and sleeps is
``python -m bench.chaos --runner durable``. Never run by the tests.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import redis

import leaseq
from bench.server import Server


def sleeps(r: Any, jobs: int, nap: float) -> dict[str, float]:
    q = leaseq.Queue("sleeps", redis=r, keep_succeeded=60.0)

    def handler(lease: leaseq.Lease) -> int:
        ctx = leaseq.current_job()
        ctx.sleep("first", nap)
        ctx.sleep("second", nap)
        return lease.attempt

    q.enqueue_many([{"i": i} for i in range(jobs)])
    worker = leaseq.Worker(q, handler, concurrency=4, handle_signals=False)
    started = time.monotonic()
    thread = threading.Thread(target=worker.run)
    thread.start()
    while q.stats().succeeded < jobs:
        time.sleep(0.02)
    wall = time.monotonic() - started
    worker.stop()
    thread.join()
    return {"wall_s": wall, "naps_s": 2 * nap, "held_s": jobs * 2 * nap / 4}


def signal(r: Any, waiters: int) -> dict[str, float]:
    q = leaseq.Queue("signals", redis=r)
    q.enqueue_many([{"i": i} for i in range(waiters)], max_attempts=1)
    got = 0
    while got < waiters:
        leases = q.claim_many(500, ttl=60.0)
        for lease in leases:
            q.suspend(lease, "approval", None, "big")
        got += len(leases)
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 100_000)
    r.slowlog_reset()
    started = time.monotonic()
    resumed = q.signal("big", {"ok": True})
    wall = time.monotonic() - started
    calls = [e["duration"] for e in r.slowlog_get(100_000) if b"EVALSHA" in e["command"].upper()]
    r.config_set("slowlog-log-slower-than", 10_000)
    assert resumed == waiters, (resumed, waiters)
    return {
        "wall_ms": wall * 1000,
        "calls": len(calls),
        "median_us": statistics.median(calls),
        "longest_us": max(calls),
    }


def _evalsha(r: Any) -> tuple[int, int]:
    stats = r.info("commandstats")["cmdstat_evalsha"]
    return int(stats["calls"]), int(stats["usec"])


def steps(r: Any, n: int) -> dict[str, float]:
    q = leaseq.Queue("steps", redis=r)
    q.enqueue_many([{"i": i} for i in range(n)])
    leases = q.claim_many(n, ttl=600.0)
    out: dict[str, float] = {}
    for name, write in (
        ("step", lambda lease: q.record_step(lease, "charge", {"charge_id": lease.id})),
        ("progress", lambda lease: q.progress(lease, {"done": 1})),
    ):
        calls0, usec0 = _evalsha(r)
        started = time.monotonic()
        for lease in leases:
            write(lease)
        wall = time.monotonic() - started
        calls1, usec1 = _evalsha(r)
        out[f"{name}_server_us"] = (usec1 - usec0) / max(1, calls1 - calls0)
        out[f"{name}_round_trips"] = (calls1 - calls0) / len(leases)
        out[f"{name}_wall_us"] = wall / len(leases) * 1e6
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--nap", type=float, default=1.0)
    p.add_argument("--waiters", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=2000)
    args = p.parse_args(argv)
    with Server() as server:
        r = redis.Redis(port=server.port)
        s = sleeps(r, args.jobs, args.nap)
        print(
            f"sleeps: {args.jobs} jobs x 2 naps of {args.nap:g} s, concurrency 4: "
            f"{s['wall_s']:.2f} s wall (the naps alone {s['naps_s']:.1f} s; "
            f"a worker holding its slots {s['held_s']:.0f} s)"
        )
        g = signal(r, args.waiters)
        print(
            f"signal: {args.waiters} waiters resumed in {g['wall_ms']:.0f} ms, "
            f"{g['calls']:.0f} script calls, median {g['median_us']:.0f} us, "
            f"longest {g['longest_us']:.0f} us"
        )
        c = steps(r, args.steps)
        print(
            f"a step: {c['step_server_us']:.1f} us on the server, "
            f"{c['step_round_trips']:.0f} round trip, {c['step_wall_us']:.0f} us wall; "
            f"a progress write: {c['progress_server_us']:.1f} us, "
            f"{c['progress_wall_us']:.0f} us wall "
            f"(ratio {c['step_server_us'] / c['progress_server_us']:.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
