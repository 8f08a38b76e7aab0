"""Worker logs: one JSON object per line (``--log-format json``) and a line per
finished job (``--log-jobs``).

Every line the workers log carries ``queue``, ``job_id`` and ``attempt`` as
record fields (``leaseq.work.log.log_job``); failures, retries, dead-letters and
lost leases are WARNING lines. ``JsonFormatter`` writes each record as one
object: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, and the
job fields when the line is about a job (``queue``, ``job_id``, ``attempt``,
plus ``duration`` in seconds and ``outcome`` on the per-job lines), every
value with passwords redacted. ``JobLog`` is the observer behind
``--log-jobs``: an INFO line per finished job; without it the default path
logs nothing per job.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from leaseq.observe.redact import redact
from leaseq.types import Lease

__all__ = ["FIELDS", "JobLog", "JsonFormatter"]

FIELDS = ("queue", "job_id", "attempt", "duration", "outcome")
logger = logging.getLogger("leaseq.worker")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for field in FIELDS:
            value = getattr(record, field, None)
            if value is not None and value != "-":
                doc[field] = int(value) if field == "attempt" else value
        if record.exc_info:
            doc["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(doc, ensure_ascii=False, default=str)


class JobLog:
    """An observer that logs one INFO line per finished job (``--log-jobs``)."""

    def slots(self, queue: str, concurrency: int) -> None:
        return None

    def started(self, queue: str, lease: Lease, ttl: float) -> None:
        return None

    def finished(
        self, queue: str, outcome: str, seconds: float, lease: Lease | None = None
    ) -> None:
        if lease is None or not logger.isEnabledFor(logging.INFO):
            return
        logger.info(
            "queue=%s job=%s attempt=%d finished outcome=%s duration=%.6fs",
            queue,
            lease.id,
            lease.attempt,
            outcome,
            seconds,
            extra={
                "queue": queue,
                "job_id": lease.id,
                "attempt": str(lease.attempt),
                "duration": round(seconds, 6),
                "outcome": outcome,
            },
        )

    def lost(self, queue: str, n: int = 1) -> None:
        return None
