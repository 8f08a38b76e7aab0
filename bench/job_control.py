"""Cost of job control, side by side with none, in one run.

``python -m bench.job_control [--jobs N] [--groups G]`` starts a throwaway
redis-server and prints three figures:

- enqueue with ``unique=`` (every key distinct, so every job is created: the
  cost of checking and taking a key) against the same enqueues without one:
  single ``enqueue`` calls, and ``enqueue_many`` batches of 1,000 with a key per
  item;
- claim+complete cycles (batches of 100, one claimer) on jobs spread over G
  fair groups (default 1,000) with a per-group rate (``group_rate``, high enough
  never to hold a group back: the cost of checking it) against the same groups
  with no rate;
- the time from ``cancel`` of an active job to its ``async def`` handler being
  cancelled by ``aio.Worker`` (ttl 0.6 s: heartbeats every 0.2 s), median and
  worst of the runs, against ttl/3 + 100 ms.

Never run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from typing import Any

import redis.asyncio as aioredis

import leaseq
import leaseq.aio
from bench.server import Server
from bench.timing import Case, drain_case, interleaved, print_rates, rate

BATCH = 100
ENQUEUE_BATCH = 1000
TTL = 0.6


def _enqueue_cases(r: Any, n: int) -> dict[str, Case]:
    plain = leaseq.Queue("plain", redis=r, keep_succeeded=0.0)
    unique = leaseq.Queue("unique", redis=r, keep_succeeded=0.0)
    by_item = leaseq.Unique(lambda p: f"k-{p}")
    rounds = iter(range(1_000_000))

    def clear(q: leaseq.Queue) -> None:
        q.redis.flushall()  # untimed: every trial starts from an empty server

    def one(q: leaseq.Queue, keyed: bool) -> Case:
        def trial() -> float:
            base = next(rounds) * n
            if keyed:
                return rate(
                    n,
                    lambda: [q.enqueue(i, unique=leaseq.Unique(f"k-{base + i}")) for i in range(n)],
                )
            return rate(n, lambda: [q.enqueue(i) for i in range(n)])

        return (lambda: clear(q)), trial

    def many(q: leaseq.Queue, keyed: bool) -> Case:
        def trial() -> float:
            base = next(rounds) * n * 10
            items = [base + i for i in range(n * 10)]

            def run() -> None:
                for start in range(0, len(items), ENQUEUE_BATCH):
                    chunk = items[start : start + ENQUEUE_BATCH]
                    if keyed:
                        q.enqueue_many(chunk, unique=by_item)
                    else:
                        q.enqueue_many(chunk)

            return rate(len(items), run)

        return (lambda: clear(q)), trial

    return {
        "enqueue": one(plain, False),
        "enqueue, unique": one(unique, True),
        "enqueue_many": many(plain, False),
        "enqueue_many, unique": many(unique, True),
    }


def _fill(q: leaseq.Queue, n: int, groups: int) -> None:
    per = max(1, n // groups)
    for g in range(groups):
        q.enqueue_many(list(range(per)), group=f"tenant-{g}")


async def _cancel_latency(port: int, runs: int) -> list[float]:
    client = aioredis.Redis(port=port)
    q = leaseq.aio.Queue("cancel", redis=client)
    cancelled: asyncio.Event = asyncio.Event()

    async def handler(lease: leaseq.Lease) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker = leaseq.aio.Worker(q, handler, concurrency=1, ttl=TTL)
    task = asyncio.ensure_future(worker.run())
    took = []
    for _ in range(runs):
        cancelled.clear()
        job_id = await q.enqueue({})
        while (await q.stats()).active == 0:
            await asyncio.sleep(0.005)
        # Cancel at a random point of the heartbeat cycle, as an operator would.
        await asyncio.sleep((time.perf_counter() * 7919) % (TTL / 3))
        began = time.perf_counter()
        await q.cancel(job_id)
        await asyncio.wait_for(cancelled.wait(), 10.0)
        took.append(time.perf_counter() - began)
    worker.stop()
    await asyncio.wait_for(task, 10.0)
    await client.aclose()
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.job_control")
    parser.add_argument("--jobs", type=int, default=5_000, help="jobs per trial and case")
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cancels", type=int, default=20)
    args = parser.parse_args(argv)
    logging.getLogger("leaseq").setLevel(logging.ERROR)  # one line per cancel otherwise
    n, g = args.jobs, args.groups
    with Server() as server:
        r = server.client()
        cases = _enqueue_cases(r, n)
        interleaved(cases, 1)  # warm up: scripts loaded, connections made
        rates = interleaved(cases, args.repeats)
        print(f"enqueue: {n} single calls / {n * 10} in batches of {ENQUEUE_BATCH}, every key")
        print(f"distinct; median of {args.repeats}")
        print_rates("enqueue", {k: rates[k] for k in ("enqueue", "enqueue, unique")}, "enqueue")
        print_rates(
            "enqueue_many",
            {k: rates[k] for k in ("enqueue_many", "enqueue_many, unique")},
            "enqueue_many",
        )
        r.flushall()

        grouped = leaseq.Queue("grouped", redis=r, keep_succeeded=0.0)
        rated = leaseq.Queue("rated", redis=r, keep_succeeded=0.0)
        rated.set_limits(group_rate=1_000_000, group_per=1.0)
        claims = {
            f"{g} groups": drain_case(grouped, n, lambda: _fill(grouped, n, g), BATCH),
            f"{g} groups, group_rate": drain_case(rated, n, lambda: _fill(rated, n, g), BATCH),
        }
        interleaved(claims, 1)
        rates = interleaved(claims, args.repeats)
        print(f"\nclaim+complete, batches of {BATCH}, {n} jobs over {g} groups, median of "
              f"{args.repeats}")  # fmt: skip
        print_rates("groups", rates, f"{g} groups")

        took = asyncio.run(_cancel_latency(server.port, args.cancels))
        target = TTL / 3 + 0.1
        print(
            f"\ncancel -> async handler cancelled (ttl {TTL:g} s, {len(took)} runs): "
            f"median {statistics.median(took) * 1000:.0f} ms, worst {max(took) * 1000:.0f} ms "
            f"(target <= ttl/3 + 100 ms = {target * 1000:.0f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
