"""Cost of the per-queue event stream, events on vs off, in one run.

``python -m bench.events [--jobs N] [--repeats R]`` starts a throwaway
redis-server and times, with the queue's event switch on and off in turns
(``Queue.set_events``; off still pays the one HMGET of the switch per call):
enqueue_many, the claim_many(500) + complete_many drain loop, one-by-one
claim + complete pairs (one XADD per call: the worst case per job), and a
threaded ``leaseq.Worker`` draining no-op jobs in burst mode. Prints rates,
the ratio on/off and the stream's memory after one on-trial; never run by
the tests.
"""

from __future__ import annotations

import argparse
import sys

import leaseq
from bench import on_off
from bench.server import Server
from bench.timing import interleaved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.events")
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs per bulk trial")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n = args.jobs
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r, keep_succeeded=0.0)
        items = [{"i": i} for i in range(n)]

        def switch(on: bool) -> None:
            r.flushall()
            q.set_events(on)

        got = interleaved(on_off.cases(q, items, switch), repeats=args.repeats)
        switch(True)
        q.enqueue_many(items)
        while leases := q.claim_many(500, ttl=3600.0):
            q.complete_many(leases)
        memory = int(r.memory_usage(q.keys.events) or 0)
        entries = q.event_settings().entries
    print(
        f"event stream cost: {n} jobs per bulk trial ({min(n, on_off.PAIRS)} for pairs), "
        f"median of {args.repeats}, on/off in turns"
    )
    on_off.report(got)
    print(
        f"stream after enqueue_many + claim_many/complete_many of {n}: {entries} entries, "
        f"{memory / 1e6:.1f} MB ({memory / (3 * n):.0f} B per transition)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
