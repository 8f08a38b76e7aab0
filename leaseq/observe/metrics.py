"""Prometheus metrics of leaseq queues, from the queues' own counters and indexes.

Every figure comes from ``Queue.stats`` (one script call per queue), so it
survives restarts and every scraper, on any host, sees the same numbers.
The web app serves them at ``/metrics``; ``collect`` and ``render`` make them
usable elsewhere (``prometheus_client`` is needed: extra ``web``).

Metrics (see docs/operations.md for what to alert on):

- ``leaseq_jobs{queue,state}`` gauge: jobs in each state now.
- ``leaseq_jobs_enqueued_total{queue}`` counter: rows created.
- ``leaseq_jobs_finished_total{queue,outcome}`` counter: attempts and jobs that
  ended, by the queue's meta counters — ``succeeded``, ``failed`` (every
  ``fail``, also one that dead-letters), ``dead`` (every dead-lettering:
  failure, expiry without attempts left, damaged row), ``expired`` (leases
  reaped), ``released``, ``cancelled``. One event can count twice (a last
  failure is ``failed`` and ``dead``).
- ``leaseq_dead_retried_total{queue}`` counter: dead jobs retried by an operator.
- ``leaseq_oldest_pending_age_seconds{queue}`` gauge (0 when nothing is pending).
- ``leaseq_leases_expired{queue}`` gauge: leases past their deadline, not reaped yet.
- ``leaseq_leases_expiring_soon{queue}`` gauge: leases ending within 10 s.
- ``leaseq_queue_paused{queue}`` gauge: 1 while paused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from leaseq.types import State, Stats

__all__ = ["CONTENT_TYPE", "OUTCOMES", "collect", "render", "serve"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
OUTCOMES = ("succeeded", "failed", "dead", "expired", "released", "cancelled")
"""The ``outcome`` label values of ``leaseq_jobs_finished_total`` (meta counter names)."""


def collect(stats: Iterable[Stats]) -> Iterator[Metric]:
    """The metric families for these queues' stats."""
    jobs = GaugeMetricFamily("leaseq_jobs", "Jobs in each state.", labels=["queue", "state"])
    enqueued = CounterMetricFamily(
        "leaseq_jobs_enqueued", "Job rows created since the queue began.", labels=["queue"]
    )
    finished = CounterMetricFamily(
        "leaseq_jobs_finished",
        "Attempts and jobs that ended, by outcome (the queue's own counters).",
        labels=["queue", "outcome"],
    )
    retried = CounterMetricFamily(
        "leaseq_dead_retried", "Dead jobs made pending again by an operator.", labels=["queue"]
    )
    oldest = GaugeMetricFamily(
        "leaseq_oldest_pending_age_seconds",
        "Seconds since the job at the head of pending was enqueued (0: none pending).",
        labels=["queue"],
    )
    expired = GaugeMetricFamily(
        "leaseq_leases_expired",
        "Leases past their deadline that no claim or reap handed back yet.",
        labels=["queue"],
    )
    soon = GaugeMetricFamily(
        "leaseq_leases_expiring_soon", "Leases ending within 10 seconds.", labels=["queue"]
    )
    paused = GaugeMetricFamily(
        "leaseq_queue_paused", "1 while the queue is paused.", labels=["queue"]
    )
    for s in stats:
        for state in State:
            jobs.add_metric([s.queue, state.value], getattr(s, state.value))
        enqueued.add_metric([s.queue], s.totals.get("enqueued", 0))
        for outcome in OUTCOMES:
            finished.add_metric([s.queue, outcome], s.totals.get(outcome, 0))
        retried.add_metric([s.queue], s.totals.get("retried", 0))
        oldest.add_metric([s.queue], s.oldest_pending_age or 0.0)
        expired.add_metric([s.queue], s.expired)
        soon.add_metric([s.queue], s.expiring_soon)
        paused.add_metric([s.queue], 1 if s.paused else 0)
    yield from (jobs, enqueued, finished, retried, oldest, expired, soon, paused)


class _Snapshot:
    def __init__(self, stats: Sequence[Stats]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        return collect(self.stats)


def render(stats: Sequence[Stats]) -> bytes:
    """The Prometheus text exposition of these stats."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(stats))
    return bytes(generate_latest(registry))


class _Live:
    """Reads the stats anew at every scrape."""

    def __init__(self, read: Callable[[], Sequence[Stats]]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self.read()
        except Exception as exc:  # a scrape during an outage: no figures, no crash
            logging.getLogger("leaseq.metrics").warning("metrics: cannot read stats: %s", exc)
            stats = []
        return collect(stats)


def serve(
    port: int, read: Callable[[], Sequence[Stats]], host: str = "127.0.0.1", *extra: Any
) -> Any:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread (``leaseq worker
    --metrics-port``); ``read`` returns the stats to expose, called per scrape;
    ``extra`` collectors (a ``leaseq.observe.worker_metrics.WorkerMetrics``) are served
    too. Returns what ``prometheus_client.start_http_server`` returns."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Live(read))
    for collector in extra:
        registry.register(collector)
    return start_http_server(port, addr=host, registry=registry)
