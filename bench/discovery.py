"""Cost of listing queues: ``Queue.queues`` against the old meta-only SCAN, in one run.

``python -m bench.discovery [--queues N] [--jobs J]`` starts a throwaway
redis-server, makes N queues (default 10,000) of J jobs each (default 10:
half pending, half succeeded and kept, so each queue has rows, indexes,
history buckets, a wake list and a done stream) and times, in turns:

- ``Queue.queues`` as it is: one SCAN of ``{prefix}:{*}:[^jhg]*`` (every key
  of a queue but its rows, history and group keys, so a queue whose meta hash
  was deleted is still found);
- the old listing: one SCAN of ``{prefix}:{*}:meta``.

Both walk the whole keyspace; the figure is what the wider pattern costs
on top. Never run by the tests.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import leaseq
from bench.server import Server
from bench.timing import Case, interleaved, print_rates, rate


def fill(r: Any, queues: int, jobs: int) -> int:
    for i in range(queues):
        q = leaseq.Queue(f"q{i:05d}", redis=r, keep_succeeded=None)
        q.enqueue_many(list(range(jobs)))
        for lease in q.claim_many(jobs // 2, ttl=60.0):
            q.complete(lease)
    return int(r.dbsize())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.discovery")
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=10, help="jobs per queue")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with Server() as server:
        r = server.client()
        keys = fill(r, args.queues, args.jobs)
        n = args.queues
        found = {"now": 0, "meta only": 0}

        def listing() -> None:
            found["now"] = len(leaseq.Queue.queues(r))

        def meta_only() -> None:
            found["meta only"] = len(list(r.scan_iter(match="leaseq:{*}:meta", count=1000)))

        cases: dict[str, Case] = {
            "Queue.queues (now)": (None, lambda: rate(n, listing)),
            "SCAN of meta keys (before)": (None, lambda: rate(n, meta_only)),
        }
        interleaved(cases, 1)  # warm up
        rates = interleaved(cases, args.repeats)
        assert found["now"] == found["meta only"] == n, found
        print(f"{n:,} queues, {keys:,} keys in all; median of {args.repeats}, taking turns")
        print_rates("listing", rates, "SCAN of meta keys (before)", unit="queues")
    return 0


if __name__ == "__main__":
    sys.exit(main())
