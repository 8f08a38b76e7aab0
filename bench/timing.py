"""Repeat-and-take-the-median helpers. Rates are per second, costs in µs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

REPEATS = 3


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes (wall clock, perf_counter)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_rate(
    trial: Callable[[], float], setup: Callable[[], object] | None = None, repeats: int = REPEATS
) -> float:
    """Median of ``repeats`` rates; each ``trial()`` returns items/s and
    ``setup()`` (untimed) runs before each."""
    rates = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        rates.append(trial())
    return statistics.median(rates)


def rate(n: int, fn: Callable[[], object]) -> float:
    """``n`` items done by one ``fn()`` call, as items/s."""
    return n / timed(fn)


def us(per_second: float) -> float:
    """Cost in µs of one item at ``per_second`` items/s."""
    return 1e6 / per_second if per_second else float("inf")


Case = tuple[Callable[[], object] | None, Callable[[], float]]
"""(untimed setup or None, trial returning items/s)."""


def interleaved(cases: dict[str, Case], repeats: int = REPEATS) -> dict[str, float]:
    """Median rate per case, the cases taking turns (a b c, a b c, ...) so a
    noisy neighbour slows every side alike rather than whichever ran last."""
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (setup, trial) in cases.items():
            if setup is not None:
                setup()
            rates[name].append(trial())
    return {name: statistics.median(got) for name, got in rates.items()}


def drain_case(q: Any, n: int, fill: Callable[[], object], batch: int = 100) -> Case:
    """The claim+complete case of ``n`` jobs on ``q``: ``fill()`` untimed, then
    ``claim_many(batch)`` + ``complete_many`` (one claimer) until ``q`` is empty."""

    def drain() -> None:
        while leases := q.claim_many(batch, ttl=30.0):
            q.complete_many(leases)

    return fill, lambda: rate(n, drain)


def print_rates(label: str, rates: dict[str, float], base: str, unit: str = "jobs") -> None:
    """One line per case: its rate, the cost of one item and its ratio to ``base``
    (how many times slower than it)."""
    width = max(len(label), *(len(name) for name in rates))
    print(f"{label:<{width}} {unit + '/s':>12} {'µs/' + unit.rstrip('s'):>10} {'ratio':>6}")
    for name, value in rates.items():
        ratio = rates[base] / value
        print(f"{name:<{width}} {value:>12,.0f} {us(value):>10.1f} {ratio:>6.2f}x")
