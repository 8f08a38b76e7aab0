"""``leaseq events``: print or follow a queue's event stream, or switch it.

A thin client of ``Queue.events`` / ``set_events`` / ``event_settings``: one
line per transition, 80 columns wide (a longer job id is cut, ``--json``
prints it whole), ``--follow`` tails until Ctrl-C, which exits 0.
"""

from __future__ import annotations

import collections
import itertools
import math
import signal
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import click
import msgspec

from leaseq.errors import InvalidArgument, LeaseqError, ServerUnavailable
from leaseq.observe.redact import redact
from leaseq.queue import Queue
from leaseq.store.events import Event, EventSettings

__all__ = ["line", "register"]

WIDTH = 80
RETRY = 1.0
"""Seconds between tries while the server is down under --follow."""
_encode = msgspec.json.Encoder()


def _ctx() -> Any:
    return click.get_current_context().obj


def line(event: Event, width: int = WIDTH) -> str:
    """``01-02 03:04:05.123  pending   -> active     #1  <job id>`` (UTC, server clock).

    The from-state ``-`` is an enqueue (no row before), the to-state ``deleted``
    a delete, purge or drop; a job id too long for ``width`` ends in ``~``."""
    try:
        when = datetime.fromtimestamp(event.at, tz=timezone.utc)
        stamp = when.strftime("%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):  # no datetime holds it
        stamp = f"{'?':<18}"
    source = event.from_state.value if event.from_state else "-"
    target = event.to_state.value if event.to_state else "deleted"
    head = f"{stamp}  {source:<9} -> {target:<9}  #{event.attempt:<3} "
    room = max(8, width - len(head))
    job = event.job_id if len(event.job_id) <= room else event.job_id[: room - 1] + "~"
    return head + job


def _settings(queue: str, got: EventSettings) -> str:
    state = "on" if got.enabled else "off"
    span = f": {got.first_id} .. {got.last_id}" if got.first_id else ""
    return (
        f"{queue}: events {state}; keeps about {got.maxlen:,} entries\n"
        f"{got.entries:,} entries now{span}"
    )


@click.command()
@click.argument("queue")
@click.option(
    "--since", default=None, metavar="ID", help="After this stream id; 0 = oldest, $ = new."
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until Ctrl-C.")
@click.option(
    "--limit",
    type=click.IntRange(1),
    default=None,
    help="Print the newest N events (with --since or --follow: the first N).",
)
@click.option("--job", "job_id", default=None, metavar="ID", help="Only this job's events.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
@click.option("--on", "switch", flag_value="on", default=None, help="Record this queue's events.")
@click.option("--off", "switch", flag_value="off", help="Stop recording them (the stream stays).")
@click.option("--maxlen", type=click.IntRange(1), default=None, help="Keep about N entries.")
@click.option("--settings", is_flag=True, help="Show the switch and the stream's extent.")
def events(
    queue: str,
    since: str | None,
    follow: bool,
    limit: int | None,
    job_id: str | None,
    as_json: bool,
    switch: str | None,
    maxlen: int | None,
    settings: bool,
) -> None:
    """Print QUEUE's job transitions, oldest first (--follow: then new ones);
    --limit N prints the newest N, like tail."""
    c = _ctx()
    q = Queue(queue, redis=c.redis, prefix=c.prefix)
    if switch is not None or maxlen is not None or settings:
        if follow or since is not None or limit is not None or job_id is not None:
            raise InvalidArgument(
                "--on/--off/--maxlen/--settings take no --since, --follow, --limit or --job"
            )
        _configure(q, queue, switch, maxlen, as_json)
        return
    start: str | Event = since if since is not None else ("$" if follow else "0")
    try:
        if not follow:
            _print_past(c, q, start, since, limit, job_id, as_json)
            return
        _follow(q, start, limit, as_json, job_id)
    except KeyboardInterrupt:
        return  # Ctrl-C is the way out of --follow, not an error


def _configure(q: Queue, queue: str, switch: str | None, maxlen: int | None, as_json: bool) -> None:
    """--on, --off, --maxlen: change the queue's event settings; --settings: show them."""
    if switch is None and maxlen is None:
        got = q.event_settings()
    else:
        got = q.set_events(None if switch is None else switch == "on", maxlen=maxlen)
    if as_json:
        click.echo(_encode.encode(got).decode())
    else:
        click.echo(_settings(queue, got))


def _print_past(
    c: Any,
    q: Queue,
    start: str | Event,
    since: str | None,
    limit: int | None,
    job_id: str | None,
    as_json: bool,
) -> None:
    """The events the stream holds from ``start`` (--limit alone: the newest N)."""
    tail = limit is not None and since is None
    if tail and job_id is None:
        start = _before_newest(c.redis, q.keys.events, limit or 1)
    found: Any = q.events(start, limit=None if tail or job_id else limit)
    seen: list[Event] = []  # the job's enqueue, once the stream yields it
    if job_id is not None:
        found = _of_job(found, job_id, seen)
    if tail:
        found = collections.deque(found, maxlen=limit)
    elif job_id is not None and limit is not None:
        found = itertools.islice(found, limit)
    for event in found:
        click.echo(_encode.encode(event).decode() if as_json else line(event))
    if job_id is not None and not seen:
        _note_trimmed(q, job_id)


def _of_job(found: Any, job_id: str, enqueues: list[Event]) -> Iterator[Event]:
    """The events of ``job_id``; its enqueues (no from-state) also go to ``enqueues``."""
    for event in found:
        if event.job_id == job_id:
            if event.from_state is None:
                enqueues.append(event)
            yield event


def _note_trimmed(q: Queue, job_id: str) -> None:
    """Say on stderr when the stream (a window of the recent past, trimmed to
    about ``maxlen`` entries) no longer reaches back to the job's enqueue, so an
    empty or short answer to ``--job`` is not mistaken for the job's history."""
    try:
        job = q.get(job_id)
    except LeaseqError:  # a row damaged by hand: show says what is wrong
        return
    if job is None or job.enqueued_at is None:
        return
    got = q.event_settings()
    first_ms = int(got.first_id.split("-")[0]) if got.first_id else None
    if not got.enabled or (first_ms is not None and first_ms <= job.enqueued_at * 1000):
        return  # off: --settings says so; or the window reaches the job
    click.echo(
        f"the event stream no longer holds job {job_id}'s earlier events (it keeps about "
        f"{got.maxlen:,} entries); its row keeps its own times: leaseq show {q.name} {job_id}",
        err=True,
    )


def _before_newest(redis: Any, key: str, n: int) -> str:
    """The stream id to read after so that the newest ``n`` events are read (an
    entry holds 1 to 10 of them, so at most ``n`` entries): '0' for all."""
    newest = redis.xrevrange(key, "+", "-", count=n)
    if len(newest) < n:
        return "0"
    oldest = newest[-1][0]
    oldest = oldest.decode() if isinstance(oldest, bytes) else str(oldest)
    before = redis.xrevrange(key, f"({oldest}", "-", count=1)
    if not before:
        return "0"
    found = before[0][0]
    return found.decode() if isinstance(found, bytes) else str(found)


def _follow(
    q: Queue, start: str | Event, limit: int | None, as_json: bool, job_id: str | None
) -> None:
    """Tail until Ctrl-C (or ``limit`` events). Only Ctrl-C ends it: a server
    restart is named on stderr and the tail resumes after the last event printed
    (a wrong URL or password still fails at once: the first read is not retried)."""
    q.event_settings()  # fails fast: a bad URL, password or key never gets retried
    # Ctrl-C is the way out, even for a process started with SIGINT ignored (a
    # background job of a shell without job control, a CI lane): Python then
    # installs no handler of its own, and --follow would never end.
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.default_int_handler) if main else None
    try:
        _tail(q, start, limit, as_json, job_id)
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def _tail(
    q: Queue, start: str | Event, limit: int | None, as_json: bool, job_id: str | None
) -> None:
    left = limit
    while True:
        try:
            for event in q.events(start, block=math.inf, limit=None if job_id else left):
                start = event
                if job_id is not None and event.job_id != job_id:
                    continue
                click.echo(_encode.encode(event).decode() if as_json else line(event))
                if left is not None:
                    left -= 1
                    if left == 0:
                        return
            return  # limit reached
        except ServerUnavailable as exc:
            if left == 0:
                return
            click.echo(f"leaseq: {redact(str(exc))}; trying again", err=True)
            time.sleep(RETRY)


def register(group: click.Group) -> None:
    """Add ``events`` to the ``leaseq`` group."""
    group.add_command(events)
