"""Cost of the per-minute history, side by side with none, in one run.

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

import leaseq
from bench import on_off
from bench.server import Server
from bench.timing import interleaved
from leaseq.store import scripts

_BUMP = re.compile(r"local function bump_counter\(meta, field, n, now\)\n.*?\nend\n", re.DOTALL)
_STUB = (
    "local function bump_counter(meta, field, n, now)\n"
    "  redis.call('HINCRBY', meta, field, n)\nend\n"
)


ON = dict(scripts.SCRIPTS)
OFF = on_off.scripts_with(_BUMP, _STUB)
_use = on_off.use


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

        def scripts_of(on: bool) -> None:
            _use(ON if on else OFF)
            r.flushall()

        got = interleaved(on_off.cases(q, items, scripts_of), repeats=args.repeats)
        _use(ON)
    print(
        f"history cost: {changed} scripts differ; {n} jobs per bulk trial, "
        f"median of {args.repeats}, on/off in turns"
    )
    on_off.report(got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
