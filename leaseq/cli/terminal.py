"""Terminal output for the CLI: times and spans, table rows, pretty JSON, and
log lines and warnings as clean, redacted lines."""

from __future__ import annotations

import io
import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import click
import msgspec
from rich.cells import cell_len
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from leaseq.observe.humanize import iso, span, utc, when
from leaseq.observe.redact import redact
from leaseq.types import Job

__all__ = [
    "Column",
    "RedactingFormatter",
    "fit",
    "grid",
    "iso",
    "job_doc",
    "pretty",
    "row",
    "shorten",
    "show_warning",
    "span",
    "terminal_width",
    "when",
]


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


TIME_FIELDS = ("enqueued_at", "run_at", "claimed_at", "lease_until", "finished_at")


def job_doc(job: Job) -> dict[str, Any]:
    """A job as ``show --json`` and ``ls --json`` print it: every field of the
    row; payload, result and progress as JSON values; each time as stored in
    Redis (integer ms epoch, server clock, or null) and beside it as
    ``<name>_utc`` (ISO 8601, UTC; null too for a time no date can hold)."""
    doc: dict[str, Any] = msgspec.to_builtins(job)
    for name in TIME_FIELDS:
        _stamp(doc, name, getattr(job, name))
    for failure, entry in zip(job.failures, doc.get("failures", []), strict=False):
        _stamp(entry, "claimed_at", failure.claimed_at)
        _stamp(entry, "failed_at", failure.failed_at)
    return doc


def _stamp(doc: dict[str, Any], name: str, t: float | None) -> None:
    """``doc[name]`` as stored (integer ms epoch) and ``doc[name + "_utc"]`` (ISO)."""
    doc[name] = None if t is None else round(t * 1000)
    stamp = None if t is None else utc(t)
    doc[f"{name}_utc"] = None if stamp is None else stamp.isoformat(timespec="milliseconds")


def row(job: Job) -> list[str]:
    """A job's cells in ``leaseq ls``: id, attempts, priority, group, worker,
    kind, error, payload."""
    payload = json.dumps(job.payload) if not isinstance(job.payload, bytes) else repr(job.payload)
    error = (job.last_error or "").splitlines()[0] if job.last_error else ""
    return [
        job.id,
        f"{job.attempts}/{job.max_attempts}",
        str(job.priority),
        job.group or "",
        job.worker or "",
        job.kind or "",
        error,
        payload,
    ]


# -- tables that fit the terminal --------------------------------------------

MIN_WIDTH = 80


def terminal_width() -> int:
    """Columns a table may fill: the terminal's (``COLUMNS``, else the tty's;
    80 when output is not a terminal), never fewer than 80."""
    return max(MIN_WIDTH, shutil.get_terminal_size((MIN_WIDTH, 24)).columns)


def shorten(text: str, width: int, keep: Literal["middle", "end"] = "end") -> str:
    """``text`` cut to ``width`` terminal cells with one ``…``: ``end`` keeps the
    start, ``middle`` keeps the start and the end (``order-2026-…-0042``), so
    an id stays recognisable."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    if keep == "end":
        return _take(text, width - 1) + "…"
    tail = (width - 1) // 2
    head = width - 1 - tail
    return _take(text, head) + "…" + _take(text[::-1], tail)[::-1]


def _take(text: str, cells: int) -> str:
    out, used = [], 0
    for ch in text:
        used += cell_len(ch)
        if used > cells:
            break
        out.append(ch)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table that ``fit`` lays out. ``keep`` is how a long cell
    is shortened (None: never; numbers and short words). ``share``: the part of
    the room left after the fixed columns that this column may take before the
    others grow (an id's claim to stay whole); ``least``: cells it keeps at worst."""

    header: str
    keep: Literal["middle", "end"] | None = "end"
    justify: Literal["left", "right"] = "left"
    share: float = 0.0
    least: int = 6
    first: bool = False
    """Takes the room left over before the other columns grow (the error of a dead list)."""


def grid(title: str | None = None, caption: str | None = None) -> Table:
    """The CLI's table style: a rule under the header, no side borders, two
    cells between columns (the padding collapsed, so more of 80 columns goes to
    the cells)."""
    from rich import box

    return Table(
        title=title,
        caption=caption,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )


def fit(
    table: Table, columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int
) -> Table:
    """Add ``columns`` and ``rows`` to ``table`` so that it is at most ``width``
    cells wide, one line per row: cells too long for their column are
    shortened with an ellipsis, never wrapped; headers are whole."""
    natural = [
        max([cell_len(c.header), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(columns)
    ]
    widths = _allot(columns, natural, width - _overhead(table, len(columns)))
    for c, w in zip(columns, widths, strict=True):
        table.add_column(c.header, justify=c.justify, no_wrap=True, overflow="ellipsis", width=w)
    for r in rows:
        cells = (
            Text(cell if c.keep is None else shorten(cell, w, c.keep))
            for cell, c, w in zip(r, columns, widths, strict=True)
        )
        table.add_row(*cells)
    return table


def _allot(columns: Sequence[Column], natural: list[int], room: int) -> list[int]:
    """Widths within ``room``: fixed columns whole, each shrinkable one first its
    ``least`` (or ``share`` of the room), then the rest in turn up to its natural width."""
    widths = list(natural)
    flex = [i for i, c in enumerate(columns) if c.keep is not None]
    left = room - sum(w for i, w in enumerate(natural) if i not in flex)
    for i in flex:
        c = columns[i]
        floor = max(cell_len(c.header), c.least, int(c.share * left))
        widths[i] = min(natural[i], floor)
    spare = left - sum(widths[i] for i in flex)
    if spare < 0:
        _squeeze(columns, widths, flex, -spare)
        return widths
    for i in flex:
        if columns[i].first and spare > 0:
            more = min(spare, natural[i] - widths[i])
            widths[i] += more
            spare -= more
    growing = [i for i in flex if widths[i] < natural[i]]
    while spare > 0 and growing:
        for i in list(growing):
            if spare == 0:
                break
            widths[i] += 1
            spare -= 1
            if widths[i] >= natural[i]:
                growing.remove(i)
    return widths


def _squeeze(columns: Sequence[Column], widths: list[int], flex: list[int], over: int) -> None:
    """Take ``over`` cells from the shrinkable columns whose floors did not fit:
    first from those above their ``least`` (a ``share``), then from text
    (``keep="end"``) before names and ids (``"middle"``), the widest first,
    none below its header. Left to the terminal instead, every column would
    shrink alike, and a short name that fits would be cut to ``di…``."""

    def order(i: int) -> tuple[bool, bool, int]:
        return widths[i] > columns[i].least, columns[i].keep == "end", widths[i]

    while over > 0:
        able = [i for i in flex if widths[i] > cell_len(columns[i].header)]
        if not able:
            return
        widths[max(able, key=order)] -= 1
        over -= 1


def _overhead(table: Table, n: int) -> int:
    """Cells a table of ``n`` columns spends on borders and padding, measured by
    rendering an empty copy of its style (so any box or padding is counted)."""
    probe = Table(
        box=table.box,
        show_edge=table.show_edge,
        pad_edge=table.pad_edge,
        padding=table.padding,
        collapse_padding=table.collapse_padding,
        show_header=False,
    )
    for _ in range(n):
        probe.add_column(width=1, no_wrap=True)
    probe.add_row(*("x" * n))
    console = Console(file=io.StringIO(), width=10_000, legacy_windows=False)
    with console.capture() as captured:
        console.print(probe)
    return max(cell_len(line) for line in captured.get().splitlines()) - n
