"""CLI commands for schedules and limits: a thin client of ``leaseq.Queue``.

``register(group)`` adds ``schedule``, ``schedules``, ``unschedule`` and
``limits`` to the ``leaseq`` click group. The group's context object (the
``Ctx`` of ``leaseq.cli.context``) gives the client, prefix and URL; errors are
raised as leaseq errors and printed as one line by ``leaseq.cli.main``.
"""

from __future__ import annotations

import json
from typing import Any

import click
import msgspec
from rich.console import Console

from leaseq.cli.terminal import Column, fit, grid, terminal_width
from leaseq.errors import InvalidArgument
from leaseq.observe.humanize import utc
from leaseq.queue import Queue
from leaseq.store.schedules import Schedule
from leaseq.types import Unique

__all__ = ["register"]

out = Console(highlight=False, soft_wrap=True)


def _ctx() -> Any:
    return click.get_current_context().obj


def _queue(name: str) -> Queue:
    c = _ctx()
    return Queue(name, redis=c.redis, prefix=c.prefix)


def _at(t: float | None, now: float) -> str:
    """``12-01 03:00:00 (in 17h)``: UTC on the server clock, short enough for 80 columns."""
    if t is None:
        return "-"
    stamp = utc(t)
    when = "out of range" if stamp is None else stamp.strftime("%m-%d %H:%M:%S")
    return f"{when} ({_ago(t, now)})"


def _ago(t: float | None, now: float) -> str:
    """``in 17h`` or ``3m ago`` (``-`` for never)."""
    if t is None:
        return "-"
    gap = abs(t - now)
    if gap < 120:
        span = f"{gap:.0f}s"
    elif gap < 7200:
        span = f"{gap / 60:.0f}m"
    else:
        span = f"{gap / 3600:.0f}h"
    return "in " + span if t > now else span + " ago"


def _rule(s: Schedule) -> str:
    if s.cron is not None:
        return f"cron {s.cron}" + (f" {s.tz}" if s.tz else " UTC")
    if s.every is None:  # neither reads: a hash edited by hand (tick parks it)
        return "unreadable"
    return f"every {s.every:g} s"


@click.command()
@click.argument("queue")
@click.argument("name")
@click.argument("payload")
@click.option("--cron", default=None, metavar="EXPR", help="Cron expression (5 or 6 fields).")
@click.option("--tz", default=None, metavar="TZ", help="Time zone of --cron (default UTC).")
@click.option("--every", default=None, type=float, metavar="SECONDS", help="Fixed interval.")
@click.option("--max-attempts", default=None, type=int, help="Attempts of each job it makes.")
@click.option(
    "--kind", default=None, help="Kind of each job (a worker's handler dict picks by it)."
)
@click.option("--group", default=None, help="Fair group of each job it makes.")
@click.option("--priority", default=0, type=int, help="0..1000000, lower first.")
@click.option("--timeout", default=None, type=float, help="Seconds a handler may run on each.")
@click.option(
    "--unique",
    default=None,
    metavar="KEY",
    help="Skip a due time while the previous job holding KEY is unfinished.",
)
def schedule(
    queue: str,
    name: str,
    payload: str,
    cron: str | None,
    tz: str | None,
    every: float | None,
    max_attempts: int | None,
    kind: str | None,
    group: str | None,
    priority: int,
    timeout: float | None,
    unique: str | None,
) -> None:
    """Create or change the schedule NAME of QUEUE (PAYLOAD is JSON); each job it
    makes gets the job options given (as ``leaseq enqueue`` takes them)."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise InvalidArgument(f"PAYLOAD is not JSON: {exc}") from None
    q = _queue(queue)
    s = q.schedule(
        name,
        data,
        cron=cron,
        tz=tz,
        every=every,
        max_attempts=max_attempts,
        kind=kind,
        group=group,
        priority=priority,
        timeout=timeout,
        unique=None if unique is None else Unique(unique),
    )
    now = q.stats().server_time
    out.print(f"scheduled {name} on {queue}: {_rule(s)}; next due {_at(s.next_due, now)}")


@click.command()
@click.argument("queue", required=False)
@click.option("--json", "as_json", is_flag=True, help="A JSON object keyed by queue name.")
def schedules(queue: str | None, as_json: bool) -> None:
    """The schedules of QUEUE, or of every queue."""
    c = _ctx()
    names = [queue] if queue else [n for n in Queue.queues(c.redis, c.prefix) if "#" not in n]
    found = {n: _queue(n).schedules() for n in names}
    if as_json:
        doc = {n: [msgspec.to_builtins(s) for s in ss] for n, ss in found.items() if ss}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    rows = [s for ss in found.values() for s in ss]
    if not rows:
        out.print("no schedules" + (f" on {queue}" if queue else ""))
        return
    now = _queue(rows[0].queue).stats().server_time
    width = terminal_width()
    # At 80 columns the floors below add up to the room of six columns: a name
    # gets the room before the other text grows, so one that fits is whole; a
    # time due is whole (23 cells), a parked schedule's reason in its place is
    # cut; "fired" is how long ago it last fired (its date, and how many times
    # it fired, are in --json and on the dashboard's schedules page). One
    # queue's schedules name it in the title instead of in a column.
    one = len({s.queue for s in rows}) == 1
    columns = [
        Column("name", keep="middle", least=8, first=True),
        Column("kind", keep="middle", least=10),
        Column("rule", least=12),
        Column("next due", least=23),
        Column("fired", least=7),
    ]
    if not one:
        columns.insert(0, Column("queue", keep="middle", least=10))
    cells = []
    for s in rows:
        nxt = s.error or "-" if s.next_due is None else _at(s.next_due, now)
        row = [s.name, s.kind or "-", _rule(s), nxt, _ago(s.last_fired, now)]
        cells.append(row if one else [s.queue, *row])
    title = "leaseq schedules" + (f" of {rows[0].queue}" if one else "")
    table = fit(grid(f"{title} (server clock, UTC)"), columns, cells, width)
    out.print(table, width=width)


@click.command()
@click.argument("queue")
@click.argument("name")
def unschedule(queue: str, name: str) -> None:
    """Remove the schedule NAME of QUEUE (jobs it already made stay)."""
    if not _queue(queue).unschedule(name):
        raise click.ClickException(f"no schedule named {name!r} on {queue}")
    out.print(f"removed schedule {name} from {queue}")


@click.command()
@click.argument("queue")
@click.option("--concurrency", type=click.IntRange(0), default=None, help="Most active leases.")
@click.option("--rate", type=click.IntRange(0), default=None, help="Most claims per --per.")
@click.option("--per", type=float, default=None, metavar="SECONDS", help="The rate's span.")
@click.option(
    "--group-concurrency",
    type=click.IntRange(0),
    default=None,
    help="Most active leases per fair group.",
)
@click.option("--group-rate", type=click.IntRange(0), default=None, help="Most claims per group.")
@click.option("--group-per", type=float, default=None, metavar="SECONDS", help="Its span.")
@click.option("--cost-rate", type=float, default=None, help="Most cost claimed per --cost-per.")
@click.option("--cost-per", type=float, default=None, metavar="SECONDS", help="Its span.")
@click.option("--group-cost-rate", type=float, default=None, help="Most cost per group.")
@click.option("--group-cost-per", type=float, default=None, metavar="SECONDS", help="Its span.")
@click.option(
    "--group",
    "group_name",
    default=None,
    metavar="NAME",
    help="Set --concurrency, --rate/--per, --cost-rate/--cost-per for this one fair group.",
)
@click.option("--clear", is_flag=True, help="Remove every limit.")
@click.option("--json", "as_json", is_flag=True, help="Print the limits as JSON.")
def limits(queue: str, group_name: str | None, clear: bool, as_json: bool, **given: Any) -> None:
    """Show or change the limits of QUEUE (0 removes one limit). Per fair group:
    --group-concurrency, --group-rate/--group-per, --group-cost-rate/--group-cost-per;
    one group's own limits: --group NAME with --concurrency, --rate/--per,
    --cost-rate/--cost-per."""
    q = _queue(queue)
    if clear and any(x is not None for x in given.values()):
        raise InvalidArgument("--clear takes no other limit")
    if group_name is not None:
        if clear or any(given[k] is not None for k in given if k.startswith("group_")):
            raise InvalidArgument(
                "--group NAME takes --concurrency, --rate/--per and --cost-rate/--cost-per only"
            )
        changes = _changes(given, ("concurrency",), ("rate", "cost_rate"))
        got = q.set_group_limits(group_name, **changes) if changes else q.limits()
        _print_limits(queue, got, as_json)
        return
    if clear:
        given = {k: 0 if not k.endswith("per") else None for k in given}
    changes = _changes(
        given,
        ("concurrency", "group_concurrency"),
        ("rate", "group_rate", "cost_rate", "group_cost_rate"),
    )
    got = q.set_limits(**changes) if changes else q.limits()
    _print_limits(queue, got, as_json)


def _changes(
    given: dict[str, Any], counts: tuple[str, ...], rates: tuple[str, ...]
) -> dict[str, Any]:
    """The keyword arguments of ``set_limits`` for the options given: a count or a
    rate of 0 removes that limit; a span goes with its rate (``--per`` with ``--rate``)."""
    changes: dict[str, Any] = {}
    for name in counts:
        if given[name] is not None:
            changes[name] = given[name] or None
    for rate_name in rates:
        per_name = rate_name.removesuffix("rate") + "per"
        rate, per = given[rate_name], given[per_name]
        if rate is not None:
            changes[rate_name] = rate or None
            if rate and per is not None:
                changes[per_name] = per
        elif per is not None:
            flag = "--" + per_name.replace("_", "-")
            raise InvalidArgument(f"{flag} goes with --{rate_name.replace('_', '-')}")
    return changes


def _print_limits(queue: str, got: Any, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(msgspec.to_builtins(got), indent=2, sort_keys=True))
        return
    conc = "none" if got.concurrency is None else f"{got.concurrency} ({got.active} active now)"
    rated = (
        "none"
        if got.rate is None
        else f"{got.rate} per {got.per:g} s ({got.recent_claims} in the last {got.per:g} s)"
    )
    costed = (
        "none"
        if got.cost_rate is None
        else f"{got.cost_rate:g} per {got.cost_per:g} s ({got.recent_cost:g} in the last "
        f"{got.cost_per:g} s)"
    )
    grouped = (
        "none"
        if got.group_concurrency is None
        else f"{got.group_concurrency} (busiest group {got.busiest_group} active, "
        f"{got.groups_held} groups held)"
    )
    group_rated = "none" if got.group_rate is None else f"{got.group_rate} per {got.group_per:g} s"
    group_costed = (
        "none"
        if got.group_cost_rate is None
        else f"{got.group_cost_rate:g} per {got.group_cost_per:g} s"
    )
    out.print(
        f"{queue}: concurrency {conc}; rate {rated}; cost {costed}; group concurrency "
        f"{grouped}; group rate {group_rated}; group cost {group_costed}"
    )
    for name, own in got.groups.items():
        out.print(f"  group {name}: {own.describe()}")


def register(group: click.Group) -> None:
    """Add this module's commands to the ``leaseq`` group."""
    for command in (schedule, schedules, unschedule, limits):
        group.add_command(command)
