"""A single enqueue against its floor: where its wall time goes, step by step.

``python -m bench.producer [--calls N] [--rounds R]`` times on one connection
of one unpipelined client (redis-py, hiredis when installed), the steps
taking turns call block by call block, medians of R rounds:

1. ``LPUSH`` of the payload: a bare round trip, the floor of any enqueue;
2. ``EVALSHA`` of a script that returns at once, with the very KEYS and ARGV
   an enqueue sends: the round trip plus the cost of sending them;
3. ``EVALSHA`` of ``enqueue.lua`` with those arguments, made once: plus the
   script's own work on the server;
4. ``q.enqueue(payload)``: plus leaseq's Python (validation, a fresh id,
   encoding, the driver).

and the script's server time per call (``INFO commandstats``) and the Redis
commands it runs per call. Prints µs per call and each as a ratio of step 1.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import leaseq
from bench.server import Server
from leaseq.store.enqueue import enqueue_calls


def per_call(n: int, fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.producer")
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    n = args.calls
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r)
        q.enqueue({"i": -1})  # loads the script, makes the queue's keys
        call = enqueue_calls(q._core, [{"i": 1}], [None], {})[1][0]
        keys, argv_ = list(call.keys), list(call.args)
        trivial = r.script_load("return {1}")
        sha = call.script.sha
        counter = iter(range(10**9))

        def raw_enqueue() -> Any:
            argv_[-2] = f"{next(counter):020x}"  # a fresh id each call, as enqueue makes
            return r.evalsha(sha, len(keys), *keys, *argv_)

        steps: dict[str, Callable[[], object]] = {
            "LPUSH (round trip)": lambda: r.lpush("bench:list", '{"i":1}'),
            "EVALSHA, no work, same args": lambda: r.evalsha(trivial, len(keys), *keys, *argv_),
            "EVALSHA enqueue.lua": raw_enqueue,
            "q.enqueue": lambda: q.enqueue({"i": 1}),
        }
        got: dict[str, list[float]] = {name: [] for name in steps}
        server_us: list[float] = []
        commands: list[float] = []
        for k in range(args.rounds):
            order = list(steps) if k % 2 == 0 else list(reversed(steps))
            for name in order:
                if name == "q.enqueue":
                    r.config_resetstat()
                got[name].append(per_call(n, steps[name]))
                if name == "q.enqueue":
                    stats = r.info("commandstats")
                    server_us.append(stats["cmdstat_evalsha"]["usec_per_call"])
                    inner = sum(
                        v["calls"]
                        for c, v in stats.items()
                        if c not in ("cmdstat_evalsha", "cmdstat_config|resetstat")
                    )
                    commands.append(inner / n)
            r.delete("bench:list")
    floor = statistics.median(got["LPUSH (round trip)"])
    print(f"one client, {n} calls a block, median of {args.rounds} rounds")
    print(f"{'step':<30} {'µs/call':>8} {'/ LPUSH':>8}")
    for name in steps:
        v = statistics.median(got[name])
        print(f"{name:<30} {v:>8.1f} {v / floor:>8.2f}")
    print(f"enqueue.lua on the server: {statistics.median(server_us):.1f} µs a call, "
          f"{statistics.median(commands):.1f} Redis commands inside")  # fmt: skip
    print("target: q.enqueue within 1.2x of LPUSH")
    return 0


if __name__ == "__main__":
    sys.exit(main())
