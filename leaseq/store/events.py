"""The per-queue event stream: every job transition, kept in Redis.

Every script that moves a job between states (enqueue, claim and the
promotions and reaps it does on the way, complete, fail, release, reap,
cancel, retry, retry-all, purge, delete, drop, run_now, tick) notes its
transitions in the same call and writes them, at most 10 to an entry, to the STREAM
``{prefix}:{<queue>}:events`` (``lua/lib/event_log.lua``, ``log_event.lua``,
``flush_events.lua``)::

    XADD leaseq:{emails}:events MAXLEN ~ 10000 * at 1700000000123 n 3
         pending>active "a1:1 b7:1"  scheduled>pending "c2:0"

``at`` is the script's server-clock time (ms epoch), ``n`` the number of
transitions, then one field per ``<from>><to>`` pair (in order of first
appearance in the call) whose value is the space-separated ``<job id>:<attempt>``
list (a job id holds no whitespace but may hold ``:``: the attempt is after the
last one). ``new`` is the from-state of an enqueue, ``deleted`` the to-state of
a delete, purge or drop, ``damaged`` a row whose state leaseq cannot read.

The meta hash holds the switch: field ``events`` = ``off`` records nothing
(absent: on, the default), ``events_maxlen`` the approximate bound in entries
(default ``DEFAULT_MAXLEN``). Every script reads them at every call, so every
worker honours a change at once. No I/O here: ``events`` below pages the stream.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from leaseq.errors import InvalidArgument
from leaseq.store import validate as v
from leaseq.store.replies import as_text, loose_text, stream_entries
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Feed, Listen, Op
from leaseq.types import Job, State

__all__ = [
    "DEFAULT_MAXLEN",
    "Event",
    "EventSettings",
    "event_settings",
    "events",
    "set_events",
    "job_history",
    "parse_entry",
    "read_settings",
    "set_settings",
]

DEFAULT_MAXLEN = 10_000
"""Entries kept (approximately: ``MAXLEN ~``) when a queue sets no bound
(BullMQ's default too): a window of the recent past, whose memory does not
grow with the queue (docs/events.md, "Trimming"). One
entry is one script call: one transition for a single enqueue, complete or
fail, up to 1,000 for a batch (enqueue_many, claim_many, complete_many, a
purge or retry-all page)."""
MAX_MAXLEN = 100_000_000
"""Largest bound a queue may set."""
PAGE = 100
"""Entries read per XREAD."""

_STATES = {s.value: s for s in State}
_STREAM_ID = re.compile(r"\d{1,20}(-\d{1,20})?", re.ASCII)
_U64 = 2**64 - 1
_LAST_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z in ms: the last time a datetime holds."""


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One job transition read from the queue's event stream."""

    stream_id: str
    """The id of the stream entry holding it (at most 10 transitions an entry)."""
    index: int
    """Its place among the entry's transitions (0 first)."""
    job_id: str
    attempt: int
    """The row's ``attempts`` after the transition (the lease's token for a claim);
    0 where the row's value could not be read."""
    from_state: State | None
    """None before an enqueue (no row yet) or for a row whose state was damaged."""
    to_state: State | None
    """None after a delete, purge or drop (the row is gone)."""
    at: float
    """When, epoch seconds on the server clock (the script's clock)."""


class EventSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A queue's event-stream switch and bound, and the stream's extent now."""

    enabled: bool
    maxlen: int
    """The approximate bound in entries (``DEFAULT_MAXLEN`` unless set)."""
    entries: int
    """Entries in the stream now."""
    first_id: str | None
    last_id: str | None


def parse_entry(entry_id: str, fields: Any) -> list[Event]:
    """The transitions of one stream entry (fields as redis-py returns them)."""
    if isinstance(fields, dict):
        pairs: Any = fields.items()
    else:  # a flat list (RESP2 without redis-py's pairing)
        pairs = zip(fields[::2], fields[1::2], strict=True)
    # loose_text: an entry added by hand with bytes that are not UTF-8 must not
    # make the stream unreadable from there on (a follower would die at it).
    items = [(loose_text(k), loose_text(val)) for k, val in pairs]
    stamp = dict(items).get("at", "0")
    # A stamp set by hand past year 9999 is no time any datetime holds: 0.
    at = int(stamp) / 1000.0 if stamp.isascii() and stamp.isdigit() and len(stamp) <= 15 else 0.0
    if at > _LAST_MS / 1000.0:
        at = 0.0
    out: list[Event] = []
    for name, value in items:
        source, sep, target = name.partition(">")
        if not sep:
            continue
        for token in value.split():
            job_id, sep, attempt = token.rpartition(":")
            if not sep:  # no attempt (an entry added by hand): the token is the id
                job_id, attempt = token, ""
            elif not (attempt.isascii() and attempt.isdigit()) or len(attempt) > 15:
                attempt = ""
            out.append(
                Event(
                    stream_id=entry_id,
                    index=len(out),
                    job_id=job_id,
                    attempt=int(attempt) if attempt else 0,
                    from_state=_STATES.get(source),
                    to_state=_STATES.get(target),
                    at=at,
                )
            )
    return out


def check_since(since: object) -> tuple[str, int]:
    """Where to start: (cursor, transitions of the entry after the cursor to skip
    first, -1 for none). ``since``: None or '0' (the oldest kept), '$' (only new
    ones), a stream id (after it), or an Event (after that transition)."""
    if since is None or since == "0":
        return "0-0", -1
    if since == "$":
        return "$", -1
    if isinstance(since, Event):
        return _before(since.stream_id), since.index
    if isinstance(since, str) and _is_stream_id(since):
        return since, -1
    raise InvalidArgument(
        f"since must be None, '0', '$', a stream id like '1700000000000-0' or an Event, "
        f"not {since!r}"
    )


def _is_stream_id(text: str) -> bool:
    """``<ms>`` or ``<ms>-<seq>``, each part a 64-bit unsigned integer (Redis refuses
    a larger one with a bare error, after the call was sent)."""
    return bool(_STREAM_ID.fullmatch(text)) and all(int(part) <= _U64 for part in text.split("-"))


def _before(stream_id: str) -> str:
    """The id just before ``stream_id``, so an exclusive read includes it."""
    if not _is_stream_id(stream_id):
        raise InvalidArgument(f"not a stream id: {stream_id!r}")
    ms, _, seq = stream_id.partition("-")
    if seq and int(seq) > 0:
        return f"{ms}-{int(seq) - 1}"
    if int(ms) == 0:
        return "0-0"
    return f"{int(ms) - 1}-18446744073709551615"


def check_block(block: object) -> float | None:
    """None (do not wait), or seconds to wait for new entries; ``math.inf``: forever."""
    if block is None:
        return None
    if isinstance(block, int | float) and not isinstance(block, bool) and block == math.inf:
        return math.inf
    return v.delay_ms(block, "block") / 1000.0


def check_limit(limit: object) -> int | None:
    if limit is None:
        return None
    return v.integer(limit, "limit", 1, 10**12)


def _bound(stored: str) -> int:
    """The bound the scripts use for a stored ``events_maxlen`` (read as strictly
    as ``lib/event_log.lua`` reads it: junk set by hand is the default)."""
    if stored.isascii() and stored.isdigit() and 1 <= int(stored) <= MAX_MAXLEN:
        return int(stored)
    return DEFAULT_MAXLEN


def _parse_settings(reply: list[Any]) -> EventSettings:
    stored = as_text(reply[1])
    first, last = as_text(reply[3]), as_text(reply[4])
    return EventSettings(
        enabled=int(reply[0]) == 1,
        maxlen=_bound(stored),
        entries=int(reply[2]),
        first_id=first or None,
        last_id=last or None,
    )


def _call(
    queue: QueueSettings, action: str, enabled: str = "", maxlen: str = ""
) -> Call[EventSettings]:
    return SCRIPTS["events"].call(
        queue.keys, _parse_settings, action=action, enabled=enabled, maxlen=maxlen
    )


def row_events(job: Job) -> list[Event]:
    """A job's transitions as its own row records them, however busy the queue
    was since: the enqueue (``enqueued_at``), each failed attempt's claim and
    failure (the ``failures`` log, newest 10), the current attempt's claim
    (``claimed_at``) and its end (``finished_at``). ``stream_id`` is '' for all:
    they come from the row, which lives exactly as long as the job. Oldest first."""
    out: list[Event] = []

    def add(at: float | None, src: State | None, dst: State | None, attempt: int) -> None:
        if at is not None:
            ev = Event(
                stream_id="", index=len(out), job_id=job.id, attempt=attempt,
                from_state=src, to_state=dst, at=at,
            )  # fmt: skip
            out.append(ev)

    first = State.PENDING
    if job.attempts == 0 and not job.failures and job.state is not State.CANCELLED:
        first = job.state
    add(job.enqueued_at, None, first, 0)
    for f in job.failures:
        add(f.claimed_at, State.PENDING, State.ACTIVE, f.attempt)
        add(f.failed_at, State.ACTIVE, _state_or_none(f.to), f.attempt)
    last_failed = job.failures[-1].attempt if job.failures else 0
    if job.attempts > last_failed and job.claimed_at is not None:
        add(job.claimed_at, State.PENDING, State.ACTIVE, job.attempts)
    ended = job.state in (State.SUCCEEDED, State.CANCELLED) or (
        job.state is State.DEAD and last_failed < job.attempts
    )
    if ended:
        src = State.ACTIVE if job.attempts > last_failed and job.claimed_at else State.PENDING
        add(job.finished_at, src, job.state, job.attempts)
    out.sort(key=lambda e: (e.at, e.index))
    return out


def job_history(job: Job | None, stream: list[Event]) -> list[Event]:
    """The row's transitions (:func:`row_events`) merged with those the event
    stream still holds for the job (operator moves, promotions, exact times):
    a stream event replaces the row's event of the same target state and
    attempt. Oldest first."""
    from_stream = {(e.to_state, e.attempt) for e in stream}
    own = [] if job is None else row_events(job)
    merged = [e for e in own if (e.to_state, e.attempt) not in from_stream] + list(stream)
    merged.sort(key=lambda e: e.at)
    return merged


def _state_or_none(text: str) -> State | None:
    try:
        return State(text)
    except ValueError:
        return None


def read_settings(queue: QueueSettings) -> Call[EventSettings]:
    """The queue's event switch, bound and stream extent, in one call."""
    return _call(queue, "get")


def set_settings(
    queue: QueueSettings, enabled: bool | None, maxlen: int | None
) -> Call[EventSettings]:
    """Turn the queue's events on or off (None: as it is) and set the bound in
    entries (None: as it is). Raises InvalidArgument before writing anything."""
    if enabled is not None and not isinstance(enabled, bool):
        raise InvalidArgument(f"enabled must be True, False or None, not {enabled!r}")
    switch = "" if enabled is None else ("on" if enabled else "off")
    bound = "" if maxlen is None else str(v.integer(maxlen, "maxlen", 1, MAX_MAXLEN))
    return _call(queue, "set", switch, bound)


FOLLOW_SLICE = 5.0
"""Longest single wait of a feed that follows forever (``block=math.inf``)."""


@dataclass(slots=True)
class EventReader:
    """Where a reading of the event stream stands (``QueueOps.events``)."""

    key: str
    cursor: str
    skip_after: int
    """In the entry right after the cursor: skip its transitions up to this index
    (-1: none), so resuming ``since=`` an Event yields exactly what followed it."""
    wait: float | None
    left: int | None
    skip_in: str = ""
    """The Event's entry id: skipping applies only if that entry is the one read
    (trimmed away, or a server restarted empty: the next entry is all new)."""
    finished: bool = False

    def page(self) -> Op[list[Event]]:
        """The next events: up to ``PAGE`` entries' worth, waiting when caught up."""
        if self.cursor == "$":
            newest = yield Command("xrevrange", (self.key, "+", "-", 1))
            self.cursor = as_text(newest[0][0]) if newest else "0-0"
        entries = stream_entries((yield Command("xread", ({self.key: self.cursor}, PAGE))))
        if not entries and self.wait is not None:
            timeout = FOLLOW_SLICE if self.wait == math.inf else self.wait
            entries = yield Listen(self.key, self.cursor, timeout)
            if not entries and self.wait == math.inf:
                return []
        if not entries:
            self.finished = True
            return []
        out: list[Event] = []
        for entry_id, fields in entries:
            found = parse_entry(entry_id, fields)
            if self.skip_after >= 0:
                if entry_id == self.skip_in:
                    found = [e for e in found if e.index > self.skip_after]
                self.skip_after = -1
            self.cursor = entry_id
            out += found
        if self.left is not None:
            out = out[: self.left]
            self.left -= len(out)
            self.finished = self.left == 0
        return out


def events(
    queue: QueueSettings,
    since: str | Event | None = None,
    *,
    block: float | None = None,
    limit: int | None = None,
) -> Feed[Event]:
    """Iterate the queue's job transitions (``leaseq.Event``), oldest first.

    ``since``: None or ``'0'`` from the oldest entry kept, ``'$'`` only those
    written from now on, a stream id to resume after that entry, or an Event
    to resume right after that transition (no loss, no duplicate).
    ``block``: None ends at the end of the stream; else wait up to that many
    seconds for more each time it is caught up, ending after a wait that
    brought nothing; ``math.inf`` follows forever. ``limit``: end after that
    many events. Raises InvalidArgument (at the call) for a bad argument.
    """
    cursor, skip = check_since(since)
    reader = EventReader(
        queue.keys.events,
        cursor,
        skip,
        check_block(block),
        check_limit(limit),
        since.stream_id if isinstance(since, Event) else "",
    )
    while not reader.finished:
        yield reader.page()


def set_events(
    queue: QueueSettings, enabled: bool | None = None, *, maxlen: int | None = None
) -> Op[EventSettings]:
    """Turn the queue's event stream on or off and set its bound (entries, kept
    approximately); None leaves a setting as it is. Stored in the queue's meta
    hash and read by every script at every call, so every worker follows at
    once. Returns the settings now in force. Raises InvalidArgument."""
    settings: EventSettings = yield set_settings(queue, enabled, maxlen)
    return settings


def event_settings(queue: QueueSettings) -> Op[EventSettings]:
    """The queue's event switch and bound, and how many entries the stream holds."""
    settings: EventSettings = yield read_settings(queue)
    return settings
