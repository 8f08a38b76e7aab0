"""The four figures a cost-of-a-feature bench times with the feature on and off.

``bench.history`` (the per-minute history) and ``bench.events`` (the event
stream) time the same workloads in turns, on, off, on, off: enqueue_many,
the claim_many(500) + complete_many loop, one-by-one claim + complete pairs
(the worst case per job: one script call each), and a threaded
``leaseq.Worker`` draining no-op jobs in burst mode. Only how a trial turns
the feature on or off differs: ``prepare(on)``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import leaseq
from bench.timing import Case, rate
from leaseq.store import scripts

FIGURES = (
    "enqueue_many",
    "claim_many+complete_many",
    "claim+complete pairs",
    "Worker drain (no-op)",
)
PAIRS = 5000
"""Most one-by-one claim + complete pairs per trial."""


def cases(q: leaseq.Queue, items: list[Any], prepare: Callable[[bool], None]) -> dict[str, Case]:
    """Each figure on and off, in that order. ``prepare(on)`` runs first in every
    trial's set-up (an empty database, the feature switched); the jobs the trial
    drains are enqueued after it."""
    n, single = len(items), min(len(items), PAIRS)

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
    out: dict[str, Case] = {}
    for name, (fill, trial) in trials.items():
        for on in (True, False):

            def setup(on: bool = on, fill: int = fill) -> None:
                prepare(on)
                if fill:
                    q.enqueue_many(items[:fill])

            out[f"{name} {'on' if on else 'off'}"] = (setup, trial)
    return out


def report(got: Mapping[str, float]) -> None:
    """The table of rates, on and off, and their ratio, one line a figure."""
    print(f"{'figure':<28} {'on (jobs/s)':>12} {'off (jobs/s)':>13} {'on/off':>7}")
    for name in FIGURES:
        on, off = got[f"{name} on"], got[f"{name} off"]
        print(f"{name:<28} {on:>12,.0f} {off:>13,.0f} {on / off:>7.3f}")


def _noop(lease: Any) -> None:
    return None


def scripts_with(function: re.Pattern[str], stub: str) -> dict[str, scripts.Script]:
    """Every script with the Lua function that ``function`` matches replaced by
    ``stub`` (the feature turned off), ready for ``use``."""
    out = {}
    for name, s in scripts.SCRIPTS.items():
        plain = function.sub(lambda _: stub, s.plain)
        source = function.sub(lambda _: stub, s.source)
        out[name] = dataclasses.replace(
            s, source=source, sha=scripts._sha(source), plain=plain, plain_sha=scripts._sha(plain)
        )
    return out


def use(table: Mapping[str, scripts.Script]) -> None:
    """Make ``table`` the scripts every queue runs from now on."""
    scripts.SCRIPTS.clear()
    scripts.SCRIPTS.update(table)
