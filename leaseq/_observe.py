"""What a worker tells an observer about its jobs (``leaseq.worker_metrics`` is one).

No dependency here, so the workers import it whether or not
``prometheus_client`` is installed; with no observer, a worker's cost is one
``is None`` test per job.
"""

from __future__ import annotations

from typing import Protocol

from .types import Lease

__all__ = ["JobObserver", "install", "installed"]


class JobObserver(Protocol):
    def slots(self, queue: str, concurrency: int) -> None: ...
    def started(self, queue: str, lease: Lease, ttl: float) -> None: ...
    def finished(self, queue: str, outcome: str, seconds: float) -> None: ...
    def lost(self, queue: str, n: int = 1) -> None: ...


_installed: JobObserver | None = None


def install(observer: JobObserver | None) -> None:
    """Make ``observer`` the process default for workers made without ``metrics=``."""
    global _installed
    _installed = observer


def installed() -> JobObserver | None:
    return _installed
