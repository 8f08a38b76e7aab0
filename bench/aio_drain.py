"""``aio.Worker``'s drain: this tree against a revision, side by side.

``python -m bench.aio_drain [--rev REV] [--jobs N] [--rounds N]`` drains N
no-op jobs with ``leaseq.aio.Worker`` (defaults, burst) on a throwaway
redis-server, once with an ``async def`` handler and once with a plain one
(run in the worker's thread pool), in a fresh process per side and kind; the
sides take turns, the first changing each round. It prints each side's
median jobs/s and the ratio this/rev taken round by round (median and range).
``bench.guard`` measures ``leaseq worker`` (the threaded worker); this is the
asyncio one's figure. Absolute rates do not travel between machines: read the
ratios. Never run by the tests.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.revisions import ROOT, Scratch, describe
from bench.server import Server

KINDS = ("async", "plain")


def measure(url: str, jobs: int, kind: str) -> float:
    """In the child: jobs/s of one burst drain of ``jobs`` no-op jobs."""
    import asyncio
    import time

    import leaseq.aio

    async def drain() -> float:
        q = leaseq.aio.Queue.from_url(url, "aio_drain")
        await q.redis.flushdb()
        for start in range(0, jobs, 1000):
            await q.enqueue_many([{} for _ in range(min(1000, jobs - start))])

        async def async_noop(lease: Any) -> None:
            return None

        def plain_noop(lease: Any) -> None:
            return None

        w = leaseq.aio.Worker(q, async_noop if kind == "async" else plain_noop)
        began = time.perf_counter()
        await w.run(burst=True)
        took = time.perf_counter() - began
        assert w.processed == jobs, w.processed
        await q.close()
        return jobs / took

    return asyncio.run(drain())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.aio_drain")
    parser.add_argument("--rev", default="HEAD", help="the revision to compare with")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    rates: dict[tuple[str, str], list[float]] = {}
    ratios: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with Scratch() as scratch, Server() as server:
        trees = {"this": ROOT, "rev": scratch.export(args.rev, "rev")}
        for round_ in range(args.rounds):
            for kind in KINDS:
                order = ["this", "rev"] if round_ % 2 == 0 else ["rev", "this"]
                got = {}
                for side in order:
                    file = str(Path(__file__).resolve())
                    got[side] = scratch.run(
                        trees[side], file, "measure", [server.url, args.jobs, kind]
                    )
                    rates.setdefault((side, kind), []).append(got[side])
                ratios[kind].append(got["this"] / got["rev"])
    print(f"aio.Worker drain, {args.jobs:,} no-op jobs, {args.rounds} rounds;")
    print(f"rev = {describe(args.rev)}\n")
    print("| handler | this jobs/s | rev jobs/s | this/rev median [range] |")
    print("| --- | ---: | ---: | --- |")
    for kind in KINDS:
        this, rev = rates[("this", kind)], rates[("rev", kind)]
        r = ratios[kind]
        print(
            f"| {kind} | {statistics.median(this):,.0f} | {statistics.median(rev):,.0f} | "
            f"{statistics.median(r):.2f}x [{min(r):.2f}, {max(r):.2f}] |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
