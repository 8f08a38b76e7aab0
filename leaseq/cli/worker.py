"""``leaseq worker``: run a handler on the jobs of one queue or several, in this
process or, with ``--processes``, in children under a supervisor."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, cast

import click

from leaseq.cli.context import Ctx, pass_ctx
from leaseq.cli.ops import FORWARD
from leaseq.cli.terminal import RedactingFormatter
from leaseq.errors import InvalidArgument
from leaseq.handler import check_spec, load_handler
from leaseq.observe.tracing import TRACE_PARENT_MODES
from leaseq.queue import Queue
from leaseq.queue_set import parse_queue_spec
from leaseq.sharded import ShardedQueue
from leaseq.store import validate as _validate
from leaseq.supervisor import Supervisor, report_stuck, watch_parent
from leaseq.transport import client as _redis
from leaseq.work.tasks import queues_of_module
from leaseq.worker import Worker

__all__ = ["worker"]


@click.command()
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
@click.option(
    "--burst",
    is_flag=True,
    help="Return once nothing is claimable or in flight (docs/testing.md: what --burst means).",
)
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
    help="With --processes: seconds a handler may run on after its job was given up "
    "(past its timeout, or cancelled) before its process is killed and replaced.",
)
@click.option(
    "--asyncio",
    "use_asyncio",
    is_flag=True,
    help="Run leaseq.aio.Worker on one event loop: async def handlers share it with "
    "the aio queues and clients their module made (leaseq.aio.Queue tasks).",
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
def worker(c: Ctx, /, queue: str, handler: str, **options: Any) -> None:
    """Run HANDLER (module:function, or a module of tasks) on the jobs of QUEUE
    (every shard of a sharded one).

    QUEUE may name several queues: high,default,low serves them in strict
    order (the first with a ready job); high:5,default:3,low:1 weights them.

    With --processes N, a supervisor runs N such workers as child processes,
    restarts one that dies, forwards SIGTERM/SIGINT and kills one whose
    handler runs on after its job was given up: past its timeout, or cancelled
    (plus --kill-grace)."""
    o = _Options(**options)
    _log_to_stderr(o.log_level)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # so `leaseq worker q mymodule:fn` finds ./mymodule.py
    fn = load_handler(handler)
    # The numbers first, so a bad --ttl is reported as such even with no server.
    _check_numbers(o)
    names, weights = parse_queue_spec(queue)
    _check_tasks_queue(handler, names)
    targets = [c.producer(name, o.shards) for name in names]
    if o.processes is not None:
        sys.exit(_supervise(c, o, o.processes, queue, handler, targets))
    settings: dict[str, Any] = {
        "weights": None if len(targets) == 1 else weights,
        "concurrency": o.concurrency,
        "ttl": o.ttl,
        "prefetch": o.prefetch,
        "grace": o.grace,
        "trace_parent": o.trace_parent,
        "timeout": o.timeout,
        "on_stuck": None if o.status_fd is None else report_stuck(o.status_fd),
    }
    _preflight(targets)
    kind = f" ({len(targets[0].shards)} shards)" if isinstance(targets[0], ShardedQueue) else ""
    logging.getLogger("leaseq.worker").info(
        "queue=%s job=- attempt=- serving %s%s from %s", queue, handler, kind, _redis.redact(c.url)
    )
    if o.use_asyncio:
        asyncio.run(_serve_async(c, targets, fn, settings, o))
        return
    # Worker takes any queue with the Queue API; the QueueLike protocol will say so.
    w = Worker(cast(Any, targets[0] if len(targets) == 1 else targets), fn, **settings)
    if o.status_fd is not None:
        watch_parent(w.stop)
    w.run(burst=o.burst)


async def _serve_async(
    c: Ctx, targets: list[Queue | ShardedQueue], fn: Any, settings: dict[str, Any], o: _Options
) -> None:
    """``leaseq worker --asyncio``: ``aio.Worker`` on this process's one event loop,
    on aio twins of the queues, stopped by SIGTERM/SIGINT as ``Worker`` is."""
    import leaseq.aio

    served = [
        leaseq.aio.ShardedQueue.from_url(c.url, t.name, shards=len(t.shards), prefix=c.prefix)
        if isinstance(t, ShardedQueue)
        else leaseq.aio.Queue.from_url(c.url, t.name, prefix=c.prefix)
        for t in targets
    ]
    w = leaseq.aio.Worker(
        served[0] if len(served) == 1 else served, fn, **settings, handle_signals=True
    )
    if o.status_fd is not None:
        watch_parent(w.stop)
    try:
        await w.run(burst=o.burst)
    finally:
        for q in served:
            await q.close()


def _check_tasks_queue(handler: str, names: list[str]) -> None:
    """A module of typed tasks is served on its tasks' queue: on another, the
    worker would sit idle, or take other apps' jobs and spend their attempts on
    UnknownKind. Raises InvalidArgument naming the queues its tasks use."""
    module_name, sep, _ = check_spec(handler)
    own = set() if sep else queues_of_module(sys.modules[module_name])
    if own and not own & set(names):
        raise InvalidArgument(
            f"{module_name} defines tasks of queue {', '.join(sorted(own))}, and this "
            f"worker serves {', '.join(names)}: their jobs are enqueued on "
            f"{'that queue' if len(own) == 1 else 'those queues'}, so serve it"
        )


@dataclass(frozen=True)
class _Options:
    """The command's options, as click parsed them (their help is on the command)."""

    concurrency: int
    ttl: float
    prefetch: int | None
    grace: float
    burst: bool
    shards: int | None
    timeout: float | None
    processes: int | None
    kill_grace: float
    use_asyncio: bool
    status_fd: int | None
    log_level: str
    trace_parent: str


def _log_to_stderr(log_level: str) -> None:
    """Log lines (passwords redacted) on stderr from ``log_level`` up."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise InvalidArgument(
            f"--log-level must be DEBUG, INFO, WARNING or ERROR, not {log_level!r}"
        )
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[stream])


def _check_numbers(o: _Options) -> None:
    """Every number of the command checked, named as the user typed it."""
    _validate.worker_settings(o.concurrency, o.ttl, o.grace, None)
    if o.prefetch is not None:
        _validate.integer(o.prefetch, "prefetch", 0, _validate.MAX_CONCURRENCY)
    _validate.timeout_ms(o.timeout, "--timeout")
    if o.processes is not None:  # named as the user typed them (Supervisor checks them too)
        _validate.integer(o.processes, "--processes", 1, 1024)
        _validate.seconds_to_ms(
            o.kill_grace, "--kill-grace", minimum_ms=0, maximum=_validate.MAX_TIMEOUT
        )


def _supervise(
    c: Ctx,
    o: _Options,
    processes: int,
    queue: str,
    handler: str,
    targets: list[Queue | ShardedQueue],
) -> int:
    """Run ``processes`` workers as children under a Supervisor; its exit code."""
    extra = [] if o.prefetch is None else ["--prefetch", str(o.prefetch)]
    extra += ["--trace-parent", o.trace_parent]
    extra += ["--asyncio"] if o.use_asyncio else []
    extra += click.get_current_context().meta.get(FORWARD, [])  # --log-format, --log-jobs
    sup = Supervisor(
        queue,
        handler,
        processes=processes,
        url=c.url,
        prefix=c.prefix,
        concurrency=o.concurrency,
        ttl=o.ttl,
        timeout=o.timeout,
        grace=o.grace,
        kill_grace=o.kill_grace,
        burst=o.burst,
        shards=o.shards,
        log_level=o.log_level,
        extra_args=extra,
        cwd=os.getcwd(),
    )
    _preflight(targets)  # before any child starts
    return sup.run()


def _preflight(targets: list[Queue | ShardedQueue]) -> None:
    """One read of each queue before a worker starts, so a wrong password, a
    missing ACL permission or an unreachable server ends the command with
    one line instead of a worker that retries forever."""
    for each in targets:
        each.stats()
