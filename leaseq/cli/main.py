"""The ``leaseq`` command line: a thin client of ``leaseq.Queue`` (click + rich).

Errors print one line on stderr and exit non-zero, never a traceback, and
no output ever shows a password from a URL (``_redis.redact``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import textwrap
import uuid
import warnings
from collections.abc import Iterator
from typing import Any, NoReturn, cast

import click
import msgspec
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from leaseq.cli import events as cli_events
from leaseq.cli import schedules as cli_schedules
from leaseq.cli import terminal as _terminal
from leaseq.cli.doctor import doctor as _doctor
from leaseq.cli.ops import FORWARD
from leaseq.cli.ops import register as _register_ops
from leaseq.cli.terminal import RedactingFormatter as _RedactingFormatter
from leaseq.cli.terminal import pretty as _pretty
from leaseq.cli.terminal import row as _row
from leaseq.cli.terminal import show_warning as _show_warning
from leaseq.cli.terminal import span as _span
from leaseq.cli.terminal import when as _when
from leaseq.errors import (
    DamagedKey,
    DamagedRow,
    InvalidArgument,
    InvalidPayload,
    JobNotFound,
    LeaseqError,
    PayloadTooLarge,
    ScriptError,
)
from leaseq.handler import load_handler
from leaseq.observe.humanize import utc
from leaseq.observe.state_style import STYLES
from leaseq.observe.tracing import TRACE_PARENT_MODES
from leaseq.queue import Queue, connect
from leaseq.queue_set import parse_queue_spec
from leaseq.sharded import ShardedQueue, known_queues, sharded_names, stats_many, stored_shards
from leaseq.store import validate as _validate
from leaseq.supervisor import Supervisor, report_stuck, watch_parent
from leaseq.transport import client as _redis
from leaseq.types import Job, State, Unique
from leaseq.worker import Worker

__all__ = ["cli", "main"]

DEFAULT_URL = "redis://localhost:6379/0"
ENQUEUE_BATCH = 1000
STATES = [s.value for s in State]


class _Ctx:
    def __init__(self, url: str | None, prefix: str) -> None:
        self.explicit_url, self.url = resolve_url(url)
        self.prefix = prefix
        self._client: Any = None

    @property
    def redis(self) -> Any:
        if self._client is None:
            self._client = connect(self.url)
        return self._client

    def queue(self, name: str, **settings: Any) -> Queue:
        return Queue(name, redis=self.redis, prefix=self.prefix, **settings)

    def producer(self, name: str, shards: int | None) -> Queue | ShardedQueue:
        """The queue ``worker`` and ``enqueue`` act on: the ShardedQueue when
        ``name`` is one (or ``--shards`` says so), else a plain Queue (made on
        first use). Never a plain queue that would hide existing shards."""
        with _redis.translate_errors():
            plain = bool(self.redis.exists(*self.queue(name).keys.markers()))
        found = 0 if plain else self.shard_count(name)
        if shards is None:
            shards = found or None
        elif plain:
            raise InvalidArgument(f"{name!r} is a plain queue, not a sharded one: drop --shards")
        elif found and shards != found:
            raise InvalidArgument(
                f"{name!r} has {found} shards, not {shards}: "
                f"give --shards {found} (or leave --shards out)"
            )
        if shards is None:
            return self.queue(name)
        return ShardedQueue(name, shards=shards, redis=self.redis, prefix=self.prefix)

    def target(self, name: str) -> Queue | ShardedQueue:
        """The queue as the operator commands see it: a plain Queue, or the
        ShardedQueue whose shards' keys are there. A clear error for neither."""
        q = self.queue(name)
        with _redis.translate_errors():
            known = self.redis.exists(*q.keys.markers())
        if known:
            return q
        shards = self.shard_count(name)
        if not shards:
            raise InvalidArgument(f"no queue named {name!r} under prefix {self.prefix!r}")
        return ShardedQueue(name, shards=shards, redis=self.redis, prefix=self.prefix)

    def shard_count(self, name: str) -> int:
        """How many shards the sharded queue ``name`` has (0: none): the count it
        recorded, else (a queue from before the count was kept) the most its keys
        show, a lower bound."""
        stored = stored_shards(self.redis, self.prefix, name)
        if stored is not None:
            return stored
        return sharded_names(Queue.queues(self.redis, self.prefix)).get(name, 0)

    def holder(self, name: str, job_id: str) -> tuple[Queue, Job]:
        """The queue (or shard) that holds ``job_id``, and the job; JobNotFound if none.

        A shard that never held a job has no keys, so the shard count found may
        be short; an id is therefore looked for in every shard, not shard_of()'s.
        """
        target = self.target(name)
        for part in target.shards if isinstance(target, ShardedQueue) else (target,):
            job = part.get(job_id)
            if job is not None:
                return part, job
        raise JobNotFound(job_id)


def resolve_url(url: str | None) -> tuple[str | None, str]:
    """(the URL given by --url or $LEASEQ_URL, or None; the URL to use).

    An empty --url or $LEASEQ_URL is an error, not a quiet fall back to
    localhost."""
    if url is not None:
        if not url.strip():
            raise InvalidArgument("--url is empty: give a Redis URL such as redis://host:6379/0")
        return url, url
    env = os.environ.get("LEASEQ_URL")
    if env is not None:
        if not env.strip():
            raise InvalidArgument("LEASEQ_URL is set but empty: give a Redis URL or unset it")
        return env, env
    return None, DEFAULT_URL


def _preflight(target: Queue | ShardedQueue) -> None:
    """One read of the queue before a worker starts, so a wrong password, a
    missing ACL permission or an unreachable server ends the command with
    one line instead of a worker that retries forever."""
    target.stats()


pass_ctx = click.make_pass_decorator(_Ctx)
out = Console(highlight=False, soft_wrap=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help=f"Redis URL (else $LEASEQ_URL, else {DEFAULT_URL}); memory:// is an in-process "
    "store; redis+sentinel://HOST,HOST/SERVICE/DB finds the primary through Sentinel.",
)
@click.option("--prefix", default="leaseq", show_default=True, help="Key prefix of the queues.")
@click.version_option(package_name="leaseq")
@click.pass_context
def cli(ctx: click.Context, url: str | None, prefix: str) -> None:
    """leaseq: a job store on Redis built on leases and attempts."""
    ctx.obj = _Ctx(url, prefix)


cli_schedules.register(cli)  # schedule, schedules, unschedule, limits
cli_events.register(cli)  # events


@cli.command()
@click.argument("queue")
@click.argument("handler")
@click.option("--concurrency", "-c", default=4, show_default=True, type=int)
@click.option("--ttl", default=30.0, show_default=True, type=float, help="Lease length, seconds.")
@click.option(
    "--prefetch",
    default=None,
    type=int,
    help="Leases held beyond --concurrency (default: adapts to the job rate).",
)
@click.option("--grace", default=30.0, show_default=True, type=float, help="Seconds for shutdown.")
@click.option("--burst", is_flag=True, help="Return once nothing is pending, due or in flight.")
@click.option(
    "--shards", type=int, default=None, help="Serve a ShardedQueue of N shards (default: found)."
)
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Seconds a handler may run when its job sets no timeout (default: no limit).",
)
@click.option(
    "--processes",
    type=int,
    default=None,
    help="Run N worker processes under a supervisor (CPU-bound handlers scale with cores).",
)
@click.option(
    "--kill-grace",
    type=float,
    default=5.0,
    show_default=True,
    help="With --processes: seconds a handler may stay stuck past its timeout before "
    "its process is killed and replaced.",
)
@click.option("--status-fd", type=int, default=None, hidden=True)  # a supervised child's pipe
@click.option("--log-level", default="INFO", show_default=True)
@click.option(
    "--trace-parent",
    type=click.Choice(TRACE_PARENT_MODES),
    default="link",
    show_default=True,
    help="With opentelemetry installed: each job's span links to its enqueuer's, or is its child.",
)
@pass_ctx
def worker(
    c: _Ctx,
    queue: str,
    handler: str,
    concurrency: int,
    ttl: float,
    prefetch: int | None,
    grace: float,
    burst: bool,
    shards: int | None,
    timeout: float | None,
    processes: int | None,
    kill_grace: float,
    status_fd: int | None,
    log_level: str,
    trace_parent: str,
) -> None:
    """Run HANDLER (module:function, or a module of tasks) on the jobs of QUEUE
    (every shard of a sharded one).

    QUEUE may name several queues: high,default,low serves them in strict
    order (the first with a ready job); high:5,default:3,low:1 weights them.

    With --processes N, a supervisor runs N such workers as child processes,
    restarts one that dies, forwards SIGTERM/SIGINT and kills one whose
    handler is stuck past its timeout (plus --kill-grace)."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise InvalidArgument(
            f"--log-level must be DEBUG, INFO, WARNING or ERROR, not {log_level!r}"
        )
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[stream])
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # so `leaseq worker q mymodule:fn` finds ./mymodule.py
    fn = load_handler(handler)
    # The numbers first, so a bad --ttl is reported as such even with no server.
    _validate.worker_settings(concurrency, ttl, grace, None)
    if prefetch is not None:
        _validate.integer(prefetch, "prefetch", 0, _validate.MAX_CONCURRENCY)
    _validate.timeout_ms(timeout, "--timeout")
    if processes is not None:  # named as the user typed them (Supervisor checks them too)
        _validate.integer(processes, "--processes", 1, 1024)
        _validate.seconds_to_ms(
            kill_grace, "--kill-grace", minimum_ms=0, maximum=_validate.MAX_TIMEOUT
        )
    names, weights = parse_queue_spec(queue)
    targets = [c.producer(name, shards) for name in names]
    target = targets[0]
    if processes is not None:
        extra = [] if prefetch is None else ["--prefetch", str(prefetch)]
        extra += ["--trace-parent", trace_parent]
        extra += click.get_current_context().meta.get(FORWARD, [])  # --log-format, --log-jobs
        sup = Supervisor(
            queue,
            handler,
            processes=processes,
            url=c.url,
            prefix=c.prefix,
            concurrency=concurrency,
            ttl=ttl,
            timeout=timeout,
            grace=grace,
            kill_grace=kill_grace,
            burst=burst,
            shards=shards,
            log_level=log_level,
            extra_args=extra,
            cwd=os.getcwd(),
        )
        for each in targets:
            _preflight(each)
        sys.exit(sup.run())
    # Worker takes any queue with the Queue API; the QueueLike protocol will say so.
    w = Worker(
        cast(Any, target if len(targets) == 1 else targets),
        fn,
        weights=None if len(targets) == 1 else weights,
        concurrency=concurrency,
        ttl=ttl,
        prefetch=prefetch,
        grace=grace,
        trace_parent=trace_parent,
        timeout=timeout,
        on_stuck=None if status_fd is None else report_stuck(status_fd),
    )
    if status_fd is not None:
        watch_parent(w.stop)
    for each in targets:
        _preflight(each)
    kind = f" ({len(target.shards)} shards)" if isinstance(target, ShardedQueue) else ""
    logging.getLogger("leaseq.worker").info(
        "queue=%s job=- attempt=- serving %s%s from %s", queue, handler, kind, _redis.redact(c.url)
    )
    w.run(burst=burst)


@cli.command()
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
    c: _Ctx,
    queue: str,
    payload: str | None,
    path: Any,
    job_id: str | None,
    delay: float | None,
    priority: int,
    max_attempts: int | None,
    kind: str | None,
    timeout: float | None,
    group: str | None,
    unique: str | None,
    shards: int | None,
) -> None:
    """Add one job (PAYLOAD, JSON text) or many (--file, JSON lines). With
    --unique, a job whose KEY is held prints the holder's id."""
    if (payload is None) == (path is None):
        raise click.UsageError("give either a JSON PAYLOAD or --file PATH")
    q = c.producer(queue, shards)
    opts: dict[str, Any] = {
        "delay": delay,
        "priority": priority,
        "max_attempts": max_attempts,
        "kind": kind,
        "timeout": timeout,
        "group": group,
    }
    if unique is not None:
        opts["unique"] = Unique(unique)
    if payload is not None:
        out.print(q.enqueue(_json(payload, "payload"), id=job_id, **opts))
        return
    if job_id is not None:
        raise click.UsageError("--id goes with a single PAYLOAD, not --file")
    # Every line is decoded, parsed and encoded first, so a bad one (not UTF-8,
    # not JSON, too large) is named and nothing is written.
    codec = (q.shards[0] if isinstance(q, ShardedQueue) else q)._core.codec
    items = list(_json_lines(path, codec.encode))
    done = 0
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"enqueue to {queue}", total=len(items))
        for start in range(0, len(items), ENQUEUE_BATCH):
            done += len(q.enqueue_many(items[start : start + ENQUEUE_BATCH], **opts))
            bar.update(task, completed=done)
    out.print(f"enqueued {done} job(s) to {queue}")


def _json(text: str, what: str) -> Any:
    def refuse(name: str) -> Any:
        raise InvalidPayload(
            f"{what} holds {name}: JSON has no NaN or Infinity, and leaseq refuses "
            "non-finite numbers; use null or a string"
        )

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"bad JSON in {what}: {exc}") from None


def _json_lines(stream: Any, check: Any) -> Iterator[Any]:
    """The payloads of a binary stream of UTF-8 JSON lines (blank lines skipped),
    each passed to ``check(payload, "line N")``; an error names the line."""
    for n, raw in enumerate(stream, 1):
        try:
            line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidPayload(
                f"line {n} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                f"column {exc.start + 1}): JSON lines must be UTF-8"
            ) from None
        if line.strip():
            value = _json(line, f"line {n}")
            try:
                check(value, f"line {n}")
            except PayloadTooLarge as exc:
                raise InvalidPayload(f"line {n}: {exc}") from None
            yield value


@cli.command()
@click.argument("queue", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object keyed by queue name.")
@pass_ctx
def stats(c: _Ctx, queue: str | None, as_json: bool) -> None:
    """Counts by state for QUEUE, or for every queue."""
    broken: list[str] = []
    if queue:
        snaps = [c.target(queue).stats()]
    else:
        # A ShardedQueue shows up as one hash tag per shard ({emails#0}, ...):
        # report it once, its shards summed.
        # Every queue's stats in a few pipelined round trips, not one per queue.
        shards = known_queues(c.redis, c.prefix)
        targets: list[Queue | ShardedQueue] = [
            ShardedQueue(n, shards=k, redis=c.redis, prefix=c.prefix) if k else c.queue(n)
            for n, k in sorted(shards.items())
        ]
        snaps = []
        found = stats_many(c.redis, targets)
        for target, got in zip(targets, found, strict=True):
            if isinstance(got, (DamagedKey, ScriptError)):
                # One queue's keys edited by hand: say so, and list the others.
                broken.append(target.name)
                click.echo(f"leaseq: {target.name}: {_redis.redact(str(got))}", err=True)
            elif isinstance(got, Exception):
                raise got
            else:
                snaps.append(got)
    if as_json:
        doc = {}
        for s in snaps:
            body = msgspec.to_builtins(s)
            body.pop("queue")
            doc[s.queue] = body
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    elif not snaps and not broken:
        out.print(f"no queues under prefix {c.prefix!r}")
    elif snaps:
        _stats_table(c, snaps)
    if broken:
        sys.exit(1)  # the others were listed; the damaged ones were named on stderr


def _stats_table(c: _Ctx, snaps: list[Any]) -> None:
    # Fits the terminal (80 columns at least): headers whole, one line a queue,
    # a long queue name shortened in its middle.
    width = _terminal.terminal_width()
    # One header per State, in State order, then the lease and age columns; the
    # legend says what each short head stands for (leaseq.observe.state_style).
    looks = [STYLES[state] for state in State]
    legend = [f"{look.short} = {look.meaning}" for look in looks if look.meaning]
    legend += ["exp = leases expired", "<10s = leases ending within 10 s"]
    legend += ["oldest = age of the pending job next in line"]
    table = _terminal.grid(
        f"leaseq queues ({_redis.redact(c.url)})", textwrap.fill(", ".join(legend), width=79)
    )
    heads = (*(look.short for look in looks), "exp", "<10s", "oldest")
    columns = [
        _terminal.Column("queue", keep="middle", share=0.5, least=10),
        *(_terminal.Column(h, keep=None, justify="right") for h in heads),
    ]
    rows = []
    for s in snaps:
        counts = [str(getattr(s, st)) for st in STATES]
        age = "-" if s.oldest_pending_age is None else _span(s.oldest_pending_age)
        name = f"{s.queue} (paused)" if s.paused else s.queue
        rows.append([name, *counts, str(s.expired), str(s.expiring_soon), age])
    _terminal.fit(table, columns, rows, width)
    out.print(table, width=width)


@cli.command()
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="One JSON object with every field.")
@pass_ctx
def show(c: _Ctx, queue: str, job_id: str, as_json: bool) -> None:
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
    table.add_row("id", job.id)
    table.add_row("queue", job.queue)
    table.add_row("state", job.state.value)
    table.add_row("attempts", f"{job.attempts} of {job.max_attempts}")
    table.add_row("priority", str(job.priority))
    if job.group is not None:
        table.add_row("group", job.group)
    if job.kind:
        table.add_row("kind", job.kind)
    if job.timeout is not None:
        table.add_row("timeout", f"{job.timeout:g} s")
    if job.traceparent:
        table.add_row("traceparent", job.traceparent)
    if job.unique_key is not None:
        table.add_row("unique_key", job.unique_key)
    if job.after is not None:
        table.add_row("after", f"{job.after} (queued behind it: runs once it finishes)")
    if job.progress is not None:
        table.add_row("progress", json.dumps(job.progress))
    if job.flow:
        table.add_row("flow", job.flow)
    _graph_rows(c, queue, job, table)
    for name in ("enqueued_at", "run_at", "claimed_at", "lease_until", "finished_at"):
        value = getattr(job, name)
        if value is not None:
            table.add_row(name, _when(value, now, lease=name == "lease_until"))
    if job.worker:
        table.add_row("worker", job.worker)
    if job.last_error:
        table.add_row("last_error", job.last_error)
    for name, value in job.once.items():
        table.add_row(f"once:{name}", f"at attempt {value}")
    out.print(table)
    if job.failures:
        fails = _terminal.grid("failed attempts (newest 10; UTC, server clock)")
        for header in ("attempt", "failed", "then", "worker", "error"):
            fails.add_column(header, overflow="fold", no_wrap=header != "error")
        for f in job.failures:
            stamp = utc(f.failed_at)
            when = stamp.strftime("%m-%d %H:%M:%S") if stamp else "?"
            fails.add_row(str(f.attempt), when, f.to, f.worker or "", f.error)
        out.print(fails)
    if job.traceback:
        out.print("[bold]traceback[/bold] (of the last failure)")
        out.print(Text(job.traceback))
    out.print("[bold]payload[/bold]")
    out.print(_pretty(job.payload))
    if job.result is not None:
        out.print("[bold]result[/bold]")
        out.print(_pretty(job.result))


def _state_of(target: Any, job_id: str) -> str:
    """A related job's state for ``show``: 'gone', or 'damaged' for a row that will not read."""
    try:
        row = target.get(job_id)
    except (DamagedRow, DamagedKey):
        return "damaged"
    return row.state.value if row else "gone"


def _graph_rows(c: _Ctx, queue: str, job: Any, table: Table) -> None:
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


@cli.command(name="wait")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait.")
@pass_ctx
def wait_(c: _Ctx, queue: str, job_id: str, timeout: float) -> None:
    """Wait until job ID finishes; print it as JSON. Exit 0 only if it succeeded
    (1: dead or cancelled, 2: still unfinished at --timeout)."""
    part, _ = c.holder(queue, job_id)
    job = part.wait(job_id, timeout=timeout)
    if job is None:
        click.echo(json.dumps({"id": job_id, "state": None, "finished": False}))
        sys.exit(2)
    click.echo(json.dumps(_terminal.job_doc(job), default=repr))
    if job.state is not State.SUCCEEDED:
        sys.exit(1)


@cli.command(name="ls")
@click.argument("queue")
@click.option("--state", type=click.Choice(STATES), default="pending", show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON array of jobs (as show --json).")
@pass_ctx
def ls_(c: _Ctx, queue: str, state: str, offset: int, limit: int, as_json: bool) -> None:
    """List jobs in one state, a page at a time."""
    target = c.target(queue)
    total = getattr(target.stats(), state)
    damaged: list[DamagedRow] = []
    jobs = target.ls(state, offset=offset, limit=limit, damaged=damaged)
    if as_json:
        click.echo(json.dumps([_terminal.job_doc(j) for j in jobs], indent=2, sort_keys=True))
        for exc in damaged:  # stdout stays one JSON document
            click.echo(f"leaseq: warning: damaged row: {exc}", err=True)
        return
    # Fits the terminal: one line a job, headers whole; a long id keeps its
    # start and end (order-2026-…-0042), the text cells their start. Where
    # jobs failed, the error message gets the room; a column that is the same
    # nothing on every row (priority 0, no worker, no error) is left out.
    width = _terminal.terminal_width()
    failed = any(j.last_error for j in jobs)
    columns = [
        _terminal.Column("id", keep="middle", share=0.45, least=20),
        _terminal.Column("attempts", keep=None),
        _terminal.Column("priority", keep=None),
        _terminal.Column("group", keep="end", least=6),
        _terminal.Column("worker", keep="middle"),
        _terminal.Column("error", least=10, share=0.3 if failed else 0.0, first=True),
        _terminal.Column("payload", least=7),
    ]
    rows = [_row(j) for j in jobs]
    blank = {"priority": "0", "group": "", "worker": "", "error": ""}
    drop = set() if state in ("active", "pending") else {"worker"}  # on `show`; room for the error
    keep = [
        i
        for i, col in enumerate(columns)
        if col.header not in drop
        and (col.header not in blank or any(r[i] != blank[col.header] for r in rows))
    ]
    table = _terminal.fit(
        _terminal.grid(f"{queue}: {state} ({total})"),
        [columns[i] for i in keep],
        [[r[i] for i in keep] for r in rows],
        width,
    )
    out.print(table, width=width)
    for exc in damaged:  # an operator should see these, not lose the page to them
        out.print(f"damaged row: {exc}")
    if offset + len(jobs) + len(damaged) < total:
        shown = offset + len(jobs) + len(damaged)
        out.print(f"showing {offset + 1}-{shown} of {total}; next page: --offset {shown}")


@cli.command()
@click.argument("queue")
@click.argument("job_id", metavar="[ID]", required=False)
@click.option("--all-dead", is_flag=True, help="Retry every dead job of the queue.")
@click.option("--attempts", type=int, default=None, help="More tries to allow (default: queue's).")
@click.option("--payload", default=None, help="A new payload (JSON) for the job: edit, then retry.")
@pass_ctx
def retry(
    c: _Ctx,
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
        done = c.target(queue).retry_all_dead(attempts=attempts)
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
        limit = part.retry_dead(job_id, attempts=attempts, payload=_json(payload, "--payload"))
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


@cli.command()
@click.argument("queue")
@pass_ctx
def reap(c: _Ctx, queue: str) -> None:
    """Hand back every expired lease of QUEUE."""
    requeued, died = c.target(queue).reap()  # a sharded queue reaps every shard
    out.print(f"reaped {queue}: {requeued} returned to pending, {died} dead-lettered")


@cli.command()
@click.argument("queue")
@click.option("--state", type=click.Choice([s for s in STATES if s != "active"]), required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def purge(c: _Ctx, queue: str, state: str, yes: bool) -> None:
    """Delete every job of QUEUE in STATE."""
    target = c.target(queue)
    count = getattr(target.stats(), state)
    if not yes:
        click.confirm(f"delete {count} {state} job(s) from {queue}?", abort=True, err=True)
    gone = target.purge(state)
    out.print(f"purged {gone} {state} job(s) from {queue}")


@cli.command()
@click.option("--jobs", type=click.IntRange(2, 1000), default=12, show_default=True)
@pass_ctx
def demo(c: _Ctx, jobs: int) -> None:
    """Enqueue jobs, run workers, crash one mid-job, watch the job come back."""
    from leaseq.cli.demo import run_demo

    # --url or $LEASEQ_URL, else a fresh embedded store per run (so a second
    # demo in one process starts clean).
    run_demo(c.explicit_url or f"memory://demo-{uuid.uuid4().hex[:8]}", jobs, c.prefix, out)


_register_ops(cli)  # pause, resume, cancel, update, delete, drop, web: leaseq/cli/ops.py
cli.add_command(_doctor)  # leaseq/cli/doctor.py


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"leaseq: error: {_redis.redact(message)}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning every expected error into one line."""
    warnings.showwarning = _show_warning
    try:
        cli.main(args=argv, prog_name="leaseq", standalone_mode=False)
    except click.exceptions.Abort:
        _fail("aborted")
    except click.exceptions.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "), exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (LeaseqError, ValueError, LookupError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("LEASEQ_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (LEASEQ_DEBUG=1 shows the traceback)")
