"""Cost limits measured: the budget holds in every window, settling lets more
through, and what a cost limit adds to a claim's time on the server.

``python -m bench.cost [--seconds S] [--budget B]`` starts a throwaway
redis-server and

1. runs one ``leaseq.Worker`` (16 threads, a no-op handler) for S seconds
   against ``set_limits(cost_rate=B, cost_per=1.0)`` on jobs of random costs
   1..2,000, twice: handlers that report nothing (the estimate stands), and
   handlers that settle to half the estimate. For each run: jobs done, and
   the most cost any 1 s span of claim times counted (what each job counts
   in the end: its ``spent`` where settled, else its ``cost``), which must
   stay within B; then the ratio of jobs done, settled to not.
2. times ``claim_many(100)`` + ``complete_many`` over 1,000 fair groups with
   limits high enough never to hold a claim back, so the figure is the cost
   of checking them: rate only (queue and per group) against cost only and
   both, in server µs per claim call (SLOWLOG at threshold 0, median of all
   claim calls, interleaved rounds).

Never run by the tests.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from typing import Any

import leaseq
from bench.server import Server, machine

COSTS = (1, 2000)


def window_run(r: Any, name: str, seconds: float, budget: float, settle: bool) -> tuple[int, float]:
    """Jobs done in ``seconds`` under the cost limit, and the most cost any 1 s span
    of their claim times counts in the end."""
    q = leaseq.Queue(name, redis=r, keep_succeeded=3600.0, keep_succeeded_count=None)
    q.set_limits(cost_rate=budget, cost_per=1.0)
    rng = random.Random(11)
    for _ in range(5000):  # one call a job: each has its own cost, in random order
        c = rng.randint(*COSTS)
        q.enqueue(c, cost=c)

    def handler(lease: leaseq.Lease) -> None:
        if settle:
            leaseq.current_job().set_cost(lease.payload / 2)

    worker = leaseq.Worker(q, handler, concurrency=16, handle_signals=False)
    runner = threading.Thread(target=worker.run)
    runner.start()
    time.sleep(seconds)  # a measured span, not a wait for a condition
    worker.stop()
    runner.join()
    rows = []
    offset = 0
    while True:
        page = q.ls(state="succeeded", offset=offset, limit=1000)
        rows += page
        offset += len(page)
        if len(page) < 1000:
            break
    claims = sorted(
        (int((j.claimed_at or 0) * 1000), j.spent if j.spent is not None else j.cost) for j in rows
    )
    most, lo, total = 0.0, 0, 0.0
    for t, c in claims:  # a sliding 1 s span ending at each claim
        total += c
        while claims[lo][0] <= t - 1000:
            total -= claims[lo][1]
            lo += 1
        most = max(most, total)
    q.drop(force=True)
    return len(rows), most


def claim_us(r: Any, limits: dict[str, Any], name: str, rounds: int) -> list[float]:
    """Server µs of each claim_many(100) call over 1,000 groups, from SLOWLOG."""
    q = leaseq.Queue(name, redis=r, keep_succeeded=0.0)
    if limits:
        q.set_limits(**limits)
    sha = leaseq.store.scripts.SCRIPTS["claim"].sha
    times: list[float] = []
    for _ in range(rounds):
        for g in range(1000):
            q.enqueue_many([0] * 10, group=f"g{g}")
        r.config_set("slowlog-log-slower-than", 0)
        r.slowlog_reset()
        while True:
            leases = q.claim_many(100, ttl=60.0)
            if not leases:
                break
            q.complete_many(leases)
        for entry in r.slowlog_get(100_000):
            cmd = entry["command"]
            text = cmd.decode() if isinstance(cmd, bytes) else str(cmd)
            if text.startswith("EVALSHA " + sha):
                times.append(float(entry["duration"]))
        r.config_set("slowlog-log-slower-than", 10_000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost")
    parser.add_argument("--seconds", type=float, default=30.0, help="each window run")
    parser.add_argument("--budget", type=float, default=10_000.0, help="cost per second")
    parser.add_argument("--rounds", type=int, default=3, help="claim-cost rounds per case")
    args = parser.parse_args(argv)
    with Server("--slowlog-max-len", "200000") as server:
        r = server.client()
        print(machine(r))
        print(
            f"1. a budget of {args.budget:g} per 1 s, costs {COSTS[0]}..{COSTS[1]}, "
            f"one worker (16 threads), {args.seconds:g} s each"
        )
        done = {}
        for settle in (False, True):
            label = "settled to half" if settle else "estimate stands"
            n, most = window_run(r, f"w{int(settle)}", args.seconds, args.budget, settle)
            done[settle] = n
            verdict = "within" if most <= args.budget * (1 + 1e-9) else "OVER"
            print(
                f"   {label:16} {n:7d} jobs ({n / args.seconds:7.1f}/s); the most cost in "
                f"any 1 s span: {most:9.1f} ({verdict} the budget)"
            )
        print(f"   settling to half lets {done[True] / max(1, done[False]):.2f}x as many through")
        print(
            "2. claim_many(100) + complete_many over 1,000 fair groups, limits that never "
            "hold: server µs per claim call (median)"
        )
        cases = {
            "rate only": {"rate": 10**6, "per": 1.0, "group_rate": 10**6, "group_per": 1.0},
            "cost only": {"cost_rate": 1e11, "cost_per": 1.0,
                          "group_cost_rate": 1e11, "group_cost_per": 1.0},
            "both": {"rate": 10**6, "per": 1.0, "group_rate": 10**6, "group_per": 1.0,
                     "cost_rate": 1e11, "cost_per": 1.0,
                     "group_cost_rate": 1e11, "group_cost_per": 1.0},
        }  # fmt: skip
        got: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(args.rounds):  # interleaved: the box's noise falls on every case
            for name, limits in cases.items():
                got[name] += claim_us(r, limits, f"c{i}-{name.split()[0]}", 1)
        base = statistics.median(got["rate only"])
        for name, times in got.items():
            m = statistics.median(times)
            print(
                f"   {name:10} {m:7.0f} µs ({len(times)} calls, max {max(times):.0f} µs); "
                f"{m / base:.2f}x rate only"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
