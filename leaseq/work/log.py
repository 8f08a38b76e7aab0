"""The worker's log lines: queue, job id and attempt on every line."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from leaseq.types import Lease

if TYPE_CHECKING:
    from leaseq.work.outcomes import Outcome

logger = logging.getLogger("leaseq.worker")


class Holding(Protocol):
    """Anything that holds a lease (the core's record of one)."""

    @property
    def lease(self) -> Lease: ...


def log_job(queue: str, level: int, task: Holding | Lease | None, msg: str, *args: Any) -> None:
    """Log with queue, job id and attempt on the line (and as ``extra`` fields)."""
    if not logger.isEnabledFor(level):
        return
    lease = task if task is None or isinstance(task, Lease) else task.lease
    job, attempt = ("-", "-") if lease is None else (lease.id, str(lease.attempt))
    logger.log(
        level,
        "queue=%s job=%s attempt=%s " + msg,
        queue,
        job,
        attempt,
        *args,
        extra={"queue": queue, "job_id": job, "attempt": attempt},
    )


def log_written(queue: str, lease: Lease, outcome: Outcome, state: str) -> None:
    """The line both workers log when a failure, retry or dead-letter is written."""
    first = outcome.error.splitlines()[0] if outcome.error else ""
    log_job(queue, logging.WARNING, lease, "%s -> %s: %s", outcome.label, state, first)


def log_started(queue: str, worker_id: str, concurrency: int, ttl: float, burst: bool) -> None:
    """The line every driver logs as its run() starts."""
    log_job(
        queue,
        logging.INFO,
        None,
        "worker %s started (concurrency=%d, ttl=%gs%s)",
        worker_id,
        concurrency,
        ttl,
        ", burst" if burst else "",
    )


def log_stopped(queue: str, worker_id: str, figures: Mapping[str, int]) -> None:
    """The line every driver logs as its run() ends, with the run's figures
    (``name=value``, in the mapping's order)."""
    summary = ", ".join(f"{k}={v}" for k, v in figures.items())
    log_job(queue, logging.INFO, None, "worker %s stopped (%s)", worker_id, summary)
