"""Terminal output for the CLI: times and spans, table rows, pretty JSON, and
log lines and warnings as clean, redacted lines."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

import click
from rich.json import JSON

from ._urls import redact
from .types import Job

__all__ = ["RedactingFormatter", "pretty", "row", "show_warning", "span", "when"]


class RedactingFormatter(logging.Formatter):
    """Log lines (and tracebacks) with every password hidden (``redact``)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings as one clean line on stderr (no file path, no source line)."""
    click.echo(f"leaseq: warning: {redact(str(message))}", err=True)


def pretty(value: Any) -> Any:
    try:
        return JSON(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} days"


def when(t: float, now: float, lease: bool = False) -> str:
    iso = datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds")
    if lease:
        rel = f"expires in {span(t - now)}" if t >= now else f"expired {span(now - t)} ago"
    else:
        rel = f"in {span(t - now)}" if t > now else f"{span(now - t)} ago"
    return f"{iso}  ({rel})"


def row(job: Job) -> list[str]:
    payload = json.dumps(job.payload) if not isinstance(job.payload, bytes) else repr(job.payload)
    error = (job.last_error or "").splitlines()[0] if job.last_error else ""
    if job.kind:  # the kind heads the payload cell: "send_email {...}"
        payload = f"{job.kind} {payload}"
    return [
        job.id,
        f"{job.attempts}/{job.max_attempts}",
        str(job.priority),
        job.worker or "",
        error,
        payload,
    ]
