"""Schedules: periodic jobs with no leader, decided by the server's clock.

A schedule is a hash under the queue's hash tag (``keys.schedule(name)``)
indexed by its next due time (``keys.schedules``). ``tick`` reads the due
ones (``lua/schedules.lua``, whose clock is the server's), works out the
due time after each one here in Python (cron arithmetic with ``cronsim``,
time zones with ``zoneinfo``), then ``lua/tick.lua`` turns each due time into
exactly one job, compare-and-set on what was read, so any number of tickers
may run at once. The job id is ``schedule:<name>:<due ms>``: a replay, or a
second ticker that read the same due time, finds it and makes nothing.

The next due time follows from the definition and the due time just fired
only, skipping forward past the server's clock: after downtime a schedule
fires once for everything it missed, then goes on from the next due time.

Each operation is written once as a generator of ``Call``s (sans-I/O);
``drive`` and ``adrive`` run one on a sync or an async transport.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from leaseq.errors import InvalidArgument, ScriptError
from leaseq.store import validate as v
from leaseq.store.enqueue import option_args
from leaseq.store.keys import check_job_id, check_queue_name
from leaseq.store.replies import as_text, read_cost
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op
from leaseq.types import JobOptions, Unique

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Schedule",
    "next_due",
    "schedule",
    "schedules",
    "read_schedules",
    "tick",
    "unschedule",
    "unschedule_call",
]

T = TypeVar("T")
Steps = Generator[Call[Any], Any, T]

TICK_INTERVAL = 1.0
"""Seconds between the ticks a worker makes in its loop (threaded and asyncio):
a schedule fires within about this long after its due time while a worker runs."""
TICK_BATCH = 16
"""Most due schedules one read of ``tick`` takes; it sends them to tick calls until each
is looked at (a call stops at its time budget, lua/lib/over_budget.lua), then reads
again for more."""
MAX_TICK_ROUNDS = 125
"""Most reads one ``tick()`` makes (a bound, whatever the schedules do): 2,000 due
times, as before."""
MIN_EVERY = 0.01
"""Shortest interval of an ``every=`` schedule, in seconds (10 ms)."""
MAX_EVERY = 10 * 366 * 86_400.0
"""Longest interval of an ``every=`` schedule: ten years, in seconds."""
_UPSERT_TRIES = 10


class Schedule(msgspec.Struct, frozen=True, kw_only=True):
    """One schedule of a queue, as ``schedules()`` reads it.

    Exactly one of ``cron`` and ``every`` is set. Times are epoch seconds on
    the Redis server's clock; ``next_due`` is None for a parked schedule
    (one whose stored definition cannot be read: ``error`` says why).
    """

    name: str
    queue: str
    payload: Any
    cron: str | None
    tz: str | None
    every: float | None
    """The interval in seconds, for an ``every=`` schedule."""
    next_due: float | None
    last_fired: float | None
    """The due time of the last job it made (None: never fired)."""
    fired: int
    """How many due times it has turned into jobs."""
    max_attempts: int
    priority: int
    created_at: float | None
    error: str | None = None
    kind: str | None = None
    """The kind of each job it makes (a worker's handler dict picks by it)."""
    group: str | None = None
    """The fair group of each job it makes."""
    timeout: float | None = None
    """Seconds a handler may run on each job it makes."""
    cost: float = 1.0
    """The cost of each job it makes (``cost=``)."""
    expires: float | None = None
    """Seconds after each job is made by which it must start (``expires=``)."""
    unique_key: str | None = None
    """Each job holds this uniqueness key; a due time is skipped while it is held."""
    skipped: int = 0
    """Due times skipped because the previous job holding ``unique_key`` was unfinished."""


# -- the arithmetic --------------------------------------------------------------


def _zone(tz: str | None) -> Any:
    if tz is None or tz == "" or tz == "UTC":
        return timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidArgument(f"unknown time zone {tz!r} ({exc})") from None


def _check_cron(expr: object, tz: str | None) -> None:
    if not isinstance(expr, str) or not expr.strip() or len(expr) > 256:
        raise InvalidArgument(f"cron must be a cron expression, not {expr!r}")
    next_due(expr, tz, None, 0, 0)


def next_due(cron: str | None, tz: str | None, every_ms: int | None, anchor: int, now: int) -> int:
    """The first due time after both ``anchor`` (the due time just fired, or
    when the schedule was created) and ``now`` (the server clock), ms epoch.

    Cron: the first time the expression matches in zone ``tz`` after
    ``max(anchor, now)``; the zone's rules decide DST (with cronsim, a time
    skipped by spring-forward runs at the first instant after the gap, and a
    time repeated by fall-back runs once, unless the hour field is ``*``).
    Interval: ``anchor + k * every_ms`` for the least k >= 1 that is after now.
    Raises InvalidArgument for an expression or zone that will not read.
    """
    if every_ms:
        k = max(1, (now - anchor) // every_ms + 1)
        return anchor + k * every_ms
    from cronsim import CronSim, CronSimError

    zone = _zone(tz)
    start = datetime.fromtimestamp(max(anchor, now) / 1000, zone)
    try:
        due = next(CronSim(str(cron), start))
    except (CronSimError, StopIteration) as exc:
        raise InvalidArgument(f"bad cron expression {cron!r}: {exc or 'never matches'}") from None
    return math.floor(due.timestamp() * 1000)


# -- reading ------------------------------------------------------------------------


def _read(
    queue: QueueSettings, what: str, offset: int, limit: int, names: Sequence[str] = ()
) -> Call[tuple[int, int, list[tuple[str, dict[str, str | bytes]]]]]:
    k = queue.keys

    def parse(reply: list[Any]) -> tuple[int, int, list[tuple[str, dict[str, str | bytes]]]]:
        found = []
        for i in range(2, len(reply), 2):
            flat = reply[i + 1]
            fields: dict[str, str | bytes] = {
                as_text(flat[j]): flat[j + 1] for j in range(0, len(flat), 2)
            }
            found.append((as_text(reply[i]), fields))
        return int(reply[0]), int(reply[1]), found

    return SCRIPTS["schedules"].call(
        k, parse, arg_tail=list(names), what=what, offset=offset, limit=limit
    )


def _int(fields: dict[str, str | bytes], name: str) -> int | None:
    raw = fields.get(name)
    if raw is None:
        return None
    try:
        return int(as_text(raw))
    except ValueError:
        return None


def _stamp(fields: dict[str, str | bytes]) -> str:
    if "version" not in fields:
        return ""
    return as_text(fields["version"]) + ":" + as_text(fields.get("last_fired", b""))


def _definition(fields: dict[str, str | bytes]) -> tuple[str | None, str | None, int | None]:
    cron = as_text(fields.get("cron", b"")) or None
    tz = as_text(fields.get("tz", b"")) or None
    every = _int(fields, "every_ms") or None
    return cron, tz, every


def _following(fields: dict[str, str | bytes], due: int, now: int) -> int:
    """The due time after ``due``, or -1 when the stored definition will not read."""
    cron, tz, every = _definition(fields)
    if (cron is None) == (every is None) or (every is not None and every < 1):
        return -1
    try:
        return next_due(cron, tz, every, due, now)
    except InvalidArgument:
        return -1


def _sec(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _as_schedule(queue: QueueSettings, name: str, fields: dict[str, str | bytes]) -> Schedule:
    cron, tz, every = _definition(fields)
    error = as_text(fields["error"]) if "error" in fields else None
    try:
        payload = queue.codec.decode_any(fields.get("payload", b""))
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        payload, error = fields.get("payload"), f"payload does not decode: {exc}"
    return Schedule(
        name=name,
        queue=queue.name,
        payload=payload,
        cron=cron,
        tz=tz,
        every=None if every is None else every / 1000,
        next_due=_sec(_int(fields, "next_due")),
        last_fired=_sec(_int(fields, "last_fired")),
        fired=_int(fields, "fired") or 0,
        max_attempts=_int(fields, "max_attempts") or 1,
        priority=_int(fields, "priority") or 0,
        created_at=_sec(_int(fields, "created_at")),
        error=error,
        kind=_text(fields, "kind"),
        group=_text(fields, "group"),
        timeout=_sec(_int(fields, "timeout_ms")),
        cost=read_cost(_text(fields, "cost")) or 1.0,
        expires=_sec(_int(fields, "expires_ms")),
        unique_key=_text(fields, "unique"),
        skipped=_int(fields, "skipped") or 0,
    )


def _text(fields: dict[str, str | bytes], name: str) -> str | None:
    raw = fields.get(name)
    return None if raw is None else as_text(raw) or None


# -- the operations (generators of Calls) -------------------------------------------------


def _unique_key(unique: object) -> str:
    """A schedule's ``unique=``: its key ('' for none); InvalidArgument otherwise."""
    if unique is None:
        return ""
    if not isinstance(unique, Unique) or not isinstance(unique.key, str):
        raise InvalidArgument(f"a schedule's unique= is a leaseq.Unique(key), not {unique!r}")
    if unique.period is not None or unique.replace:
        raise InvalidArgument(
            "a schedule's unique= takes a key only: it skips a due time while the "
            "key's holder is unfinished (period= and replace= do not apply)"
        )
    return check_job_id(unique.key, "unique key")


def _every_ms(cron: str | None, tz: str | None, every: float | None) -> int:
    """The period of an ``every=`` schedule in ms (0 for a ``cron=`` one), with
    both checked; InvalidArgument for neither, both, or a bad one."""
    if (cron is None) == (every is None):
        raise InvalidArgument("give exactly one of cron= and every=")
    if every is not None:
        if tz is not None:
            raise InvalidArgument("tz= applies to cron= schedules only")
        every_ms = v.seconds_to_ms(every, "every", minimum_ms=1, maximum=MAX_EVERY)
        if every_ms < MIN_EVERY * 1000:
            raise InvalidArgument(f"every must be at least {MIN_EVERY:g} s, not {every!r}")
        return every_ms
    if tz is not None and (not isinstance(tz, str) or not tz):
        raise InvalidArgument(f"tz must be an IANA time zone name, not {tz!r}")
    _check_cron(cron, tz)
    return 0


def _job_options(queue: QueueSettings, payload: Any, options: JobOptions) -> dict[str, Any]:
    """The options of a schedule's jobs as stored, checked (``option_args``), and those
    a schedule cannot have refused."""
    job = option_args(queue, options, "schedule")
    queue.check_edit(options.get("kind"), payload)  # a typed task's call must fit it
    if job["delay_ms"]:
        raise InvalidArgument("a schedule's jobs run at their due time: delay= does not apply")
    if job["expires"] and not job["expires"].startswith("+"):
        raise InvalidArgument(
            "a schedule's expires= is seconds after each job is made, not a datetime"
        )
    if options.get("depends_on") or "on_parent_failure" in options:
        raise InvalidArgument(
            "a schedule's jobs have no parents: depends_on= and on_parent_failure= do not "
            "apply (make the scheduled job enqueue its children, docs/workflows.md)"
        )
    return job


def schedule(
    queue: QueueSettings,
    name: str,
    payload: Any,
    *,
    cron: str | None = None,
    tz: str | None = None,
    every: float | None = None,
    **options: Unpack[JobOptions],
) -> Op[Schedule]:
    """Create or change (upsert) the schedule ``name``: one job with ``payload`` per
    due time, by ``cron`` (in zone ``tz``, default UTC) or ``every`` seconds.
    ``options`` are those of ``enqueue`` for each job it makes (``kind``,
    ``group``, ``priority``, ``max_attempts``, ``timeout``; ``unique=Unique(key)``
    skips a due time while the previous job holding the key is unfinished;
    not ``delay``). Raises InvalidArgument (also for a bad cron or zone) before
    writing."""
    check_queue_name(name, "schedule name")
    job = _job_options(queue, payload, options)
    ukey = _unique_key(options.get("unique"))
    every_ms = _every_ms(cron, tz, every)
    encoded = queue.codec.encode(payload)
    k = queue.keys
    for _ in range(_UPSERT_TRIES):
        now, _total, found = yield _read(queue, "names", 0, 1, (name,))
        fields = found[0][1]
        created = _int(fields, "created_at")
        anchor = _int(fields, "last_fired") or created or now
        due = next_due(cron, tz, every_ms or None, anchor, now)
        reply = yield SCRIPTS["schedule"].call(
            k,
            lambda r: r,
            at={"name": name},
            name=name,
            payload=encoded,
            cron=cron or "",
            tz=tz or "",
            every_ms=every_ms,
            max_attempts=job["max_attempts"],
            priority=job["priority"],
            kind=job["kind"],
            group=job["group"],
            timeout_ms=job["timeout_ms"],
            cost=job["cost"],
            expires=job["expires"],
            unique=ukey,
            next_due=due,
            stamp=_stamp(fields),
            created_at=created or now,
        )
        if as_text(reply[0]) == "OK":
            _now, _total, found = yield _read(queue, "names", 0, 1, (name,))
            return _as_schedule(queue, name, found[0][1])
    raise ScriptError(f"schedule {name!r} kept changing under this upsert; try again")


def unschedule_call(queue: QueueSettings, name: str) -> Call[bool]:
    """Remove schedule ``name``; True if it existed."""
    check_queue_name(name, "schedule name")
    return SCRIPTS["unschedule"].call(
        queue.keys, lambda r: int(r) == 1, at={"name": name}, name=name
    )


def unschedule(queue: QueueSettings, name: str) -> Op[bool]:
    """Remove the schedule ``name``: True if it existed (its jobs are left alone)."""
    existed: bool = yield unschedule_call(queue, name)
    return existed


def read_schedules(queue: QueueSettings, page: int = 1000) -> Op[list[Schedule]]:
    """Every schedule of the queue, by next due time, read ``page`` at most a call
    (fewer when a call stops at its time budget: the next goes on from there)."""
    out: list[Schedule] = []
    offset = 0
    while True:
        _now, total, found = yield _read(queue, "all", offset, page)
        out += [_as_schedule(queue, name, fields) for name, fields in found if fields]
        offset += len(found)
        if offset >= total or not found:
            return out


def schedules(queue: QueueSettings) -> Op[list[Schedule]]:
    """Every schedule of this queue, soonest due first."""
    return (yield from read_schedules(queue))


def tick(queue: QueueSettings) -> Op[int]:
    """Make the one job of each schedule whose due time has come (server clock);
    returns how many jobs were made. Safe to call from any number of processes."""
    k = queue.keys
    made = 0
    for _ in range(MAX_TICK_ROUNDS):
        now, due_now, found = yield _read(queue, "due", 0, TICK_BATCH)
        args: list[str | bytes | int] = []
        for name, fields in found:
            # A stale entry or a damaged due time goes to the script too: it
            # drops the one and parks the other, so neither is read forever.
            due = _int(fields, "next_due")
            after = -1 if due is None else _following(fields, due, now)
            raw_due = as_text(fields.get("next_due", b""))
            args += (name, _stamp(fields), raw_due, after)
        if not args:
            return made
        while args:
            # A call that stops at its time budget has looked at fewer than it was
            # sent (one page at least): the rest, as read, go in the next call.
            created, _moved, looked = yield SCRIPTS["tick"].call(k, lambda r: r, arg_tail=args)
            made += int(created)
            args = args[4 * max(1, int(looked)) :]
        if len(found) >= due_now:  # all that were due (a read may stop short too)
            return made
    return made


# -- transports ------------------------------------------------------------------------
