"""Cost of workflows, side by side with plain jobs, in one run.

``python -m bench.workflows [--jobs N] [--repeats R]`` starts a throwaway
redis-server and prints, each as medians of R interleaved trials:

- ``enqueue_flow`` of N steps (a root, a fan-out of N - 2 children and a
  fan-in callback of them all) against ``enqueue_many`` of N plain jobs;
- a drain of N jobs where every job has one parent (N/2 parents, N/2
  children, each child waiting on its own parent) against N plain jobs:
  claim_many(100) + complete_many in one process, and one ``leaseq worker``
  process (bench/drain.py's method);
- the server time of one ``complete`` that releases N - 2 children (read from
  ``INFO commandstats``, the script's own ``usec``) against one
  ``claim_many(1000)``.

Never run by the tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from typing import Any

import leaseq
from bench.drain import run_worker
from bench.server import Server
from bench.timing import Case, drain_case, interleaved, print_rates, rate


def flow_steps(n: int) -> list[leaseq.Step]:
    kids = [leaseq.Step({"i": i}, id=f"k{i}", depends_on=["root"]) for i in range(n - 2)]
    return [
        leaseq.Step({"root": True}, id="root"),
        *kids,
        leaseq.Step({"fin": True}, id="fin", depends_on=[f"k{i}" for i in range(n - 2)]),
    ]


def fill_pairs(q: leaseq.Queue, n: int) -> None:
    """n jobs: n/2 parents, n/2 children each waiting on its own parent."""
    half = n // 2
    for start in range(0, half, 1000):
        steps = []
        for i in range(start, min(start + 1000, half)):
            steps.append(leaseq.Step({"p": i}, id=f"p{i}"))
            steps.append(leaseq.Step({"c": i}, id=f"c{i}", depends_on=[f"p{i}"]))
        q.enqueue_flow(steps)


def script_usec(r: Any) -> float:
    """Total µs the server spent in EVALSHA so far (INFO commandstats)."""
    stats = r.info("commandstats")
    return float(stats.get("cmdstat_evalsha", {}).get("usec", 0))


def timed_on_server(r: Any, fn: Callable[[], object]) -> float:
    before = script_usec(r)
    fn()
    return (script_usec(r) - before) / 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflows")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs (steps) per trial")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n, repeats = args.jobs, args.repeats
    with Server() as server:
        r = server.client()
        plain = leaseq.Queue("plain", redis=r, keep_succeeded=0.0)
        flows = leaseq.Queue("flows", redis=r, keep_succeeded=0.0)
        payloads = [{"i": i} for i in range(n)]
        steps = flow_steps(n)

        enqueue_cases: dict[str, Case] = {
            "enqueue_many": (r.flushall, lambda: rate(n, lambda: plain.enqueue_many(payloads))),
            "enqueue_flow": (r.flushall, lambda: rate(n, lambda: flows.enqueue_flow(steps))),
        }
        interleaved(enqueue_cases, 1)
        got = interleaved(enqueue_cases, repeats)
        print(f"enqueue {n} jobs in one call (flow: root, fan-out, fan-in), median of {repeats}")
        print_rates("case", got, "enqueue_many")

        def fill_plain() -> None:
            r.flushall()
            plain.enqueue_many(payloads)

        def fill_flow() -> None:
            r.flushall()
            fill_pairs(flows, n)

        drains = {
            "plain": drain_case(plain, n, fill_plain),
            "one parent each": drain_case(flows, n, fill_flow),
        }
        interleaved(drains, 1)
        got = interleaved(drains, repeats)
        print(f"claim_many(100)+complete_many of {n} jobs, one claimer, median of {repeats}")
        print_rates("case", got, "plain")

        worker: dict[str, list[float]] = {"plain": [], "one parent each": []}
        for _ in range(repeats):
            fill_plain()
            worker["plain"].append(run_worker(plain, server.url, n)[0])
            fill_flow()
            worker["one parent each"].append(run_worker(flows, server.url, n)[0])
        mids = {k: statistics.median(v) for k, v in worker.items()}
        print(f"drain by one leaseq worker process, {n} no-op jobs, median of {repeats}")
        print_rates("case", mids, "plain")

        release: list[float] = []
        claim: list[float] = []
        for _ in range(repeats):
            r.flushall()
            flows.enqueue_flow(steps)
            lease = flows.claim()
            assert lease is not None and lease.id == "root"
            release.append(timed_on_server(r, lambda lease=lease: flows.complete(lease)))
            claim.append(timed_on_server(r, lambda: flows.claim_many(1000)))
        print(f"server time of one script call (ms, median of {repeats}):")
        mid = statistics.median(release)
        print(f"  complete of a parent releasing {n - 2:,} children  {mid:8.2f}")
        print(f"  claim_many(1000)                                {statistics.median(claim):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
