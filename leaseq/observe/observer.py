"""What a worker tells an observer about its jobs (``leaseq.observe.worker_metrics`` and
``leaseq.observe.logs.JobLog`` are two).

No dependency here, so the workers import it whether or not
``prometheus_client`` is installed; with no observer, a worker's cost is one
``is None`` test per job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from leaseq.types import Lease

__all__ = ["Fanout", "JobObserver", "install", "installed"]


class JobObserver(Protocol):
    def slots(self, queue: str, concurrency: int) -> None: ...
    def started(self, queue: str, lease: Lease, ttl: float) -> None: ...
    def finished(
        self, queue: str, outcome: str, seconds: float, lease: Lease | None = None
    ) -> None: ...
    def lost(self, queue: str, n: int = 1) -> None: ...


class Fanout:
    """Several observers as one."""

    def __init__(self, observers: Sequence[JobObserver]) -> None:
        self.observers = tuple(observers)

    def slots(self, queue: str, concurrency: int) -> None:
        for o in self.observers:
            o.slots(queue, concurrency)

    def started(self, queue: str, lease: Lease, ttl: float) -> None:
        for o in self.observers:
            o.started(queue, lease, ttl)

    def finished(
        self, queue: str, outcome: str, seconds: float, lease: Lease | None = None
    ) -> None:
        for o in self.observers:
            o.finished(queue, outcome, seconds, lease)

    def lost(self, queue: str, n: int = 1) -> None:
        for o in self.observers:
            o.lost(queue, n)


_installed: list[JobObserver] = []


def install(observer: JobObserver | None) -> None:
    """Add ``observer`` to the process defaults for workers made without
    ``metrics=``; None clears them."""
    if observer is None:
        _installed.clear()
    else:
        _installed.append(observer)


def installed() -> JobObserver | None:
    if not _installed:
        return None
    return _installed[0] if len(_installed) == 1 else Fanout(_installed)
