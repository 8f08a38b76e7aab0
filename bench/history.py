"""Cost of the per-minute history (issue 10), side by side with none, in one run.

``python -m bench.history [--jobs N] [--repeats R]`` starts a throwaway
redis-server and times, on the real scripts and on the same scripts with
``bump_counter`` cut down to the plain meta ``HINCRBY`` (no history), in
turns (on, off, on, off, ...): enqueue_many, the claim_many(500) +
complete_many drain loop, one-by-one claim + complete pairs, and a threaded
``leaseq.Worker`` draining no-op jobs in burst mode (the drain figure, in
process). Prints rates and the ratio on/off; never run by the tests.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

import leaseq
from bench.server import Server
from bench.timing import Case, interleaved, rate
from leaseq import scripts

_BUMP = re.compile(r"local function bump_counter\(meta, field, n, now\)\n.*?\nend\n", re.DOTALL)
_STUB = (
    "local function bump_counter(meta, field, n, now)\n"
    "  redis.call('HINCRBY', meta, field, n)\nend\n"
)


def _without_history() -> dict[str, scripts.Script]:
    out = {}
    for name, s in scripts.SCRIPTS.items():
        plain = _BUMP.sub(lambda _: _STUB, s.plain)
        source = _BUMP.sub(lambda _: _STUB, s.source)
        out[name] = scripts.Script(
            name,
            source,
            scripts._sha(source),
            s.keys,
            s.variadic_keys,
            s.flags,
            plain,
            scripts._sha(plain),
        )
    return out


ON = dict(scripts.SCRIPTS)
OFF = _without_history()


def _use(table: dict[str, scripts.Script]) -> None:
    scripts.SCRIPTS.clear()
    scripts.SCRIPTS.update(table)


def _pair(name: str, setup: Callable[[], object], trial: Callable[[], float]) -> dict[str, Case]:
    def on_setup() -> None:
        _use(ON)
        setup()

    def off_setup() -> None:
        _use(OFF)
        setup()

    return {f"{name} on": (on_setup, trial), f"{name} off": (off_setup, trial)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.history")
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs per bulk trial")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n = args.jobs
    changed = sum(ON[k].sha != OFF[k].sha for k in ON)
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r, keep_succeeded=0.0)
        q.stats()
        items = [{"i": i} for i in range(n)]

        def reset() -> None:
            r.flushall()

        def fill() -> None:
            r.flushall()
            q.enqueue_many(items)

        def loop() -> None:
            while leases := q.claim_many(500, ttl=3600.0):
                q.complete_many(leases)

        single = min(n, 5000)

        def fill_single() -> None:
            r.flushall()
            q.enqueue_many(items[:single])

        def pairs() -> None:
            for _ in range(single):
                lease = q.claim(ttl=3600.0)
                assert lease is not None
                q.complete(lease)

        def worker() -> None:
            w = leaseq.Worker(q, _noop, concurrency=4, ttl=30.0, handle_signals=False)
            w.run(burst=True)

        cases: dict[str, Case] = {}
        cases |= _pair("enqueue_many", reset, lambda: rate(n, lambda: q.enqueue_many(items)))
        cases |= _pair("claim_many+complete_many", fill, lambda: rate(n, loop))
        cases |= _pair("claim+complete pairs", fill_single, lambda: rate(single, pairs))
        cases |= _pair("Worker drain (no-op)", fill, lambda: rate(n, worker))
        got = interleaved(cases, repeats=args.repeats)
        _use(ON)
    print(
        f"history cost: {changed} scripts differ; {n} jobs per bulk trial, "
        f"median of {args.repeats}, on/off in turns"
    )
    print(f"{'figure':<28} {'on (jobs/s)':>12} {'off (jobs/s)':>13} {'on/off':>7}")
    for name in (
        "enqueue_many",
        "claim_many+complete_many",
        "claim+complete pairs",
        "Worker drain (no-op)",
    ):
        on, off = got[f"{name} on"], got[f"{name} off"]
        print(f"{name:<28} {on:>12,.0f} {off:>13,.0f} {on / off:>7.3f}")
    return 0


def _noop(lease: Any) -> None:
    return None


if __name__ == "__main__":
    sys.exit(main())
