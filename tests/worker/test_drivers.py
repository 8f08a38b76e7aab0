"""The worker suite runs on every driver, and a case left off one fails here
(as tests/transport/test_aio.py fails for a store case left off the asyncio
queue).

A worker case is a test function of tests/worker that takes ``driver`` or
``live_driver`` (tests/worker/conftest.py). Collected, each must run on every
driver of ``tests.support.drivers.DRIVERS``, as many times on each (one per
combination of its other parameters): a parametrize that overrides the
driver, a filter in a hook or a new fixture that narrows it shows up here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support import ROOT
from tests.support.drivers import DRIVERS
from tests.worker.conftest import DRIVER_FIXTURES

HERE = Path(__file__).resolve().parent

SUITE_FLOOR = 59
"""Fewest worker cases (test functions run on every driver) there may be: the
suite was 59 when it was made one. Moving a case off the suite lowers this,
in the same commit that says why."""


def _worker_cases() -> set[str]:
    """Every test function of tests/worker that takes a driver fixture, by qualified name."""
    cases = set()
    for path in sorted(HERE.glob("test_*.py")):
        module = importlib.import_module(f"tests.worker.{path.stem}")
        for name, func in vars(module).items():
            if not name.startswith("test_") or not inspect.isfunction(func):
                continue
            if func.__module__ != module.__name__:
                continue  # imported from another module: collected there
            if set(inspect.signature(func).parameters) & set(DRIVER_FIXTURES):
                cases.add(f"{func.__module__}.{name}")
    return cases


def _collected(tmp_path: Path) -> list[dict[str, Any]]:
    """The worker cases pytest collects, one row per case and driver (see
    LEASEQ_LIST_DRIVERS in tests/worker/conftest.py)."""
    listing = tmp_path / "drivers.jsonl"
    env = {**os.environ, "LEASEQ_LIST_DRIVERS": str(listing)}
    env.pop("LEASEQ_BACKENDS", None)  # list both backends whatever this pass runs
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", HERE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(line) for line in listing.read_text().splitlines()]


def test_every_worker_case_runs_on_every_driver_alike(tmp_path: Path) -> None:
    cases = _worker_cases()
    assert len(cases) >= SUITE_FLOOR, f"the worker suite shrank to {len(cases)} cases"
    runs: dict[str, Counter[str]] = {}
    for row in _collected(tmp_path):
        runs.setdefault(row["func"], Counter())[row["driver"]] += 1
    uncollected = sorted(cases - set(runs))
    assert not uncollected, f"worker cases not collected at all: {uncollected}"
    unknown = sorted(set(runs) - cases)
    assert not unknown, f"collected on a driver, not found as a worker case: {unknown}"
    uneven = {
        func: dict(per_driver)
        for func, per_driver in runs.items()
        if set(per_driver) != set(DRIVERS) or len(set(per_driver.values())) != 1
    }
    assert not uneven, f"worker cases not run alike on every driver {DRIVERS}: {uneven}"
