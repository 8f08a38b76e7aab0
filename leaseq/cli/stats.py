"""``leaseq stats``: counts by state of one queue or of every queue, a table that
fits the terminal or one JSON object."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import Any

import click
import msgspec

from leaseq.cli import terminal as _terminal
from leaseq.cli.context import STATES, Ctx, out, pass_ctx
from leaseq.cli.terminal import span as _span
from leaseq.errors import DamagedKey, ScriptError
from leaseq.observe.state_style import STYLES
from leaseq.queue import Queue
from leaseq.queue_set import parse_queue_spec
from leaseq.sharded import ShardedQueue, known_queues, stats_many
from leaseq.transport import client as _redis
from leaseq.types import State, Stats

__all__ = ["stats"]


@click.command()
@click.argument("queues", nargs=-1, metavar="[QUEUE]...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object keyed by queue name.")
@pass_ctx
def stats(c: Ctx, queues: tuple[str, ...], as_json: bool) -> None:
    """Counts by state for each QUEUE, or for every queue. Several queues are
    given apart (a b) or as `leaseq worker` takes them (a,b; weights are read
    past)."""
    names = list(dict.fromkeys(n for spec in queues for n in parse_queue_spec(spec)[0]))
    targets: list[Queue | ShardedQueue]
    if names:  # each checked first: an unknown name is the one error line
        targets = [c.target(name) for name in names]
    else:
        # A ShardedQueue shows up as one hash tag per shard ({emails#0}, ...):
        # report it once, its shards summed.
        shards = known_queues(c.redis, c.prefix)
        targets = [
            ShardedQueue(n, shards=k, redis=c.redis, prefix=c.prefix) if k else c.queue(n)
            for n, k in sorted(shards.items())
        ]
    snaps, broken = _read(c, targets)
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


def _read(c: Ctx, targets: list[Queue | ShardedQueue]) -> tuple[list[Stats], list[str]]:
    """Every target's stats in a few pipelined round trips (not one per queue),
    and the names of those whose keys were edited by hand: each named on stderr,
    the others listed."""
    snaps, broken = [], []
    for target, got in zip(targets, stats_many(c.redis, targets), strict=True):
        if isinstance(got, (DamagedKey, ScriptError)):
            broken.append(target.name)
            click.echo(f"leaseq: {target.name}: {_redis.redact(str(got))}", err=True)
        elif isinstance(got, Exception):
            raise got
        else:
            snaps.append(got)
    return snaps, broken


def _stats_table(c: Ctx, snaps: list[Any]) -> None:
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
