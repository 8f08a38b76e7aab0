"""Where the threaded drain's floor lies: the worker against shapes with less in its way.

``python -m bench.drain_shapes [--jobs N] [--rounds R] [--threads 2,4]`` drains N
jobs that each do one Redis ``INCR`` (the handler of bench/peer_tasks.py, as in
``bench.guard``), each side in a fresh process on a fresh throwaway
redis-server, the sides in turn and their order reversed every round:

- **worker**: ``leaseq worker Q bench.peer_tasks:handler --burst``, its
  defaults (4 handler threads, a claimer thread, the reporter);
- **own-T**: T threads and nothing else, each claiming up to 16 leases at a
  time (``claim_now``), running the handler on each in turn and completing
  them with one ``complete_many``: no claimer, no reporter, no hand-off
  between threads, no heartbeat, no timeouts. The least a threaded worker
  of T handler threads can do per job;
- **incr-T**: T threads doing only the N ``INCR`` calls, no queue at all:
  the handler's own ceiling with T threads.

jobs/s from the first completion to the last (``bench.guard.drain``), the
median of R rounds and each side's ratio to **worker** round by round, with
each side's CPU per job (user + system, its whole process, start-up and
imports included: about 25 µs a job of the worker's at 20,000 jobs). If own-4 is
not well above worker, the worker's own machinery is not what holds the
drain: the T threads doing blocking I/O under one GIL are. Never run by the
tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
from typing import Any

from bench.guard import drain
from bench.server import Server

QUEUE = "bench"
BATCH = 16
"""Leases a thread of own-T claims at a time (the worker's prefetch is about as deep)."""


def _own(url: str, threads: int) -> None:
    import redis

    import leaseq
    from bench import peer_tasks

    q = leaseq.Queue(QUEUE, redis=redis.Redis.from_url(url))

    def loop() -> None:
        while True:
            leases, _ = q.claim_now(BATCH, 30.0, "own", 1)
            if not leases:
                return
            for lease in leases:
                peer_tasks.handler(lease)
            if q.complete_many(leases):
                raise RuntimeError("a lease was lost")

    _run_threads(loop, threads)


def _incr(url: str, threads: int, jobs: int) -> None:
    from bench import peer_tasks

    def loop(share: int) -> None:
        for _ in range(share):
            peer_tasks.handler(None)

    shares = [jobs // threads + (i < jobs % threads) for i in range(threads)]
    _run_threads(loop, threads, shares)


def _run_threads(target: Any, threads: int, args: list[int] | None = None) -> None:
    started = [
        threading.Thread(target=target, args=() if args is None else (args[i],))
        for i in range(threads)
    ]
    for t in started:
        t.start()
    for t in started:
        t.join()


def _command(side: str, url: str, jobs: int) -> list[str]:
    if side == "worker":
        return [sys.executable, "-m", "leaseq.cli", "--url", url, "worker", QUEUE]
    kind, threads = side.split("-")
    return [sys.executable, "-m", "bench.drain_shapes", "--child", kind, threads, url, str(jobs)]


def one(side: str, jobs: int) -> tuple[float, float]:
    """(jobs/s, CPU µs per job) of one drain by ``side`` on a fresh server."""
    import leaseq
    from bench import peer_tasks

    with Server() as server:
        r = server.client()
        q = leaseq.Queue(QUEUE, redis=r)
        for start in range(0, jobs, 1000):
            q.enqueue_many([{"i": i} for i in range(start, min(jobs, start + 1000))])
        env = dict(os.environ, BENCH_REDIS_URL=server.url)
        command = _command(side, server.url, jobs)
        if side == "worker":
            command += ["bench.peer_tasks:handler", "--burst"]
        cpu: list[float] = []
        rate = drain(r, jobs, command, peer_tasks.COUNTER, exits=True, env=env, cpu=cpu)
        return rate, cpu[0] / jobs * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.drain_shapes", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4])
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, threads, url, jobs = args.child
        if kind == "own":
            _own(url, int(threads))
        else:
            _incr(url, int(threads), int(jobs))
        return 0
    sides = ["worker"] + [f"{k}-{t}" for k in ("own", "incr") for t in args.threads]
    got: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    for k in range(args.rounds):
        for side in sides if k % 2 == 0 else reversed(sides):
            got[side].append(one(side, args.jobs))
        print(f"round {k + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"{args.jobs:,} jobs, an INCR each, median of {args.rounds} rounds")
    print(f"{'side':<10} {'jobs/s':>9} {'/worker':>20} {'CPU µs/job':>11}")
    base = [rate for rate, _ in got["worker"]]
    for side in sides:
        rates = [rate for rate, _ in got[side]]
        ratios = [a / b for a, b in zip(rates, base, strict=True)]
        spread = f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
        cpu = statistics.median(c for _, c in got[side])
        print(f"{side:<10} {statistics.median(rates):>9,.0f} {spread:>20} {cpu:>11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
