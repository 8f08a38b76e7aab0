"""The no-op handler the drain benchmark runs: ``bench.noop:handler``."""

from __future__ import annotations

from typing import Any


def handler(lease: Any) -> None:
    """Do nothing: the benchmark measures the worker, not the work."""
