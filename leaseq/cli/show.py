"""``leaseq show``: one job's row, times as ISO and relative to the server's clock,
with its workflow, failed attempts, traceback, payload and result."""

from __future__ import annotations

import json
import shlex
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from leaseq.cli import terminal as _terminal
from leaseq.cli.context import Ctx, out, pass_ctx
from leaseq.cli.terminal import pretty as _pretty
from leaseq.cli.terminal import when as _when
from leaseq.errors import DamagedKey, DamagedRow
from leaseq.observe.humanize import utc
from leaseq.transport import client as _redis
from leaseq.types import Job, State, TimedOut

__all__ = ["show"]


@click.command()
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="One JSON object with every field.")
@pass_ctx
def show(c: Ctx, queue: str, job_id: str, as_json: bool) -> None:
    """Print one job row, times as ISO and relative to the server's clock."""
    _, job = c.holder(queue, job_id)
    if as_json:
        click.echo(json.dumps(_terminal.job_doc(job), indent=2, sort_keys=True))
        return
    with _redis.translate_errors():
        sec, usec = c.redis.time()
    now = sec + usec / 1e6
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for name, value in _head_rows(job):
        table.add_row(name, value)
    _graph_rows(c, queue, job, table)
    for name, value in _tail_rows(job, now):
        table.add_row(name, value)
    out.print(table)
    if job.failures:
        out.print(_failures(job))
    if job.traceback:
        out.print("[bold]traceback[/bold] (of the last failure)")
        out.print(Text(job.traceback))
    out.print("[bold]payload[/bold]")
    out.print(_pretty(job.payload))
    if job.result is not None:
        out.print("[bold]result[/bold]")
        out.print(_pretty(job.result))


def _head_rows(job: Job) -> list[tuple[str, str]]:
    """The job's identity and options: the options it has, none it lacks."""
    rows = [
        ("id", job.id),
        ("queue", job.queue),
        ("state", job.state.value),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("priority", str(job.priority)),
    ]
    if job.fence:  # claimed at least once: its lease's full fencing token
        rows.append(("token", f"attempt {job.attempts}, row {job.incarnation}, claim {job.fence}"))
    after = f"{job.after} (queued behind it: runs once it finishes)"
    shown: list[tuple[str, str | None]] = [
        ("group", job.group),
        ("kind", job.kind or None),
        ("timeout", None if job.timeout is None else f"{job.timeout:g} s"),
        ("cost", _cost(job)),
        ("traceparent", job.traceparent or None),
        ("unique_key", job.unique_key),
        ("after", None if job.after is None else after),
        ("progress", None if job.progress is None else json.dumps(job.progress)),
        ("flow", job.flow or None),
        ("waits_for", None if job.wait_key is None else _waits_for(job)),
    ]
    return rows + [(name, value) for name, value in shown if value is not None]


def _cost(job: Job) -> str | None:
    """Its cost (``cost=``) and what its last settled run spent; None for the default."""
    if job.cost == 1.0 and job.spent is None:
        return None
    spent = "" if job.spent is None else f" (spent {job.spent:g})"
    return f"{job.cost:g}{spent}"


def _waits_for(job: Job) -> str:
    """What a suspended job's wait resumes on: its signal key, and its step."""
    # Quoted: a key may hold characters a shell reads (';', '$', '|', ...).
    command = f"leaseq signal {shlex.quote(job.queue)} {shlex.quote(job.wait_key or '')}"
    return f"signal {job.wait_key} (step {job.wait_step}; {command})"


def _tail_rows(job: Job, now: float) -> list[tuple[str, str]]:
    """The job's times (as ISO and relative to ``now``), worker, error, ``once``
    marks and recorded steps."""
    rows = []
    for name in ("enqueued_at", "run_at", "expires_at", "claimed_at", "lease_until", "finished_at"):
        value = getattr(job, name)
        if value is not None:
            rows.append((name, _when(value, now, lease=name == "lease_until")))
    if job.worker:
        rows.append(("worker", job.worker))
    if job.last_error:
        rows.append(("last_error", job.last_error))
    for name, value in job.once.items():
        rows.append((f"once:{name}", f"at attempt {value}"))
    for name, value in sorted(job.steps.items()):  # durable steps, by name
        shown = "(timed out: no signal)" if isinstance(value, TimedOut) else _short(value)
        rows.append((f"step:{name}", shown))
    return rows


STEP_WIDTH = 50
"""Most characters of a step's result shown on its line (``show --json`` has it whole)."""


def _short(value: object) -> str:
    text = json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= STEP_WIDTH else text[: STEP_WIDTH - 1] + "…"


def _failures(job: Job) -> Table:
    """The failed attempts the row keeps, one line each."""
    fails = _terminal.grid("failed attempts (newest 10; UTC, server clock)")
    for header in ("attempt", "failed", "then", "worker", "error"):
        fails.add_column(header, overflow="fold", no_wrap=header != "error")
    for f in job.failures:
        stamp = utc(f.failed_at)
        when = stamp.strftime("%m-%d %H:%M:%S") if stamp else "?"
        fails.add_row(str(f.attempt), when, f.to, f.worker or "", f.error)
    return fails


def _state_of(target: Any, job_id: str) -> str:
    """A related job's state for ``show``: 'gone', or 'damaged' for a row that will not read."""
    try:
        row = target.get(job_id)
    except (DamagedRow, DamagedKey):
        return "damaged"
    return row.state.value if row else "gone"


def _graph_rows(c: Ctx, queue: str, job: Any, table: Table) -> None:
    """A job's parents and children with their states (docs/workflows.md)."""
    if job.depends_on:
        target = c.target(queue)
        states = []
        for parent in job.depends_on[:20]:
            states.append(f"{parent} ({_state_of(target, parent)})")
        more = len(job.depends_on) - 20
        table.add_row(
            "parents",
            ", ".join(states) + (f", and {more} more" if more > 0 else ""),
        )
        left = (
            f"{job.parents_left} unfinished"
            if job.state is State.WAITING
            else "never released"
            if job.state is State.CANCELLED
            else "released"
        )
        table.add_row("waits", f"{left}; on_parent_failure={job.on_parent_failure}")
        if job.failed_parents:
            table.add_row("failed_parents", ", ".join(job.failed_parents))
    kids = c.target(queue).children(job.id) if not job.state.finished else []
    if kids:
        target = c.target(queue)
        shown = [f"{k} ({_state_of(target, k)})" for k in kids[:20]]
        more = len(kids) - 20
        table.add_row("children", ", ".join(shown) + (f", and {more} more" if more > 0 else ""))
    if job.children:
        table.add_row("pinned", f"{job.children} unfinished children keep this row")
    if job.cancelled_children:
        table.add_row("cancelled", f"{job.cancelled_children} waiting children when it failed")
