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
  reaped), ``released``, ``cancelled``, ``past_deadline`` (jobs dead-lettered
  because nothing claimed them by their ``expires=`` deadline). One event can
  count twice (a last failure is ``failed`` and ``dead``; a job past its
  deadline is ``past_deadline`` and ``dead``).
- ``leaseq_dead_retried_total{queue}`` counter: dead jobs retried by an operator.
- ``leaseq_oldest_pending_age_seconds{queue}`` gauge (0 when nothing is pending).
- ``leaseq_leases_expired{queue}`` gauge: leases past their deadline, not reaped yet.
- ``leaseq_leases_expiring_soon{queue}`` gauge: leases ending within 10 s.
- ``leaseq_queue_paused{queue}`` gauge: 1 while paused.
- ``leaseq_backlog{queue}`` gauge: jobs that could run now (pending, plus
  scheduled ones already due): what to scale workers on (docs/deploy.md).
- ``leaseq_in_flight{queue}`` gauge: jobs under lease now.
- ``leaseq_recent_claims{queue}`` gauge: claims in the rate limit's last span (0
  without one); ``leaseq_recent_cost{queue}``: cost claimed in the cost limit's
  last span, settled where settled (0 without one): compare with the limits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from leaseq.types import State, Stats

__all__ = ["CONTENT_TYPE", "OUTCOMES", "collect", "live", "render"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
OUTCOMES = ("succeeded", "failed", "dead", "expired", "released", "cancelled", "past_deadline")
"""The ``outcome`` label values of ``leaseq_jobs_finished_total`` (meta counter names)."""


PER_QUEUE: tuple[tuple[str, str, str, Callable[[Stats], float]], ...] = (
    ("counter", "leaseq_jobs_enqueued", "Job rows created since the queue began.",
     lambda s: s.totals.get("enqueued", 0)),
    ("counter", "leaseq_dead_retried", "Dead jobs made pending again by an operator.",
     lambda s: s.totals.get("retried", 0)),
    ("gauge", "leaseq_oldest_pending_age_seconds",
     "Seconds since the job at the head of pending was enqueued (0: none pending).",
     lambda s: s.oldest_pending_age or 0.0),
    ("gauge", "leaseq_leases_expired",
     "Leases past their deadline that no claim or reap handed back yet.", lambda s: s.expired),
    ("gauge", "leaseq_leases_expiring_soon", "Leases ending within 10 seconds.",
     lambda s: s.expiring_soon),
    ("gauge", "leaseq_queue_paused", "1 while the queue is paused.",
     lambda s: 1 if s.paused else 0),
    ("gauge", "leaseq_backlog",
     "Jobs that could run now: pending, plus scheduled ones already due.", lambda s: s.backlog),
    ("gauge", "leaseq_in_flight", "Jobs under lease now.", lambda s: s.active),
    ("gauge", "leaseq_recent_claims",
     "Claims in the last span of the queue's rate limit (0 without one).",
     lambda s: s.recent_claims or 0),
    ("gauge", "leaseq_recent_cost",
     "Cost claimed in the last span of the queue's cost limit (0 without one).",
     lambda s: s.recent_cost or 0.0),
)  # fmt: skip
"""The families with one sample per queue: kind, name, help, the value of a Stats."""


def collect(stats: Iterable[Stats]) -> Iterator[Metric]:
    """The metric families for these queues' stats."""
    jobs = GaugeMetricFamily("leaseq_jobs", "Jobs in each state.", labels=["queue", "state"])
    finished = CounterMetricFamily(
        "leaseq_jobs_finished",
        "Attempts and jobs that ended, by outcome (the queue's own counters).",
        labels=["queue", "outcome"],
    )
    families = [
        (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
            name, text, labels=["queue"]
        )
        for kind, name, text, _ in PER_QUEUE
    ]
    for s in stats:
        for state in State:
            jobs.add_metric([s.queue, state.value], getattr(s, state.value))
        for outcome in OUTCOMES:
            finished.add_metric([s.queue, outcome], s.totals.get(outcome, 0))
        for family, (*_, value) in zip(families, PER_QUEUE, strict=True):
            family.add_metric([s.queue], value(s))
    yield from (jobs, finished, *families)


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


def live(read: Callable[[], Sequence[Stats]], *extra: Any) -> Callable[[], bytes]:
    """The maker of a ``/metrics`` text read anew at every scrape (``leaseq worker
    --metrics-port``, ``leaseq.observe.endpoint``): ``read`` returns the stats to
    expose; ``extra`` collectors (a ``leaseq.observe.worker_metrics.WorkerMetrics``)
    are served too."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Live(read))
    for collector in extra:
        registry.register(collector)
    return lambda: bytes(generate_latest(registry))
