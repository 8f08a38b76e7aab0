"""Operator commands of the ``leaseq`` CLI: pause, resume, cancel, update, signal, delete,
drop, web, workers.

They are registered on the main click group by ``register`` (one line in
``leaseq.cli.main``) and reach the queue through the group's context object (its
``queue``, ``target``, ``holder``, ``redis``, ``prefix`` and ``url``), so
this module never imports ``leaseq.cli.main`` and stays a thin client of the
public Queue API.
"""

from __future__ import annotations

import functools
import json
import math
import time
from typing import Any

import click
import msgspec
from rich.console import Console

from leaseq.cli.payloads import parse_json
from leaseq.cli.terminal import Column, fit, grid, span, terminal_width
from leaseq.errors import DamagedRow, InvalidArgument, ServerUnavailable
from leaseq.queue_set import parse_queue_spec
from leaseq.sharded import ShardedQueue, stats_many
from leaseq.store.durable import SIGNAL_KEEP
from leaseq.transport import client as _redis

__all__ = ["register"]


def _parts(target: Any) -> list[Any]:
    """The plain queues behind a Queue or a ShardedQueue."""
    return list(getattr(target, "shards", None) or [target])


@click.command()
@click.argument("queue")
@click.pass_obj
def pause(c: Any, queue: str) -> None:
    """Stop QUEUE handing out jobs (enqueue still works; leases in flight finish)."""
    changed = [part.pause() for part in _parts(c.target(queue))]
    word = "paused" if any(changed) else "was already paused"
    click.echo(f"{queue} {word}: workers lease nothing until `leaseq resume {queue}`")


@click.command()
@click.argument("queue")
@click.pass_obj
def resume(c: Any, queue: str) -> None:
    """Let a paused QUEUE hand out jobs again."""
    changed = [part.resume() for part in _parts(c.target(queue))]
    click.echo(f"{queue} {'resumed' if any(changed) else 'was not paused'}")


@click.command()
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.pass_obj
def cancel(c: Any, queue: str, job_id: str) -> None:
    """Cancel a job that has not finished: it will never run (again). A waiting job
    never runs; a running job's lease is lost at once; its worker stops it at its
    next heartbeat."""
    part, job = c.holder(queue, job_id)
    now = part.cancel(job_id)
    if not now:
        click.echo(f"job {job_id} was already cancelled")
    elif job.state.value == "active":
        click.echo(
            f"job {job_id} cancelled while running (attempt {job.attempts}): its worker "
            "stops it at its next heartbeat"
        )
    else:
        click.echo(f"job {job_id} cancelled")


@click.command()
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.argument("payload")
@click.pass_obj
def update(c: Any, queue: str, job_id: str, payload: str) -> None:
    """Replace the PAYLOAD (JSON) of a job that has not started. The old payload
    is kept in the event stream entry of the change (leaseq events)."""
    part, _ = c.holder(queue, job_id)
    part.update(job_id, payload=parse_json(payload, "PAYLOAD"))
    click.echo(f"job {job_id} updated (the old payload is in the event stream)")


@click.command()
@click.argument("queue")
@click.argument("key")
@click.argument("payload", required=False)
@click.option(
    "--keep",
    type=float,
    default=SIGNAL_KEEP,
    show_default=True,
    help="Seconds the signal is kept for jobs that wait for KEY later (0: none).",
)
@click.pass_obj
def signal(c: Any, queue: str, key: str, payload: str | None, keep: float) -> None:
    """Send the signal KEY: resume every job of QUEUE waiting for it
    (current_job().wait_for), its wait returning PAYLOAD (JSON; default null)."""
    value = None if payload is None else parse_json(payload, "PAYLOAD")
    try:
        target = c.target(queue)
        new = ""
    except InvalidArgument:  # a signal may come before any job of its queue
        target = c.queue(queue)
        new = f" (no queue {queue} yet: check its name)"
    resumed = target.signal(key, value, keep=keep)
    kept = f"; kept {keep:g} s for later waiters" if keep else ""
    click.echo(f"signal {key} resumed {resumed} job(s){kept}{new}")


@click.command()
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def delete(c: Any, queue: str, job_id: str, yes: bool) -> None:
    """Delete one job (its row and index entry); not while it holds a lease.
    A row damaged by hand goes too (that is often why it is being deleted)."""
    try:
        part, job = c.holder(queue, job_id)
        what = job.state.value
    except DamagedRow as exc:
        target = c.target(queue)
        part = target.shard_for(job_id) if isinstance(target, ShardedQueue) else target
        what = f"damaged ({exc.field})"
    if not yes:
        click.confirm(f"delete {what} job {job_id} from {queue}?", abort=True, err=True)
    was = part.delete(job_id)
    click.echo(f"deleted {was} job {job_id} from {queue}")


@click.command()
@click.argument("queue")
@click.option("--force", is_flag=True, help="Drop it even with leases in flight.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def drop(c: Any, queue: str, force: bool, yes: bool) -> None:
    """Delete QUEUE: every job in every state, its counters and flags."""
    target = c.target(queue)
    s = target.stats()
    if s.active and not force:
        raise InvalidArgument(
            f"{queue} has {s.active} lease(s) in flight; stop its workers first, "
            "or pass --force (their completions will then find no job)"
        )
    total = sum(s.counts().values())
    if not yes:
        click.confirm(
            f"drop queue {queue}: delete {total} job(s) and its counters?", abort=True, err=True
        )
    gone = sum(part.drop(force=force) for part in _parts(target))
    click.echo(f"dropped {queue}: {gone} job(s) deleted")


LOOPBACK_NAMES = ("127.0.0.1", "localhost")
"""The Host names ``leaseq web`` answers by default when bound to one of them."""


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--allow-actions", is_flag=True, help="Allow retry, cancel, delete, purge, pause (POST)."
)
@click.option(
    "--auth",
    default=None,
    metavar="USER:PASSWORD|TOKEN",
    envvar="LEASEQ_WEB_AUTH",
    help="HTTP basic auth (USER:PASSWORD) or a bearer TOKEN; else $LEASEQ_WEB_AUTH.",
)
@click.option(
    "--allowed-host",
    "allowed",
    multiple=True,
    metavar="NAME",
    help="A Host header name to answer (repeatable). Default on 127.0.0.1/localhost: "
    "those two only (no DNS rebinding); on other addresses: any.",
)
@click.pass_obj
def web(
    c: Any, host: str, port: int, allow_actions: bool, auth: str | None, allowed: tuple[str, ...]
) -> None:
    """Serve the dashboard (needs the web extra: pip install 'leaseq[web]')."""
    try:
        import uvicorn

        from leaseq.web import create_app
    except ImportError as exc:
        raise InvalidArgument(
            f"leaseq web needs the web extra ({exc.name} is missing): pip install 'leaseq[web]'"
        ) from None
    hosts: list[str] | None = list(allowed) or None
    if hosts is None and host in LOOPBACK_NAMES:
        hosts = list(LOOPBACK_NAMES)
    app = create_app(
        c.redis,
        prefix=c.prefix,
        allow_actions=allow_actions,
        auth=auth,
        title=_redis.redact(c.url),
        allowed_hosts=hosts,
        tasks=c.tasks,
    )
    mode = "actions allowed" if allow_actions else "read-only"
    click.echo(f"leaseq web on http://{host}:{port}/ ({mode}) for {_redis.redact(c.url)}", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@click.command()
@click.argument("queue", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object keyed by queue name.")
@click.pass_obj
def workers(c: Any, queue: str | None, as_json: bool) -> None:
    """Workers alive on QUEUE, or on every queue (each row lives a few heartbeats)."""
    from leaseq.sharded import known_queues

    if queue:
        found = {queue: c.target(queue).workers()}
    else:
        found = {}
        for name, shards in sorted(known_queues(c.redis, c.prefix).items()):
            q = (
                ShardedQueue(name, shards=shards, redis=c.redis, prefix=c.prefix)
                if shards
                else (c.queue(name))
            )
            found[name] = q.workers()
    if as_json:
        doc = {name: [msgspec.to_builtins(w) for w in ws] for name, ws in found.items()}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    # A worker of several queues is in each one's registry: one line, naming them all.
    rows = list({w.id: (w.queue or name, w) for name, ws in found.items() for w in ws}.values())
    # Worker ids are host:pid:hex: no emoji codes (":1234:") nor markup in them.
    out = Console(highlight=False, soft_wrap=True, emoji=False, markup=False)
    if not rows:
        out.print(
            f"no workers online under prefix {c.prefix!r}" + (f" on {queue}" if queue else "")
        )
        return
    width = terminal_width()
    table = grid(
        f"leaseq workers ({_redis.redact(c.url)})",
        "up = since started; seen = since its last heartbeat; busy = leases held",
    )
    columns = [
        Column("queue", keep="middle", share=0.25, least=8),
        Column("worker", keep="middle", share=0.5, least=12),
        *(Column(h, keep=None, justify="right") for h in ("conc", "busy", "done", "up", "seen")),
    ]
    cells = [
        [
            name,
            w.id,
            str(w.concurrency),
            str(w.running),
            str(w.done),
            span(w.up),
            span(w.since_seen),
        ]
        for name, w in rows
    ]
    out.print(fit(table, columns, cells, width), width=width)


def _add_watch(command: click.Command) -> None:
    """Give ``leaseq stats`` a ``--watch SECONDS`` option: print it again every
    SECONDS on a cleared screen until Ctrl-C (the command itself is unchanged)."""
    if any(p.name == "watch" for p in command.params) or command.callback is None:
        return
    once = command.callback
    command.params.append(
        click.Option(
            ["--watch"],
            type=click.FloatRange(min=0.2, max=86_400.0),  # also refuses nan and inf
            default=None,
            metavar="SECONDS",
            help="Print again every SECONDS until Ctrl-C.",
        )
    )

    @functools.wraps(once)
    def callback(*args: Any, watch: float | None = None, **kwargs: Any) -> Any:
        if watch is not None and not math.isfinite(watch):  # FloatRange lets NaN through
            raise click.BadParameter(f"{watch} is not a number of seconds", param_hint="--watch")
        if watch is None:
            return once(*args, **kwargs)
        first = True
        try:
            while True:
                click.clear()
                # Only Ctrl-C ends a watch: a server restarting is shown and
                # tried again (the first round lets a wrong URL fail at once), and
                # queues with damaged keys were named on stderr by stats itself.
                try:
                    once(*args, **kwargs)
                except SystemExit:
                    pass
                except ServerUnavailable as exc:
                    if first:
                        raise
                    click.echo(f"leaseq: {_redis.redact(str(exc))}", err=True)
                first = False
                click.echo(f"every {watch:g} s; Ctrl-C to stop", err=True)
                time.sleep(watch)
        except KeyboardInterrupt:
            return None  # the way out of a watch, not an error

    command.callback = callback


def _add_metrics_port(command: click.Command) -> None:
    """Give ``leaseq worker`` ``--metrics-port N`` and ``--metrics-host H``: while it
    runs, an HTTP endpoint on H:N (``leaseq.observe.endpoint``) with Prometheus
    metrics of its queue (from the queue's own counters, see leaseq.observe.metrics)
    and of this worker, its health probes and its queue's backlog for an
    autoscaler. The worker command itself is unchanged."""
    if any(p.name == "metrics_port" for p in command.params) or command.callback is None:
        return
    run = command.callback
    command.params += [
        click.Option(
            ["--metrics-port"],
            type=click.IntRange(1, 65535),
            default=None,
            metavar="PORT",
            help="Serve /metrics (Prometheus), /healthz, /readyz and /scale (the backlog, "
            "for KEDA) of QUEUE and this worker on PORT (needs the web extra).",
        ),
        click.Option(
            ["--metrics-host"],
            default="127.0.0.1",
            show_default=True,
            metavar="HOST",
            help="The address --metrics-port listens on (0.0.0.0 in a container, for "
            "Prometheus and the kubelet's probes).",
        ),
    ]

    @functools.wraps(run)
    def callback(
        *args: Any, metrics_port: int | None = None, metrics_host: str = "127.0.0.1", **kwargs: Any
    ) -> Any:
        if metrics_port is not None:
            _serve_endpoint(str(kwargs["queue"]), metrics_host, metrics_port)
        return run(*args, **kwargs)

    command.callback = callback


def _serve_endpoint(spec: str, host: str, port: int) -> None:
    """Start ``leaseq worker``'s endpoint (``--metrics-port``) for its queues
    (``spec``: the worker's QUEUE argument, ``a,b`` or ``a:2,b:1`` for several)."""
    try:
        from leaseq.observe import endpoint
        from leaseq.observe.metrics import CONTENT_TYPE, live
        from leaseq.observe.worker_metrics import WorkerMetrics, install
    except ImportError as exc:
        raise InvalidArgument(
            f"--metrics-port needs prometheus-client ({exc.name} is missing): "
            "pip install 'leaseq[web]'"
        ) from None
    c = click.get_current_context().obj
    names, _ = parse_queue_spec(spec)

    def target(name: str) -> Any:
        try:  # looked up per scrape: the queue may be created after the worker
            return c.target(name)
        except InvalidArgument:
            return c.queue(name)

    def stats() -> list[Any]:
        # Every queue's in one pipelined read (a damaged one raises its error).
        found = stats_many(c.redis, [target(name) for name in names])
        for got in found:
            if isinstance(got, Exception):
                raise got
        return found

    local = WorkerMetrics()  # the worker made next records into it
    install(local)
    text = live(stats, local)
    try:
        endpoint.serve(host, port, (CONTENT_TYPE, text), stats)
    except OSError as exc:
        raise InvalidArgument(f"--metrics-port: cannot listen on {host}:{port}: {exc}") from None


FORWARD = "leaseq.forward"
"""click ``Context.meta`` key: worker options the supervisor hands to its children."""


def _add_log_options(command: click.Command) -> None:
    """Give ``leaseq worker`` ``--log-format text|json`` (json: one object per line,
    see leaseq.observe.logs) and ``--log-jobs`` (an INFO line per finished job)."""
    if any(p.name == "log_format" for p in command.params) or command.callback is None:
        return
    run = command.callback
    command.params += [
        click.Option(
            ["--log-format"],
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
            help="json: one object per line (time, level, queue, job_id, attempt, ...).",
        ),
        click.Option(
            ["--log-jobs"], is_flag=True, help="Log a line per finished job (outcome, duration)."
        ),
    ]

    @functools.wraps(run)
    def callback(
        *args: Any, log_format: str = "text", log_jobs: bool = False, **kwargs: Any
    ) -> Any:
        import logging
        import sys

        from leaseq.observe.logs import JobLog, JsonFormatter
        from leaseq.observe.observer import install

        if log_format == "json":
            # Set up before the worker command does: basicConfig there then
            # leaves this handler in place.
            stream = logging.StreamHandler(sys.stderr)
            stream.setFormatter(JsonFormatter())
            root = logging.getLogger()
            root.handlers[:] = [stream]
            level = logging.getLevelName(str(kwargs.get("log_level", "INFO")).upper())
            if isinstance(level, int):
                root.setLevel(level)
        if log_jobs:
            install(JobLog())
        # With --processes the jobs run in child workers: they get the same options.
        forward = click.get_current_context().meta.setdefault(FORWARD, [])
        forward += ["--log-format", log_format] + (["--log-jobs"] if log_jobs else [])
        return run(*args, **kwargs)

    command.callback = callback


def register(group: click.Group) -> None:
    """Add the operator commands to the ``leaseq`` group (and ``stats --watch``)."""
    for command in (pause, resume, cancel, update, signal, delete, drop, web, workers):
        group.add_command(command)
    if "stats" in group.commands:
        _add_watch(group.commands["stats"])
    if "worker" in group.commands:
        _add_metrics_port(group.commands["worker"])
        _add_log_options(group.commands["worker"])
