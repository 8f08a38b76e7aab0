"""Finding a state's jobs by kind, age and text, a bounded page at a time: the
dashboard's filter (and bulk actions over it) and ``leaseq ls --kind/--text/
--older-than``.

Nothing indexes jobs by kind or payload, so a find walks the state's index in
score order and reads the rows, pipelined, FIND_PAGE at a time: each call
is one ``ZRANGEBYSCORE ... LIMIT`` of at most FIND_PAGE entries or one
pipeline of as many ``HGETALL``s, so no call holds the server long however
big the state. A find stops once it has ``want`` matches or has looked at
``budget`` entries, and hands back a ``Mark`` to go on from.

A ``Mark`` is the cursor of ``leaseq.store.paging`` (a snapshot's top score,
the score reached, the entries at that score passed over), with the part
(shard) it is in: the walk is exact however many entries share one score,
and it is not thrown off by jobs entering or leaving elsewhere in the index,
as paging by rank would be (only an entry that enters or leaves at the very
score the walk stands at, sorting before its place there, shifts it by one:
an entry may then be met twice or passed over). When the walk reaches a part it takes that
part's highest score in range as its ``upto``: a job that enters the state
later (a retried job that dies again) scores above it and is left out.

A find made for acting on its matches (``acting=True``) counts them as gone
from the index (a retry, a cancel, a delete or a run-now moves them out), so
the next page neither reads them again nor steps over one that stayed;
``FoundPage.resume`` corrects for the ones the action refused.

Where the index's score is the very time an age is measured on (dead: when
it died, ``finished_at``; waiting: ``enqueued_at``), the age bounds narrow
the walk to that score range: "dead, died more than an hour ago" reads only
those entries. Every other filter reads the rows and checks them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from leaseq.errors import DamagedRow, InvalidArgument
from leaseq.store import ready
from leaseq.store import validate as v
from leaseq.store.reads import parse_job
from leaseq.store.replies import as_text
from leaseq.store.settings import QueueSettings, parse_state
from leaseq.store.steps import Command, Op, Rows
from leaseq.types import Job, State

__all__ = [
    "AGES",
    "AGE_FIELDS",
    "FIND_PAGE",
    "FoundPage",
    "JobFilter",
    "Mark",
    "count_in_range",
    "find",
    "find_jobs",
    "find_page",
    "parse_age",
]

FIND_PAGE = 500
"""Index entries one ZRANGEBYSCORE returns, and rows one pipeline reads, at most."""


def _age_fields(state: State) -> tuple[str, ...]:
    started = ("finished_at",) if state.finished else ()
    if state is State.ACTIVE:
        started = ("claimed_at",)
    return (*started, "enqueued_at")


AGE_FIELDS: dict[State, tuple[str, ...]] = {state: _age_fields(state) for state in State}
"""Per state, the row times an age filter may be measured on; the first is the default."""
AGES = {"enqueued": "enqueued_at", "claimed": "claimed_at", "finished": "finished_at"}
"""The names people give those times (the dashboard's ``age=``, ``leaseq ls --age-of``)."""

SCORED_BY: dict[State, str] = {State.DEAD: "finished_at", State.WAITING: "enqueued_at"}
"""The states whose index score is a row time itself (ms epoch): an age on that
time narrows the walk to a score range (docs/keys-and-rows.md has the scores)."""

TEXT_LIMIT = 1000
"""Longest text a filter looks for (characters)."""

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
MAX_AGE = 100 * 366 * 86_400.0


def parse_age(text: str, name: str = "age") -> float:
    """``"90s"``, ``"10m"``, ``"2h"``, ``"3d"``, ``"1w"``, ``"1h30m"`` or a bare number of
    seconds, as seconds. InvalidArgument for anything else."""
    cleaned = text.strip().lower().replace(" ", "")
    parts = _AGE.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise InvalidArgument(f"{name}: {text!r} is not a duration (say 90s, 10m, 2h, 3d or 1h30m)")
    seconds = sum(float(n) * _UNITS[u or "s"] for n, u in parts)
    if not math.isfinite(seconds) or seconds > MAX_AGE:
        raise InvalidArgument(f"{name}: {text!r} is more than a century")
    return seconds


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What a job of a state must be to match: its ``kind`` (exactly), ``text``
    found in its id, payload (as JSON) or last error (ignoring case), and its
    age — how long ago ``age_of`` (a row time; '' for the state's default, the
    first of ``AGE_FIELDS``) was — more than ``older_than`` and at most
    ``newer_than`` seconds. Empty fields and None match every job."""

    kind: str = ""
    text: str = ""
    older_than: float | None = None
    newer_than: float | None = None
    age_of: str = ""

    def __post_init__(self) -> None:
        if len(self.text) > TEXT_LIMIT or len(self.kind) > TEXT_LIMIT:
            raise InvalidArgument(f"a filter's kind and text are at most {TEXT_LIMIT} characters")
        for name in ("older_than", "newer_than"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_AGE):
                raise InvalidArgument(f"{name}: {value!r} is not a number of seconds >= 0")
        older, newer = self.older_than, self.newer_than
        if older is not None and newer is not None and newer <= older:
            raise InvalidArgument(
                "newer than must be a longer time than older than, or no job can match"
            )

    @property
    def on(self) -> bool:
        """Whether it leaves any job out."""
        return bool(self.kind or self.text) or self.aged

    @property
    def aged(self) -> bool:
        return self.older_than is not None or self.newer_than is not None

    def time_field(self, state: State | str) -> str:
        """The row time its age is measured on in ``state``; InvalidArgument when
        ``age_of`` is not one of that state's."""
        fields = AGE_FIELDS[parse_state(state)]
        if not self.age_of:
            return fields[0]
        if self.age_of not in fields:
            raise InvalidArgument(
                f"the age of a {parse_state(state).value} job is measured on "
                f"{' or '.join(fields)}, not {self.age_of!r}"
            )
        return self.age_of

    def bounds(self, now_ms: int) -> tuple[int | None, int | None]:
        """The times (ms epoch) a matching job's time lies in: ``(lowest, highest)``,
        both inclusive, None for no bound."""
        low = None if self.newer_than is None else now_ms - round(self.newer_than * 1000) + 1
        high = None if self.older_than is None else now_ms - round(self.older_than * 1000)
        return low, high

    def score_range(self, state: State, now_ms: int) -> tuple[str, str]:
        """The index scores the walk covers: the age bounds where the state's
        score is the time they are on, else every score."""
        if not self.aged or SCORED_BY.get(state) != self.time_field(state):
            return "-inf", "inf"
        low, high = self.bounds(now_ms)
        return ("-inf" if low is None else str(low)), ("inf" if high is None else str(high))

    def exact_by_score(self, state: State | str) -> bool:
        """Whether the index's score range alone decides a match (only an age,
        on the time the index is scored by): its count is then a ZCOUNT."""
        st = parse_state(state)
        return (
            self.aged and not (self.kind or self.text) and SCORED_BY.get(st) == self.time_field(st)
        )

    def matches(self, job: Job, state: State, now_ms: int) -> bool:
        if job.state is not state:
            return False  # a stale index entry: the row has moved on
        if self.kind and job.kind != self.kind:
            return False
        if self.aged:
            t = getattr(job, self.time_field(state))
            low, high = self.bounds(now_ms)
            if t is None:
                return False
            t_ms = round(t * 1000)
            if (low is not None and t_ms < low) or (high is not None and t_ms > high):
                return False
        return not self.text or _text_in(self.text, job.id, job.last_error, job.payload)


def _text_in(text: str, job_id: str, error: str | None, payload: Any) -> bool:
    """Whether ``text`` is in the id, the error, or the payload as JSON, ignoring
    case. The payload is written compact, as the dashboard shows it; text
    copied from the spaced JSON of ``leaseq ls`` or ``show`` (``"to": "a"``)
    is looked for without the spaces JSON put after ``:`` and ``,`` too."""
    needle = text.casefold()
    if needle in job_id.casefold() or needle in (error or "").casefold():
        return True
    try:
        found = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        found = repr(payload)
    found = found.casefold()
    return needle in found or needle.replace('": ', '":').replace(", ", ",") in found


def score_text(value: float) -> str:
    """A score as Redis reads it back exactly ('inf', '-inf', an integer, or repr)."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return str(int(value)) if value.is_integer() else repr(value)


@dataclass(frozen=True, slots=True)
class Mark:
    """Where a walk is: the ``part`` (shard) it is in, that part's snapshot top
    score ``upto`` ('' until the walk reaches it), the ``score`` it has come to and
    how many entries at that score it has passed over (``skip``)."""

    part: int = 0
    upto: str = ""
    score: str = "-inf"
    skip: int = 0

    def text(self) -> str:
        """The mark as one URL-safe word (``Mark.parse`` reads it back)."""
        return f"{self.part}~{self.upto}~{self.score}~{self.skip}"

    @staticmethod
    def parse(text: str) -> Mark:
        """A mark from ``Mark.text``; InvalidArgument for anything else."""
        try:
            part, upto, score, skip = text.split("~")
            for s in (upto, score):
                if s and math.isnan(float(s)):
                    raise ValueError(s)
            mark = Mark(int(part), upto, score, int(skip))
        except ValueError:
            raise InvalidArgument(f"{text!r} is not a cursor of this list") from None
        if mark.part < 0 or mark.skip < 0 or not mark.score:
            raise InvalidArgument(f"{text!r} is not a cursor of this list")
        return mark


@dataclass(frozen=True, slots=True)
class FoundPage:
    """One find: the matches in index order (``parts[i]``: the part that holds
    ``jobs[i]``), how many entries it looked at, the rows it could not read,
    and where to go on from (None: the walk is over)."""

    jobs: list[Job]
    parts: list[int]
    looked: int
    damaged: list[DamagedRow] = field(default_factory=list)
    mark: Mark | None = None
    hits_at_mark: tuple[str, ...] = ()
    """With ``acting``: the matches at the mark's score, counted as gone."""

    def resume(self, refused: Collection[str] = ()) -> Mark | None:
        """Where to go on from after acting on the matches: ``refused`` names the
        ones the action did not move (they stay in the index, so the walk
        steps over them)."""
        if self.mark is None:
            return None
        stayed = sum(1 for i in self.hits_at_mark if i in refused)
        return Mark(self.mark.part, self.mark.upto, self.mark.score, self.mark.skip + stayed)


def count_in_range(
    parts: Sequence[QueueSettings], state: State | str, flt: JobFilter, now_ms: int
) -> Op[int]:
    """How many index entries of ``state`` the walk covers (ZCOUNT per part)."""
    st = parse_state(state)
    low, high = flt.score_range(st, now_ms)
    total = 0
    for part in parts:
        if st is State.PENDING:  # the walk looks at the list's stale entries too
            total += yield from ready.entries_count(part.keys)
        else:
            total += int((yield Command("zcount", (part.keys.index(st.value), low, high))))
    return total


def server_ms() -> Op[int]:
    """The server's clock (TIME), in ms: what ages are measured against."""
    sec, usec = yield Command("time", ())
    return int(sec) * 1000 + int(usec) // 1000


def find_page(
    parts: Sequence[QueueSettings],
    state: State | str,
    flt: JobFilter,
    mark: Mark | None = None,
    *,
    want: int = 100,
    budget: int = FIND_PAGE,
    acting: bool = False,
    now_ms: int | None = None,
) -> Op[FoundPage]:
    """The next jobs of ``state`` that match ``flt``, from ``mark`` on (None: the
    start), across ``parts`` in turn: at most ``want`` of them, looking at at
    most ``budget`` index entries. ``now_ms``: the time ages are measured
    from (None: the server's TIME, read first). InvalidArgument for a bad
    state or an age on a time the state has not."""
    st = parse_state(state)
    flt.time_field(st)  # checks age_of before any call
    now = (yield from server_ms()) if now_ms is None else now_ms
    walk = _Walk(st, flt, now, acting, want)
    at = mark or Mark()
    while at.part < len(parts) and walk.looked < budget and len(walk.jobs) < want:
        part = parts[at.part]
        key = part.keys.index(st.value)
        if not at.upto:
            at = yield from _enter(part, st, at.part, flt.score_range(st, now))
            if not at.upto:
                continue
        ask = min(FIND_PAGE, budget - walk.looked)
        if st is State.PENDING:  # the ready list, then the pending set
            entries = yield from ready.entries(part.keys, at.score, at.skip, at.upto, ask)
        else:
            entries = yield Command("zrangebyscore", (key, at.score, at.upto, at.skip, ask, True))
        ids = [as_text(member) for member, _ in entries]
        rows = (yield Rows([part.keys.job(i) for i in ids])) if ids else []
        if st is State.PENDING:
            rows = ready.live_rows(ids, [score < 0 for _, score in entries], rows)
        at, ended = walk.take(part, at, ids, [score for _, score in entries], rows)
        if ended and len(entries) < ask:
            at = Mark(at.part + 1)
    done = at.part >= len(parts)
    return FoundPage(
        walk.jobs, walk.parts, walk.looked, walk.damaged, None if done else at, walk.hits_at(at)
    )


def find(
    queue: QueueSettings,
    state: State | str,
    *,
    kind: str = "",
    text: str = "",
    older_than: float | None = None,
    newer_than: float | None = None,
    age_of: str = "",
    limit: int = 100,
    damaged: list[DamagedRow] | None = None,
) -> Op[list[Job]]:
    """The jobs of ``state`` that match a filter, oldest entry first: ``kind``
    exactly, ``text`` in the id, payload (as JSON) or last error (ignoring case),
    an age (seconds since ``age_of``, a row time: '' for the state's default,
    ``enqueued_at`` or ``finished_at`` for dead) above ``older_than`` and at most
    ``newer_than``. At most ``limit`` jobs. Nothing indexes kind or text: the walk
    reads the state's rows, page after page of short calls, to the end of the
    index if it must (``leaseq ls --kind/--text/--older-than`` is the same walk).
    ``damaged``: a list to collect rows that do not read (``ls``'s pattern)."""
    flt = job_filter(kind, text, older_than, newer_than, age_of)
    return (yield from find_jobs([queue], state, flt, limit, damaged))


def job_filter(
    kind: str, text: str, older_than: float | None, newer_than: float | None, age_of: str
) -> JobFilter:
    """A JobFilter from a caller's arguments, each checked: InvalidArgument naming it."""
    for name, word in (("kind", kind), ("text", text), ("age_of", age_of)):
        if not isinstance(word, str):
            raise InvalidArgument(f"{name} must be a str, not {word!r}")
    for name, age in (("older_than", older_than), ("newer_than", newer_than)):
        if age is not None:
            v.seconds_to_ms(age, name, minimum_ms=0, maximum=MAX_AGE)
    return JobFilter(kind, text, older_than, newer_than, age_of)


def find_jobs(
    parts: Sequence[QueueSettings],
    state: State | str,
    flt: JobFilter,
    limit: int,
    damaged: list[DamagedRow] | None = None,
) -> Op[list[Job]]:
    """``find`` over the parts (shards) in turn: ``find_page`` after ``find_page``
    until ``limit`` matches or the end, every page's ages from one server time."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= 1_000_000:
        raise InvalidArgument(f"limit: {limit!r} is not a whole number from 1 to 1,000,000")
    flt.time_field(parse_state(state))  # InvalidArgument before any call
    now = yield from server_ms()
    jobs: list[Job] = []
    mark: Mark | None = None
    while len(jobs) < limit:
        page = yield from find_page(parts, state, flt, mark, want=limit - len(jobs), now_ms=now)
        jobs += page.jobs
        if damaged is not None:
            damaged += page.damaged
        if page.mark is None:
            break
        mark = page.mark
    return jobs


def _enter(queue: QueueSettings, state: State, part: int, scores: tuple[str, str]) -> Op[Mark]:
    """The mark at the start of ``part``: from the range's lowest score up to its
    highest entry now (the snapshot); the next part's when it has none."""
    low, high = scores
    if state is State.PENDING:
        last = yield from ready.top(queue.keys)
        return Mark(part + 1) if last is None else Mark(part, score_text(last), low, 0)
    # ZRANGE ... BYSCORE REV LIMIT 0 1 (Redis 6.2): the least-privilege ACL
    # of docs/reliability.md has ZRANGE, not ZREVRANGEBYSCORE.
    key = queue.keys.index(state.value)
    top = yield Command("zrange", (key, high, low, True, True, float, True, False, 0, 1))
    if not top:
        return Mark(part + 1)
    return Mark(part, score_text(float(top[0][1])), low, 0)


class _Walk:
    """What a find has gathered so far, entry by entry."""

    def __init__(self, state: State, flt: JobFilter, now: int, acting: bool, want: int) -> None:
        self.state, self.flt, self.now, self.acting, self.want = state, flt, now, acting, want
        self.jobs: list[Job] = []
        self.parts: list[int] = []
        self.damaged: list[DamagedRow] = []
        self.looked = 0
        self._hits: list[tuple[int, str, str]] = []  # (part, score, id) of acted-on matches

    def take(
        self, part: QueueSettings, at: Mark, ids: list[str], scores: list[Any], rows: list[Any]
    ) -> tuple[Mark, bool]:
        """Look at one page's entries in order; the mark after the last one
        looked at, and whether the page was looked at to its end."""
        score, skip = at.score, at.skip
        for job_id, raw_score, raw in zip(ids, scores, rows, strict=True):
            self.looked += 1
            hit = self._match(part, at.part, job_id, raw)
            now_at = score_text(float(raw_score))
            if now_at != score:
                score, skip = now_at, 0
            if hit and self.acting:
                self._hits.append((at.part, score, job_id))
            else:
                skip += 1  # it stays in the index: step over it next time
            if len(self.jobs) >= self.want:
                return Mark(at.part, at.upto, score, skip), job_id == ids[-1]
        return Mark(at.part, at.upto, score, skip), True

    def _match(self, part: QueueSettings, index: int, job_id: str, raw: Any) -> bool:
        try:
            if isinstance(raw, Exception):  # the key is not a hash (WRONGTYPE)
                raise DamagedRow(job_id, "<key>", None, str(raw))
            if not self._may_match(part, job_id, raw):
                return False
            job = parse_job(part, job_id, raw)
        except DamagedRow as exc:
            self.damaged.append(exc)
            return False
        if job is None or not self.flt.matches(job, self.state, self.now):
            return False
        self.jobs.append(job)
        self.parts.append(index)
        return True

    def _may_match(self, part: QueueSettings, job_id: str, raw: dict[Any, Any]) -> bool:
        """A cheap look at the raw row: False when its state, kind, time or text
        surely do not match; True to read it whole (a field that will not
        read is left for ``parse_job`` to name)."""
        if not raw:
            return False
        wide = isinstance(next(iter(raw)), bytes)

        def get(name: str) -> str | None:
            value = raw.get(name.encode() if wide else name)
            return None if value is None else as_text(value)

        flt = self.flt
        if get("state") != self.state.value or (flt.kind and get("kind") != flt.kind):
            return False
        if flt.aged:
            t = get(flt.time_field(self.state))
            low, high = flt.bounds(self.now)
            if t is None:
                return False
            if t.lstrip("-").isdigit() and (
                (low is not None and int(t) < low) or (high is not None and int(t) > high)
            ):
                return False
        if not flt.text:
            return True
        blob = raw.get(b"payload" if wide else "payload")
        try:
            payload = None if blob is None else part.codec.decode_payload(blob)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return True  # damaged: parse_job names it
        return _text_in(flt.text, job_id, get("last_error"), payload)

    def hits_at(self, at: Mark) -> tuple[str, ...]:
        return tuple(i for p, s, i in self._hits if p == at.part and s == at.score)
