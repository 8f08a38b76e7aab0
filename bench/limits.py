"""Cost of global limits and of schedules, side by side with none.

``python -m bench.limits [--jobs N]`` starts a throwaway redis-server and
times claim+complete cycles (batches of 100, one claimer) on four queues
that differ only in their limits: none, a concurrency limit, a rate limit,
both (limits high enough never to hold a claim back, so the figure is the
cost of checking them, not of waiting). Then the cost of an idle tick with
1,000 schedules stored. Prints rates and ratios to "no limits"; never run
by the tests.
"""

from __future__ import annotations

import argparse
import sys

import leaseq
from bench.server import Server
from bench.timing import Case, drain_case, interleaved, print_rates, timed

BATCH = 100
CASES = {
    "no limits": {},
    "concurrency": {"concurrency": 1_000_000},
    "rate (sliding)": {"rate": 1_000_000, "per": 1.0},
    "both": {"concurrency": 1_000_000, "rate": 1_000_000, "per": 1.0},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.limits")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per trial and case")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n = args.jobs
    with Server() as server:
        r = server.client()
        queues = {}
        for i, (name, limits) in enumerate(CASES.items()):
            q = leaseq.Queue(f"bench{i}", redis=r, keep_succeeded=0.0)
            if limits:
                q.set_limits(**limits)
            queues[name] = q

        def case(q: leaseq.Queue) -> Case:
            return drain_case(q, n, lambda: q.enqueue_many(list(range(n))), BATCH)

        cases = {name: case(q) for name, q in queues.items()}
        interleaved(cases, 1)  # warm up: scripts loaded, connections made
        rates = interleaved(cases, args.repeats)
        print(f"claim+complete, batches of {BATCH}, {n} jobs, median of {args.repeats}")
        print_rates("limits", rates, "no limits")

        q = leaseq.Queue("ticks", redis=r)
        idle_empty = timed(lambda: [q.tick() for _ in range(1000)]) / 1000
        for i in range(1000):
            q.schedule(f"s{i}", {}, every=3600.0)
        idle_full = timed(lambda: [q.tick() for _ in range(1000)]) / 1000
        print(
            f"idle tick: {idle_empty * 1e6:.0f} µs with no schedules, "
            f"{idle_full * 1e6:.0f} µs with 1,000 (ratio {idle_full / idle_empty:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
