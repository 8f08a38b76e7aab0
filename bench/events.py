"""Cost of the per-queue event stream (issue 12), events on vs off, in one run.

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
from collections.abc import Callable
from typing import Any

import leaseq
from bench.server import Server
from bench.timing import Case, interleaved, rate

FIGURES = (
    "enqueue_many",
    "claim_many+complete_many",
    "claim+complete pairs",
    "Worker drain (no-op)",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.events")
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs per bulk trial")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n = args.jobs
    single = min(n, 5000)
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r, keep_succeeded=0.0)
        items = [{"i": i} for i in range(n)]

        def switch(on: bool, fill: int = 0) -> Callable[[], None]:
            def setup() -> None:
                r.flushall()
                q.set_events(on)
                if fill:
                    q.enqueue_many(items[:fill])

            return setup

        def loop() -> None:
            while leases := q.claim_many(500, ttl=3600.0):
                q.complete_many(leases)

        def pairs() -> None:
            for _ in range(single):
                lease = q.claim(ttl=3600.0)
                assert lease is not None
                q.complete(lease)

        def worker() -> None:
            w = leaseq.Worker(q, _noop, concurrency=4, ttl=30.0, handle_signals=False)
            w.run(burst=True)

        trials: dict[str, tuple[int, Callable[[], float]]] = {
            "enqueue_many": (0, lambda: rate(n, lambda: q.enqueue_many(items))),
            "claim_many+complete_many": (n, lambda: rate(n, loop)),
            "claim+complete pairs": (single, lambda: rate(single, pairs)),
            "Worker drain (no-op)": (n, lambda: rate(n, worker)),
        }
        cases: dict[str, Case] = {}
        for name, (fill, trial) in trials.items():
            cases[f"{name} on"] = (switch(True, fill), trial)
            cases[f"{name} off"] = (switch(False, fill), trial)
        got = interleaved(cases, repeats=args.repeats)
        switch(True, n)()
        loop()
        memory = int(r.memory_usage(q.keys.events) or 0)
        entries = q.event_settings().entries
    print(
        f"event stream cost: {n} jobs per bulk trial ({single} for pairs), "
        f"median of {args.repeats}, on/off in turns"
    )
    print(f"{'figure':<28} {'on (jobs/s)':>12} {'off (jobs/s)':>13} {'on/off':>7}")
    for name in FIGURES:
        on, off = got[f"{name} on"], got[f"{name} off"]
        print(f"{name:<28} {on:>12,.0f} {off:>13,.0f} {on / off:>7.3f}")
    print(
        f"stream after enqueue_many + claim_many/complete_many of {n}: {entries} entries, "
        f"{memory / 1e6:.1f} MB ({memory / (3 * n):.0f} B per transition)"
    )
    return 0


def _noop(lease: Any) -> None:
    return None


if __name__ == "__main__":
    sys.exit(main())
