"""Worker-local Prometheus metrics: job durations and waits, leases lost, handlers busy.

These belong to one worker process (unlike ``leaseq.observe.metrics``, which reads
the queue's own counters and is the same on every host): sum them across
workers. A worker records into a ``WorkerMetrics`` given to it
(``Worker(..., metrics=m)``, ``aio.Worker(..., metrics=m)``) or, when none is
given, into the one ``install`` set for the process (what ``leaseq worker
--metrics-port`` does). Recording is a few dictionary and float operations
per job; with no metrics set it is one ``is None`` test.

- ``leaseq_job_duration_seconds{queue,outcome}`` histogram: handler run time,
  by what the handler's outcome was (``complete``, ``retry``, ``dead``).
- ``leaseq_job_wait_seconds{queue}`` histogram: enqueued -> claimed, for
  first attempts (a lease carries when its row was enqueued, not when a
  retry fell due, so retries are left out rather than misreported; a delayed
  job's wait includes its delay).
- ``leaseq_leases_lost_total{queue}`` counter: leases this worker held and
  lost (a heartbeat or a write found another holder); their outcomes were
  discarded.
- ``leaseq_handlers_busy{queue}`` gauge: handlers running a job now;
  ``leaseq_handlers{queue}`` gauge: handler slots (``concurrency``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from leaseq.observe.observer import install, installed
from leaseq.types import Lease

__all__ = ["DURATION_BUCKETS", "WAIT_BUCKETS", "WorkerMetrics", "install", "installed"]

DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
WAIT_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)


class _Hist:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out


class WorkerMetrics:
    """The worker-local figures of one process; a Prometheus collector
    (``registry.register(m)``). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._durations: dict[tuple[str, str], _Hist] = {}
        self._waits: dict[str, _Hist] = {}
        self._lost: dict[str, int] = {}
        self._busy: dict[str, int] = {}
        self._slots: dict[str, int] = {}

    # -- recording (called by the workers) ---------------------------------------

    def slots(self, queue: str, concurrency: int) -> None:
        with self._lock:
            self._slots[queue] = concurrency
            self._busy.setdefault(queue, 0)
            self._lost.setdefault(queue, 0)

    def started(self, queue: str, lease: Lease, ttl: float) -> None:
        """A handler took ``lease``; its wait is read from the lease's server times."""
        with self._lock:
            self._busy[queue] = self._busy.get(queue, 0) + 1
            if lease.attempt == 1 and lease.enqueued_at > 0:
                claimed = lease.deadline - ttl
                wait = self._waits.setdefault(queue, _Hist(WAIT_BUCKETS))
                wait.observe(max(0.0, claimed - lease.enqueued_at))

    def finished(
        self, queue: str, outcome: str, seconds: float, lease: Lease | None = None
    ) -> None:
        with self._lock:
            self._busy[queue] = max(0, self._busy.get(queue, 0) - 1)
            key = (queue, outcome)
            self._durations.setdefault(key, _Hist(DURATION_BUCKETS)).observe(seconds)

    def lost(self, queue: str, n: int = 1) -> None:
        with self._lock:
            self._lost[queue] = self._lost.get(queue, 0) + n

    # -- the collector ---------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        duration = HistogramMetricFamily(
            "leaseq_job_duration_seconds",
            "Handler run time in this worker, by outcome.",
            labels=["queue", "outcome"],
        )
        wait = HistogramMetricFamily(
            "leaseq_job_wait_seconds",
            "Enqueued to claimed, first attempts, as seen by this worker.",
            labels=["queue"],
        )
        lost = CounterMetricFamily(
            "leaseq_leases_lost", "Leases this worker lost (outcome discarded).", labels=["queue"]
        )
        busy = GaugeMetricFamily(
            "leaseq_handlers_busy", "Handlers running a job now.", labels=["queue"]
        )
        slots = GaugeMetricFamily("leaseq_handlers", "Handler slots.", labels=["queue"])
        with self._lock:
            for (queue, outcome), h in sorted(self._durations.items()):
                duration.add_metric([queue, outcome], h.buckets(), h.total)
            for queue, h in sorted(self._waits.items()):
                wait.add_metric([queue], h.buckets(), h.total)
            for queue, n in sorted(self._lost.items()):
                lost.add_metric([queue], n)
            for queue, n in sorted(self._busy.items()):
                busy.add_metric([queue], n)
            for queue, n in sorted(self._slots.items()):
                slots.add_metric([queue], n)
        yield from (duration, wait, lost, busy, slots)
