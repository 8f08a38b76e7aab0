"""The job commands of ``leaseq``: enqueue, wait, ls, retry, reap, purge. Each is a
thin client of the Queue API; output fits the terminal, ``--json`` is for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress

from leaseq.cli import terminal as _terminal
from leaseq.cli.context import STATES, Ctx, out, pass_ctx
from leaseq.cli.payloads import json_lines, parse_json
from leaseq.cli.terminal import row as _row
from leaseq.errors import DamagedRow
from leaseq.queue import Queue
from leaseq.sharded import ShardedQueue
from leaseq.store import ready
from leaseq.store.filters import AGES, JobFilter, Mark, find_page, parse_age
from leaseq.types import State, Unique

__all__ = ["enqueue", "ls_", "purge", "reap", "retry", "wait_"]

ENQUEUE_BATCH = 1000
LS_SCAN = 100_000
"""Index entries a filtered ``ls`` looks at by default (about 1.5 s on a laptop)."""


@click.command()
@click.argument("queue")
@click.argument("payload", required=False)
@click.option(
    "--file", "path", type=click.File("rb"), help="JSON lines, one payload each; - = stdin."
)
@click.option("--id", "job_id", default=None, help="Job id (single payload only).")
@click.option("--delay", type=float, default=None, help="Seconds before the job may run.")
@click.option("--priority", type=int, default=0, show_default=True, help="0..1000000, lower first.")
@click.option("--max-attempts", type=int, default=None)
@click.option("--kind", default=None, help="The jobs' kind (a worker's handler dict picks by it).")
@click.option("--timeout", type=float, default=None, help="Seconds a handler may run on each.")
@click.option("--group", default=None, help="The jobs' fair group (claims rotate between groups).")
@click.option("--cost", type=float, default=None, help="What each counts against cost limits.")
@click.option(
    "--expires",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Start-by deadline: a job not started this long after now never runs.",
)
@click.option(
    "--unique",
    default=None,
    metavar="KEY",
    help="Uniqueness key: while a job holding KEY is unfinished, no other is made.",
)
@click.option(
    "--shards",
    type=int,
    default=None,
    help="Enqueue to a ShardedQueue of N shards (default: found).",
)
@pass_ctx
def enqueue(
    c: Ctx,
    /,
    queue: str,
    payload: str | None,
    path: Any,
    job_id: str | None,
    delay: float | None,
    priority: int,
    unique: str | None,
    shards: int | None,
    **opts: Any,
) -> None:
    """Add one job (PAYLOAD, JSON text) or many (--file, JSON lines). With
    --unique, a job whose KEY is held prints the holder's id."""
    if (payload is None) == (path is None):
        raise click.UsageError("give either a JSON PAYLOAD or --file PATH")
    q = c.producer(queue, shards)
    opts.update(delay=delay, priority=priority)
    if unique is not None:
        opts["unique"] = Unique(unique)
    if payload is not None:
        out.print(q.enqueue(parse_json(payload, "payload"), id=job_id, **opts))
        return
    if job_id is not None:
        raise click.UsageError("--id goes with a single PAYLOAD, not --file")
    # Every line is decoded, parsed and encoded first, so a bad one (not UTF-8,
    # not JSON, too large) is named and nothing is written.
    codec = (q.shards[0] if isinstance(q, ShardedQueue) else q)._core.codec
    items = list(json_lines(path, codec.encode))
    done = 0
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"enqueue to {queue}", total=len(items))
        for start in range(0, len(items), ENQUEUE_BATCH):
            done += len(q.enqueue_many(items[start : start + ENQUEUE_BATCH], **opts))
            bar.update(task, completed=done)
    out.print(f"enqueued {done} job(s) to {queue}")


@click.command(name="wait")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait.")
@pass_ctx
def wait_(c: Ctx, queue: str, job_id: str, timeout: float) -> None:
    """Wait until job ID finishes; print it as JSON. Exit 0 only if it succeeded
    (1: dead or cancelled, 2: still unfinished at --timeout)."""
    part, _ = c.holder(queue, job_id)
    job = part.wait(job_id, timeout=timeout)
    if job is None:  # say where it is (scheduled, pending, active...), not null
        now = part.get(job_id)
        state = None if now is None else now.state.value
        click.echo(json.dumps({"id": job_id, "state": state, "finished": False}))
        sys.exit(2)
    click.echo(json.dumps(_terminal.job_doc(job), default=repr))
    if job.state is not State.SUCCEEDED:
        sys.exit(1)


@click.command(name="ls")
@click.argument("queue")
@click.option("--state", type=click.Choice(STATES), default="pending", show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--kind", default="", help="Only jobs of this kind.")
@click.option("--text", default="", help="Only jobs with this text in id, payload or error.")
@click.option("--older-than", "older", default="", metavar="AGE", help="e.g. 90s, 10m, 2h, 3d.")
@click.option("--newer-than", "newer", default="", metavar="AGE", help="e.g. 90s, 10m, 2h, 3d.")
@click.option(
    "--age-of",
    "age",
    type=click.Choice(list(AGES)),
    default=None,
    help="The time an age is of (default: finished, claimed for active, else enqueued).",
)
@click.option("--after", default="", metavar="CURSOR", help="Go on from a filtered list's end.")
@click.option(
    "--scan",
    type=click.IntRange(1),
    default=LS_SCAN,
    show_default=True,
    help="Index entries a filtered list looks at, at most.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON array of jobs (as show --json).")
@pass_ctx
def ls_(
    c: Ctx, /, queue: str, state: str, offset: int, limit: int, as_json: bool, **how: Any
) -> None:
    """List jobs in one state, a page at a time; with --kind, --text or an age,
    only the jobs that match (looked for through the state's index, --scan
    entries at most; the last line gives the --after to go on)."""
    target = c.target(queue)
    flt = JobFilter(
        kind=how["kind"],
        text=how["text"],
        older_than=parse_age(how["older"], "--older-than") if how["older"] else None,
        newer_than=parse_age(how["newer"], "--newer-than") if how["newer"] else None,
        age_of=AGES[how["age"]] if how["age"] else "",
    )
    total = getattr(target.stats(), state)
    if flt.on or how["after"]:
        if offset:
            raise click.UsageError("--offset pages the whole state; a filtered list uses --after")
        _ls_matches(target, queue, state, flt, limit, how, as_json, total)
        return
    damaged: list[DamagedRow] = []
    jobs = target.ls(state, offset=offset, limit=limit, damaged=damaged)
    if _print_jobs(f"{queue}: {state} ({total})", state, jobs, damaged, as_json):
        return
    shown = offset + len(jobs) + len(damaged)
    span, step = total, shown
    if state == "pending" and isinstance(target, Queue):
        # Offsets count the ready list's entries, stale ones too: a page covers limit.
        span, step = target._drive(ready.entries_count(target._core.keys)), offset + limit
    if step < span:
        out.print(f"showing {offset + 1}-{shown} of {total}; next page: --offset {step}")


def _ls_matches(
    target: Queue | ShardedQueue,
    queue: str,
    state: str,
    flt: JobFilter,
    limit: int,
    how: dict[str, Any],
    as_json: bool,
    total: int,
) -> None:
    """``ls`` with a filter: the next ``limit`` matches from ``--after`` on."""
    parts = list(target.shards) if isinstance(target, ShardedQueue) else [target]
    mark = Mark.parse(how["after"]) if how["after"] else None
    op = find_page([p._core for p in parts], state, flt, mark, want=limit, budget=how["scan"])
    found = target._drive(op)
    title = f"{queue}: {state} matching ({len(found.jobs)} in {found.looked} of {total} looked at)"
    _print_jobs(title, state, found.jobs, found.damaged, as_json)
    if found.mark is not None:
        click.echo(f"more may match: --after {found.mark.text()}", err=as_json)
    elif not as_json:
        out.print("no more: every entry looked at")


def _print_jobs(
    title: str, state: str, jobs: list[Any], damaged: list[DamagedRow], as_json: bool
) -> bool:
    """Print a list of jobs as a table that fits the terminal (or JSON); True for JSON."""
    if as_json:
        click.echo(json.dumps([_terminal.job_doc(j) for j in jobs], indent=2, sort_keys=True))
        for exc in damaged:  # stdout stays one JSON document
            click.echo(f"leaseq: warning: damaged row: {exc}", err=True)
        return True
    # Fits the terminal: one line a job, headers whole; a long id keeps its
    # start and end (order-2026-…-0042), the text cells their start. The kind
    # is a column of its own (whole up to 12 cells); where jobs failed, the
    # error message and the payload share the room, the error the larger part
    # (at 80 columns a dead list shows ~27 cells of the one, ~19 of the other).
    # A column that is the same nothing on every row (priority 0, no kind, no
    # worker, no error) is left out.
    width = _terminal.terminal_width()
    columns = [
        _terminal.Column("id", keep="middle", share=0.4, least=20),
        _terminal.Column("attempts", keep=None),
        _terminal.Column("priority", keep=None),
        _terminal.Column("group", keep="end", least=6),
        _terminal.Column("worker", keep="middle"),
        _terminal.Column("kind", keep="middle", least=12),
        _terminal.Column("error", least=10, share=0.35),
        _terminal.Column("payload", least=9, share=0.25),
    ]
    rows = [_row(j) for j in jobs]
    blank = {"priority": "0", "group": "", "worker": "", "kind": "", "error": ""}
    drop = set() if state in ("active", "pending") else {"worker"}  # on `show`; room for the error
    keep = [
        i
        for i, col in enumerate(columns)
        if col.header not in drop
        and (col.header not in blank or any(r[i] != blank[col.header] for r in rows))
    ]
    table = _terminal.fit(
        _terminal.grid(title),
        [columns[i] for i in keep],
        [[r[i] for i in keep] for r in rows],
        width,
    )
    out.print(table, width=width)
    for exc in damaged:  # an operator should see these, not lose the page to them
        out.print(f"damaged row: {exc}")
    return False


@click.command()
@click.argument("queue")
@click.argument("job_id", metavar="[ID]", required=False)
@click.option("--all-dead", is_flag=True, help="Retry every dead job of the queue.")
@click.option("--attempts", type=int, default=None, help="More tries to allow (default: queue's).")
@click.option("--payload", default=None, help="A new payload (JSON) for the job: edit, then retry.")
@pass_ctx
def retry(
    c: Ctx,
    queue: str,
    job_id: str | None,
    all_dead: bool,
    attempts: int | None,
    payload: str | None,
) -> None:
    """Make a dead job (or every dead job) pending again."""
    if (job_id is None) == (not all_dead):
        raise click.UsageError("give either a job ID or --all-dead")
    if payload is not None and all_dead:
        raise click.UsageError("--payload goes with one job ID, not --all-dead")
    if all_dead:
        damaged: list[DamagedRow] = []
        done = c.target(queue).retry_all_dead(attempts=attempts, damaged=damaged)
        _stepped_over(damaged, "stayed dead")
        more = attempts if attempts is not None else c.queue(queue)._core.max_attempts
        why = (
            f"--attempts {attempts}"
            if attempts is not None
            else "leaseq's default max_attempts; --attempts N sets another"
        )
        out.print(
            f"retried {done} dead job(s) in {queue}, each with {more} more tries ({why}; "
            "max_attempts is raised, as attempts fences leases and never goes down)"
        )
        return
    assert job_id is not None
    part, job = c.holder(queue, job_id)
    if payload is not None:
        limit = part.retry_dead(job_id, attempts=attempts, payload=parse_json(payload, "--payload"))
    else:
        limit = part.retry_dead(job_id, attempts=attempts)
    if job.cancelled_children:
        out.print(
            f"note: the {job.cancelled_children} waiting child job(s) that {job_id} cancelled "
            "when it failed stay cancelled; enqueue them again to run them (docs/workflows.md)"
        )
    why = (
        f"--attempts {attempts}"
        if attempts is not None
        else "leaseq's default max_attempts; --attempts N sets another"
    )
    out.print(
        f"job {job_id} is pending again with {limit - job.attempts} more tries ({why}): "
        f"max_attempts raised from {job.max_attempts} to {limit}, as attempts stays at "
        f"{job.attempts} (it fences leases and never goes down)"
    )


@click.command()
@click.argument("queue")
@pass_ctx
def reap(c: Ctx, queue: str) -> None:
    """Hand back every expired lease of QUEUE."""
    requeued, died = c.target(queue).reap()  # a sharded queue reaps every shard
    out.print(f"reaped {queue}: {requeued} returned to pending, {died} dead-lettered")


@click.command()
@click.argument("queue")
@click.option("--state", type=click.Choice([s for s in STATES if s != "active"]), required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def purge(c: Ctx, queue: str, state: str, yes: bool) -> None:
    """Delete every job of QUEUE in STATE."""
    target = c.target(queue)
    count = getattr(target.stats(), state)
    if not yes:
        click.confirm(f"delete {count} {state} job(s) from {queue}?", abort=True, err=True)
    damaged: list[DamagedRow] = []
    gone = target.purge(state, damaged=damaged)
    out.print(f"purged {gone} {state} job(s) from {queue}")
    _stepped_over(damaged, "left in place")


def _stepped_over(damaged: list[DamagedRow], what: str) -> None:
    """Say which rows a run over a whole state stepped over (damaged by hand):
    an operator would otherwise read 'purged N' and see them in stats later."""
    for exc in damaged:
        click.echo(f"leaseq: warning: {what}, a damaged row: {exc}", err=True)
    if damaged:
        click.echo(
            f"leaseq: warning: {len(damaged)} damaged row(s) {what}: "
            "leaseq delete QUEUE ID removes one",
            err=True,
        )
