"""``python -m bench.profile``: where the time goes.

Server side: ``INFO commandstats`` usec_per_call of EVALSHA, reset before
each workload so every figure belongs to one script. Client side: cProfile
of the same workloads, top functions by own time. Sizes are small: this
explains, ``python -m bench`` measures.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

import leaseq
from bench import figures, noop
from bench.server import Server

N = 20_000


def workloads(r: Any, n: int) -> list[tuple[str, int, Callable[[], None], Callable[[], object]]]:
    """(name, jobs, setup, run) per workload; ``jobs`` divides the totals."""
    q = figures.queue(r)
    items = figures.payloads(n)

    def fill() -> None:
        r.flushall()
        q.enqueue_many(items)

    def loop() -> None:
        while leases := q.claim_many(500, ttl=figures.TTL):
            q.complete_many(leases)

    def claims() -> None:
        while q.claim_many(500, ttl=figures.TTL):
            pass

    held: list[Any] = []

    def claim_all() -> None:
        fill()
        held.clear()
        while got := q.claim_many(500, ttl=figures.TTL):
            held.extend(got)

    def completes() -> None:
        for start in range(0, len(held), 500):
            q.complete_many(held[start : start + 500])

    def singles() -> None:
        for i in range(n // 4):
            q.enqueue({"i": i})

    def pairs() -> None:
        for _ in range(n // 4):
            lease = q.claim(ttl=figures.TTL)
            assert lease is not None
            q.complete(lease)

    def worker() -> None:
        w = leaseq.Worker(q, noop.handler, handle_signals=False)
        w.run(burst=True)
        assert w.counts["succeeded"] == n, w.counts

    sha = r.script_load(figures.TRIVIAL)

    def trivial() -> None:
        for _ in range(n // 4):
            r.evalsha(sha, 1, "k")

    return [
        ("trivial EVALSHA (reference: one call = one 'job')", n // 4, r.flushall, trivial),
        ("worker drain, in-process, Worker defaults", n, fill, worker),
        ("enqueue_many (1000 per call)", n, r.flushall, lambda: q.enqueue_many(items)),
        ("claim_many(500) only", n, fill, claims),
        ("complete_many(500) only", n, claim_all, completes),
        ("claim_many(500) + complete_many loop", n, fill, loop),
        ("enqueue one by one", n // 4, r.flushall, singles),
        ("claim + complete one by one (pairs)", n // 4, fill, pairs),
    ]


def server_us(r: Any) -> tuple[int, float]:
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), float(stats.get("usec", 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("-n", type=int, default=N, help="jobs per workload")
    parser.add_argument("--top", type=int, default=12, help="functions to list per profile")
    parser.add_argument("--only", help="substring of one workload's name")
    args = parser.parse_args(argv)
    with Server() as server:
        r = server.client()
        print("| workload | wall µs/job | server µs/job (EVALSHA) | calls | µs/call |")
        print("| --- | ---: | ---: | ---: | ---: |")
        profiles = []
        for name, jobs, setup, run in workloads(r, args.n):
            if args.only and args.only not in name:
                continue
            setup()
            r.script_load(figures.TRIVIAL)
            r.config_resetstat()
            start = time.perf_counter()
            run()
            wall = time.perf_counter() - start
            calls, usec = server_us(r)
            print(
                f"| {name} | {wall * 1e6 / jobs:.1f} | {usec / jobs:.1f} | {calls} "
                f"| {usec / max(calls, 1):.0f} |"
            )
            setup()
            prof = cProfile.Profile()
            prof.runcall(run)
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
            profiles.append((name, out.getvalue()))
        for name, text in profiles:
            print(f"\n### {name}\n")
            body = text[text.find("ncalls") :] if "ncalls" in text else text
            print(body.rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
