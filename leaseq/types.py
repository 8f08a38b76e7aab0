"""The typed values of leaseq's API: State, Lease, Job, JobOptions, Backoff, Stats."""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypedDict

import msgspec

from leaseq.errors import InvalidArgument

__all__ = [
    "FINISHED",
    "JOB_OPTIONS",
    "TRANSITIONS",
    "Backoff",
    "Failure",
    "Job",
    "JobOptions",
    "Lease",
    "State",
    "Stats",
]


class State(str, enum.Enum):
    """The closed set of states a job row can be in (field ``state``).

    Declared here once: ``FINISHED`` and ``TRANSITIONS`` below are the rest of
    the state machine, and the Lua side reads the set from
    ``lua/lib/state_kind.lua``, generated from this class
    (``python -m leaseq.store.states``; a test fails when they differ). Each
    member says who moves a job out of it. "Lease expired" is an event seen by
    reap, not a state: an expired job is still ``ACTIVE`` until a reaper (or a
    claim's bounded sweep) hands it back.
    """

    PENDING = "pending"
    """Ready to run. Left by ``claim`` (-> active; -> dead for a row that cannot
    run) or ``cancel`` (-> cancelled)."""
    SCHEDULED = "scheduled"
    """Waiting for ``run_at`` (delay or retry backoff). Left by the promotion
    inside ``claim`` or ``run_now`` (-> pending), or ``cancel``."""
    ACTIVE = "active"
    """Under a lease. Left by ``complete`` (-> succeeded), ``fail`` (-> scheduled,
    pending or dead), ``release`` (-> pending) and ``reap`` once the lease expired
    (-> pending, or dead when no attempts remain)."""
    SUCCEEDED = "succeeded"
    """Done. Terminal; the row is deleted after ``keep_succeeded`` or by ``purge``."""
    DEAD = "dead"
    """Dead-lettered: out of attempts, failed for good, or damaged. Kept until
    ``retry_dead`` (-> pending) or ``purge``; never trimmed silently."""
    CANCELLED = "cancelled"
    """Cancelled before it ran. Terminal; kept like succeeded rows."""

    def __str__(self) -> str:
        return self.value

    @property
    def finished(self) -> bool:
        """True for a state nothing moves the job out of by itself (``FINISHED``):
        what ``wait`` waits for."""
        return self in FINISHED


FINISHED: frozenset[State] = frozenset({State.SUCCEEDED, State.DEAD, State.CANCELLED})
"""The states a job ends in: no script moves a job out of them by itself (an
operator's ``retry_dead`` or ``purge`` may). ``wait`` returns once a job is in one."""

TRANSITIONS: Mapping[State, frozenset[State]] = MappingProxyType(
    {
        State.PENDING: frozenset({State.ACTIVE, State.CANCELLED, State.DEAD}),
        State.SCHEDULED: frozenset({State.PENDING, State.CANCELLED}),
        State.ACTIVE: frozenset({State.SUCCEEDED, State.SCHEDULED, State.PENDING, State.DEAD}),
        State.SUCCEEDED: frozenset(),
        State.DEAD: frozenset({State.PENDING}),
        State.CANCELLED: frozenset(),
    }
)
"""Every move a script makes between states: ``TRANSITIONS[a]`` holds each state a
job in ``a`` can go to in one script call (docs/states.md has the table: which
script, which caller). Deleting a row (``delete``, ``purge``, retention) is not a
move between states. tests/store/test_states.py checks it against the moves the
scripts actually write to the event stream, in both directions."""


class JobOptions(TypedDict, total=False):
    """The options of a job: the keyword arguments of ``enqueue`` and ``enqueue_many``.

    Declared here once; every queue's enqueue methods, the queue protocols and
    the store take them as ``**options: Unpack[JobOptions]``, so an option is
    added in one place (plus the script that stores it) and the type checker
    still checks every caller. An unknown option is a ``TypeError``, as for any
    function. Durations are seconds.
    """

    max_attempts: int | None
    """How many times the job may run (>= 1); None: the queue's ``max_attempts``."""
    delay: float | None
    """Seconds (>= 0) before the job may run; None or 0: at once."""
    priority: int
    """0..1,000,000, lower runs first; FIFO within one priority. Default 0."""
    group: str | None
    """The job's fair group (claims rotate between groups); None: ungrouped."""
    kind: str | None
    """What a handler dict dispatches on (``Lease.kind``); None: no kind."""
    timeout: float | None
    """Seconds a handler may run on the job; None: the worker's default."""


JOB_OPTIONS = frozenset(JobOptions.__optional_keys__)
"""The names of the job options, for checking ``**options`` at run time."""


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """A claimed job, held until ``deadline`` unless extended.

    ``attempt`` is the fencing token: ``complete``, ``extend``, ``fail``,
    ``release`` and ``once`` succeed only while the row is still active at
    this very attempt of this very row. ``incarnation`` names the row: each
    row an enqueue creates gets a number never used before in its queue, so
    a lease of an earlier row under the same id (gone, then enqueued again,
    attempts back at 0) never acts on the new one. 0 is the incarnation of a
    row written before leaseq numbered rows. Times are epoch seconds on the
    Redis server's clock.
    """

    id: str
    queue: str
    attempt: int
    max_attempts: int
    payload: Any
    deadline: float
    enqueued_at: float
    worker: str
    incarnation: int = 0
    kind: str | None = None
    """The job's kind (``enqueue(..., kind=)``), which a handler dict dispatches on."""
    timeout: float | None = None
    """Seconds the handler may run (``enqueue(..., timeout=)``); None: the worker's default."""
    traceparent: str | None = None
    """The W3C trace context of the span that enqueued the job (``leaseq.observe.tracing``)."""

    @property
    def token(self) -> int:
        """The fencing token (the same as ``attempt``)."""
        return self.attempt

    @property
    def last_attempt(self) -> bool:
        """True when a failure now would dead-letter the job."""
        return self.attempt >= self.max_attempts


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """One failed attempt of a job, from the row's bounded attempt log (field
    ``failures``, the newest 10): what an operator reads attempt by attempt."""

    attempt: int
    claimed_at: float | None
    """When that attempt was claimed, epoch seconds (None: not known)."""
    failed_at: float
    """When it failed (or its lease was found expired), epoch seconds."""
    to: str
    """Where the job went: ``scheduled`` / ``pending`` (retried) or ``dead``."""
    worker: str | None
    error: str
    """The first 300 characters of that attempt's ``last_error``."""


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """Every field of a job row, typed. Times are epoch seconds, server clock."""

    id: str
    queue: str
    state: State
    attempts: int
    max_attempts: int
    payload: Any
    priority: int = 0
    enqueued_at: float | None = None
    run_at: float | None = None
    claimed_at: float | None = None
    lease_until: float | None = None
    finished_at: float | None = None
    worker: str | None = None
    last_error: str | None = None
    result: Any = None
    once: dict[str, int] = msgspec.field(default_factory=dict)
    incarnation: int = 0
    """The row's incarnation (see ``Lease``); 0 for a row older than the field."""
    prefetched: int | None = None
    """The token of a lease handed out as a prefetch whose start the worker had
    not yet reported; it means something only while equal to ``attempts``."""
    kind: str | None = None
    """The job's kind, given at enqueue (None: no kind)."""
    progress: Any = None
    """The latest value a handler reported with ``progress()`` (None: none yet)."""
    refunds: int = 0
    """Attempts refunded because a lease expired before reaching a handler (at most 5)."""
    group: str | None = None
    """The job's fair group (``enqueue(..., group=)``); None for an ungrouped job."""
    timeout: float | None = None
    """Seconds a handler may run on it (``enqueue(..., timeout=)``); None: no limit of its own."""
    traceparent: str | None = None
    """The W3C trace context of the span that enqueued the job, as stored
    (``leaseq.observe.tracing``); None when it was enqueued outside any span."""
    traceback: str | None = None
    """The last failure's traceback, minus leaseq's own frames (None: none, or
    the last failure was an expired lease or an explicit ``fail``)."""
    failures: tuple[Failure, ...] = ()
    """The job's failed attempts, oldest first: the newest 10 are kept."""


class Backoff(msgspec.Struct, frozen=True, kw_only=True):
    """Exponential retry delay: ``base * 2**(attempt-1)``, capped at ``cap`` seconds.

    ``jitter`` is the randomised fraction of each delay (0 = none, 1 = full
    jitter); the default 0.5 spreads a burst of failures over half the delay
    while keeping at least half of it.
    """

    base: float = 1.0
    cap: float = 3600.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        for name in ("base", "cap", "jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidArgument(f"Backoff.{name} must be a number, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise InvalidArgument(f"Backoff.{name} must be finite and >= 0, not {value!r}")
        if self.jitter > 1:
            raise InvalidArgument(f"Backoff.jitter must be within 0..1, not {self.jitter!r}")
        if self.cap < self.base:
            raise InvalidArgument(f"Backoff.cap ({self.cap}) is below Backoff.base ({self.base})")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before the retry that follows failed attempt ``attempt`` (>= 1)."""
        exponent = min(max(attempt, 1) - 1, 64)
        full = min(self.cap, self.base * 2.0**exponent)
        return full * (1.0 - self.jitter * random.random())


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    """A consistent snapshot of one queue, read in one script call.

    ``totals`` are counters since the queue was created (``enqueued``,
    ``succeeded``, ``failed``, ``dead``, ``expired``, ``released``,
    ``retried``, ``cancelled``). Times are seconds.
    """

    queue: str
    pending: int
    scheduled: int
    active: int
    succeeded: int
    dead: int
    cancelled: int
    expired: int
    """Active jobs whose lease deadline has passed but that no reaper took yet."""
    expiring_soon: int
    """Active jobs whose lease ends within the next ``soon`` seconds."""
    oldest_pending_age: float | None
    """Seconds since the job at the head of pending was enqueued."""
    next_due_in: float | None
    """Seconds until the next scheduled job is due (0 if overdue)."""
    server_time: float
    totals: dict[str, int] = msgspec.field(default_factory=dict)
    paused: bool = False
    """True while ``Queue.pause`` holds: claims lease nothing (see ``pause``)."""
    paused_at: float | None = None
    """Epoch seconds (server clock) when the pause began; None when not paused."""
    concurrency_limit: int | None = None
    """The queue's global concurrency limit (``set_limits``); compare with ``active``."""
    rate_limit: int | None = None
    """The queue's global rate limit: claims per ``rate_per`` seconds."""
    rate_per: float | None = None
    recent_claims: int | None = None
    """Claims in the last ``rate_per`` seconds (None without a rate limit)."""
    group_concurrency_limit: int | None = None
    """Most active leases per fair group (``set_limits(group_concurrency=)``)."""
    groups_ready: int = 0
    """Fair groups with ready jobs in the claim rotation."""
    groups_held: int = 0
    """Groups with ready jobs held back at ``group_concurrency_limit``."""

    def counts(self) -> dict[State, int]:
        """The number of jobs in each state, in ``State`` order."""
        return {state: getattr(self, state.value) for state in State}


DEFAULT_BACKOFF = Backoff()
"""The queue default: 1 s doubling to at most an hour, half of each delay jittered."""
