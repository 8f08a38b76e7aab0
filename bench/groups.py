"""Cost of fair groups, side by side with no groups, in one run.

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
import sys
from typing import Any

import leaseq
from bench.drain import run_worker
from bench.server import Server
from bench.timing import Case, drain_case, interleaved, print_rates

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
    return run_worker(q, url, n)[0]


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
            return drain_case(q, n, lambda: fill(q, n, groups), BATCH)

        cases = {
            "no groups": case(plain, 0),
            f"{g:,} groups": case(grouped, g),
            f"{g:,} groups, capped": case(capped, g),
        }
        interleaved(cases, 1)  # warm up: scripts loaded, connections made
        rates = interleaved(cases, args.repeats)
        print(f"claim+complete, batches of {BATCH}, {n} jobs, median of {args.repeats}")
        print_rates("case", rates, "no groups")

        drains: dict[str, list[float]] = {"no groups": [], f"{g:,} groups": []}
        for _ in range(args.repeats):
            drains["no groups"].append(drain_once(r, server.url, n, 0))
            drains[f"{g:,} groups"].append(drain_once(r, server.url, n, g))
        mids = {k: sorted(v)[len(v) // 2] for k, v in drains.items()}
        print(f"drain (one worker process, no-op jobs), {n} jobs, median of {args.repeats}")
        print_rates("case", mids, "no groups")
    return 0


if __name__ == "__main__":
    sys.exit(main())
