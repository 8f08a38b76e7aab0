"""What the features cost when they are all in use, against the bare default.

``python -m bench.features [--jobs N] [--rounds R]`` times, in turns on one
throwaway redis-server (medians of R rounds, the order of the setups reversed every round):

- **bare**: a queue with its defaults (events on, history on: both are on by
  default), jobs with no options;
- **each feature alone**, and **all on**: the same with a global
  concurrency and rate limit set (high enough never to hold a job back:
  the checks run, nothing waits); a ``group_concurrency`` and
  ``group_rate``, every job in one of 16 fair groups; a schedule
  registered (every worker ticks it); every job depending on a parent that
  has already succeeded (so it goes through the dependency script, and
  every finish checks its links).

Figures: single enqueue (one unpipelined client; the sides take turns in
blocks of 250, each on its own queue of one server, median block), enqueue_many
(calls of 1,000, turn by turn, median call), and a ``leaseq.Worker`` draining
the jobs with a no-op handler (defaults, in-process; one drain per side a
round, the order reversed every other round). It prints each figure per setup and the ratio
all-on / bare, with the targets (drain >= 0.8, enqueue >= 0.85). Never run
by the tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import leaseq
from bench.server import Server
from bench.timing import rate

GROUPS = 16
TARGETS = {"single enqueue": 0.85, "enqueue_many": 0.85, "Worker drain": 0.8}


def _noop(lease: Any) -> None:
    return None


FEATURES = ("limits", "groups", "schedule", "depends_on")


class Setup:
    """One side: the features in use, its own queue on the shared server, the
    options its jobs get."""

    def __init__(self, r: Any, name: str, features: frozenset[str]) -> None:
        self.r, self.features = r, features
        self.name = "bench-" + name.replace(" ", "-")

    def queue(self) -> leaseq.Queue:
        """The side's queue, emptied and set up afresh."""
        q = leaseq.Queue(self.name, redis=self.r)
        q.drop(force=True)
        on = self.features
        if "limits" in on:
            q.set_limits(concurrency=100_000, rate=1_000_000, per=1.0)
        if "groups" in on:
            q.set_limits(group_concurrency=100_000, group_rate=1_000_000)
        if "schedule" in on:
            q.schedule("report", {"kind": "report"}, every=3600.0)
        if "depends_on" in on:
            q.enqueue("parent", id="parent")
            q.complete(q.claim(ttl=60.0))  # type: ignore[arg-type]
        return q

    def options(self, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "groups" in self.features:
            out["group"] = f"g{i % GROUPS}"
        if "depends_on" in self.features:
            out["depends_on"] = ["parent"]
        return out


BLOCK = 250
"""Single enqueues per turn: the sides take turns block by block, so a burst of
load on this shared box spoils a block of each side alike, not one side's figure."""
BATCH = 1000


def one_round(sides: dict[str, Setup], n: int, singles: int, k: int) -> dict[str, dict[str, float]]:
    """Each figure of every side in round ``k``, the sides taking turns in small
    steps (the order reversed every other round)."""
    order = list(sides) if k % 2 == 0 else list(reversed(sides))
    queues = {name: sides[name].queue() for name in order}
    blocks: dict[str, list[float]] = {name: [] for name in order}
    for b in range(max(1, singles // BLOCK)):
        for name in order:
            q, opts, first = queues[name], sides[name].options, b * BLOCK
            blocks[name].append(
                rate(BLOCK, lambda q=q, opts=opts, first=first: [
                    q.enqueue({"i": i}, **opts(i)) for i in range(first, first + BLOCK)
                ])
            )  # fmt: skip
    calls: dict[str, list[float]] = {name: [] for name in order}
    for name in order:
        queues[name] = sides[name].queue()
    for start in range(0, n, BATCH):
        for name in order:
            q, opts = queues[name], sides[name].options
            items = [{"i": i} for i in range(start, start + BATCH)]
            # One group per call: enqueue_many gives every job of a call the same options.
            options = opts(start // BATCH)
            calls[name].append(
                rate(
                    BATCH,
                    lambda q=q, items=items, options=options: q.enqueue_many(items, **options),
                )
            )
    out: dict[str, dict[str, float]] = {}
    for name in order:
        q = queues[name]
        worker = leaseq.Worker(q, _noop, handle_signals=False)
        drained = rate(n, lambda worker=worker: worker.run(burst=True))
        left = q.stats()
        if left.pending or left.active:
            raise RuntimeError(f"{name}: the drain left jobs behind: {left}")
        out[name] = {
            "single enqueue": statistics.median(blocks[name]),
            "enqueue_many": statistics.median(calls[name]),
            "Worker drain": drained,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.features")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--singles", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    kinds = {"bare": frozenset(), **{f: frozenset([f]) for f in FEATURES}}
    kinds["all on"] = frozenset(FEATURES)
    got: dict[str, dict[str, list[float]]] = {name: {} for name in kinds}
    with Server() as server:
        r = server.client()
        sides = {name: Setup(r, name, on) for name, on in kinds.items()}
        for k in range(args.rounds):
            for name, figures in one_round(sides, args.jobs, args.singles, k).items():
                for figure, value in figures.items():
                    got[name].setdefault(figure, []).append(value)
            print(f"round {k + 1}/{args.rounds} done", flush=True)
    print(f"{args.jobs} jobs ({args.singles} single enqueues), median of {args.rounds} rounds")
    print("jobs/s, and in brackets the ratio to bare; the target is for all on")
    head = "".join(f"{name:>16}" for name in kinds)
    print(f"{'figure':<16}{head}  target")
    for figure, target in TARGETS.items():
        bare = statistics.median(got["bare"][figure])
        cells = ""
        for name in kinds:
            value = statistics.median(got[name][figure])
            cells += f"{value:>9,.0f} ({value / bare:.2f})"
        on = statistics.median(got["all on"][figure]) / bare
        mark = "met" if on >= target else "NOT met"
        print(f"{figure:<16}{cells}  {target} {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
