"""The typed values of leaseq's API: State, Lease, Job, JobOptions, Backoff, Stats."""

from __future__ import annotations

import datetime
import enum
import math
import random
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, TypedDict

import msgspec

from leaseq.errors import InvalidArgument

__all__ = [
    "EXPIRING",
    "FINISHED",
    "GONE",
    "JOB_OPTIONS",
    "TRANSITIONS",
    "Backoff",
    "Failure",
    "Gone",
    "Job",
    "JobOptions",
    "Lease",
    "ParentFailure",
    "State",
    "Stats",
    "Step",
    "TIMED_OUT",
    "TimedOut",
    "Unique",
]


class State(str, enum.Enum):
    """The closed set of states a job row can be in (field ``state``).

    Declared here once: ``FINISHED``, ``EXPIRING`` and ``TRANSITIONS`` below are
    the rest of the state machine, ``Stats`` has one count per member (a test
    fails when they differ), and the Lua side reads the set from
    ``lua/lib/state_kind.lua`` and ``lua/lib/state_indexes.lua``, generated from
    this class (``python -m leaseq.store.states``; a test fails when they differ). Each
    member says who moves a job out of it. "Lease expired" is an event seen by
    reap, not a state: an expired job is still ``ACTIVE`` until a reaper (or a
    claim's bounded sweep) hands it back.
    """

    WAITING = "waiting"
    """Waiting for its parents (``depends_on``): never claimed. Left in the same
    script call that finishes its last unfinished parent: -> pending (or
    scheduled, with a ``delay``) once every parent succeeded (or, with
    ``on_parent_failure="run"``, finished at all); -> cancelled when a parent
    ends dead, cancelled or deleted under ``on_parent_failure="cancel"``; or by
    ``cancel`` (-> cancelled). docs/workflows.md."""
    PENDING = "pending"
    """Ready to run. Left by ``claim`` (-> active; -> dead for a row that cannot
    run) or ``cancel`` (-> cancelled)."""
    SCHEDULED = "scheduled"
    """Waiting for ``run_at`` (delay or retry backoff). Left by the promotion
    inside ``claim`` or ``run_now`` (-> pending), or ``cancel``."""
    ACTIVE = "active"
    """Under a lease. Left by ``complete`` (-> succeeded), ``fail`` (-> scheduled,
    pending or dead), ``release`` (-> pending), ``reap`` once the lease expired
    (-> pending, or dead when no attempts remain) and ``cancel`` (-> cancelled:
    the running attempt's lease is lost)."""
    SUSPENDED = "suspended"
    """Asleep by its own handler's ``current_job().sleep`` (docs/durable.md): no
    lease, no worker slot, its attempt refunded. Left by the promotion inside
    ``claim`` once ``run_at`` passes, or ``run_now`` (-> pending), or ``cancel``
    (-> cancelled)."""
    SUCCEEDED = "succeeded"
    """Done. Terminal; the row is deleted after ``keep_succeeded`` or by ``purge``."""
    DEAD = "dead"
    """Dead-lettered: out of attempts, failed for good, or damaged. Kept until
    ``retry_dead`` (-> pending) or ``purge``; never trimmed silently."""
    CANCELLED = "cancelled"
    """Cancelled by ``cancel`` (before it ran or while it ran), or by a failed
    parent. Terminal; kept like succeeded rows (a workflow's cancelled children:
    until purged)."""

    def __str__(self) -> str:
        return self.value

    @property
    def finished(self) -> bool:
        """True for a state nothing moves the job out of by itself (``FINISHED``):
        what ``wait`` waits for."""
        return self in FINISHED

    @property
    def expiring(self) -> bool:
        """True for a state whose rows expire (``EXPIRING``): its index's score is
        when the row expires, so ``stats`` counts only the rows not yet expired."""
        return self in EXPIRING


FINISHED: frozenset[State] = frozenset({State.SUCCEEDED, State.DEAD, State.CANCELLED})
"""The states a job ends in: no script moves a job out of them by itself (an
operator's ``retry_dead`` or ``purge`` may). ``wait`` returns once a job is in one."""

EXPIRING: frozenset[State] = frozenset({State.SUCCEEDED, State.CANCELLED})
"""The finished states whose rows expire after ``keep_succeeded`` (or are kept: score
+inf): their index is scored by when the row expires, not by when it got there, and
a row past its time is gone or about to be, so it is not counted."""

TRANSITIONS: Mapping[State, frozenset[State]] = MappingProxyType(
    {
        State.WAITING: frozenset({State.PENDING, State.SCHEDULED, State.CANCELLED}),
        State.PENDING: frozenset({State.ACTIVE, State.CANCELLED, State.DEAD}),
        State.SCHEDULED: frozenset({State.PENDING, State.CANCELLED}),
        State.ACTIVE: frozenset(
            {
                State.SUCCEEDED,
                State.SCHEDULED,
                State.PENDING,
                State.SUSPENDED,
                State.DEAD,
                State.CANCELLED,
            }
        ),
        State.SUSPENDED: frozenset({State.PENDING, State.CANCELLED}),
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
    expires: float | datetime.datetime | None
    """A start-by deadline: seconds from the enqueue (server clock), or an aware
    ``datetime``; a job not claimed by then is never run (it is dead-lettered with
    why, and counted as ``past_deadline``). None: no deadline."""
    cost: float | None
    """What one run of the job spends against the queue's and its group's cost limits
    (``set_limits(cost_rate=, cost_per=)``: tokens, say); a finite number > 0. None: 1.
    The handler may report what it really spent (``current_job().set_cost``)."""
    depends_on: Sequence[str] | None
    """Ids of the jobs this one waits for (its parents, in this queue): it is
    ``waiting`` until they finish, then runs (docs/workflows.md). Every parent
    must exist; None or empty: no parents."""
    on_parent_failure: ParentFailure
    """What a parent ending dead, cancelled or deleted does to this job:
    ``"cancel"`` (the default: cancelled too, and so are its own waiting
    children that say ``"cancel"``) or ``"run"`` (that parent counts as done)."""
    unique: Unique | None
    """At most one unfinished job per key (``leaseq.Unique``); None: unique by id only."""


class Unique(msgspec.Struct, frozen=True):
    """The ``unique=`` option of ``enqueue``: at most one job per ``key``.

    ``key``: a string (the job-id rules), or a function of the payload that
    returns one (or None: that job has no key), which ``enqueue_many`` calls
    per item. ``period``: None holds the key while its holder is unfinished
    (waiting, pending, scheduled, active) and frees it as the holder finishes;
    seconds > 0 hold it for that long from the holder's enqueue, whatever its
    state (a throttle). ``replace``: a duplicate replaces the payload of a
    holder that has not started, or, while the holder runs, becomes the key's
    one successor queued behind it (keep-last). A duplicate creates nothing
    and gets the holder's id. docs/states.md#uniqueness has the rules.
    """

    key: str | Callable[[Any], str | None]
    period: float | None = None
    replace: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.key, str) or callable(self.key)):
            raise InvalidArgument(f"Unique.key must be a string or a function, not {self.key!r}")
        if self.period is not None and (
            isinstance(self.period, bool)
            or not isinstance(self.period, (int, float))
            or not math.isfinite(self.period)
            or self.period <= 0
        ):
            raise InvalidArgument(f"Unique.period must be None or seconds > 0, not {self.period!r}")
        if not isinstance(self.replace, bool):
            raise InvalidArgument(f"Unique.replace must be True or False, not {self.replace!r}")


ParentFailure = Literal["cancel", "run"]
"""The values of ``on_parent_failure``."""

JOB_OPTIONS = frozenset(JobOptions.__optional_keys__)
"""The names of the job options, for checking ``**options`` at run time."""


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """A claimed job, held until ``deadline`` unless extended.

    ``attempt`` is the fencing token: ``complete``, ``extend``, ``fail``,
    ``release`` and ``once`` succeed only while the row is still active at
    this very attempt of this very row, under this very claim (``fence``).
    ``incarnation`` names the row: each row an enqueue creates under an id its
    caller chose gets a number never used before in its queue, so a lease of
    an earlier row under the same id (gone, then enqueued again, attempts back
    at 0) never acts on the new one.
    A row under an id leaseq made (never reused) stores no number: its
    ``enqueued_at`` in ms is its incarnation. Times are epoch seconds on the
    Redis server's clock.

    ``fence`` names the claim: a random name each claim call makes and
    stores in the rows it leases. After a failover that lost a claim the
    promoted replica hands out the same ``attempt`` again, but under a fence
    of its own, so the lost claim's holder can change nothing
    (docs/leases-and-fencing.md, "The full token").
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
    fence: str = ""
    """The claim's random name, part of the fencing token ('' for a row
    claimed before fences existed)."""
    kind: str | None = None
    """The job's kind (``enqueue(..., kind=)``), which a handler dict dispatches on."""
    timeout: float | None = None
    """Seconds the handler may run (``enqueue(..., timeout=)``); None: the worker's default."""
    traceparent: str | None = None
    """The W3C trace context of the span that enqueued the job (``leaseq.observe.tracing``)."""
    depends_on: tuple[str, ...] = ()
    """The ids of the job's parents (``enqueue(..., depends_on=)``), in the order
    given; ``Queue.parent_results(lease)`` reads their results."""

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
    steps: dict[str, Any] = msgspec.field(default_factory=dict)
    """Its durable steps' recorded results, by step name (row fields ``step:<name>``;
    ``current_job().step``, docs/durable.md)."""
    incarnation: int = 0
    """The row's incarnation as its leases carry it (see ``Lease``)."""
    fence: str | None = None
    """The fence of the row's latest claim (see ``Lease``): with ``attempts``
    and ``incarnation``, the full fencing token of its lease (None: never claimed)."""
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
    cost: float = 1.0
    """What one run counts against the cost limits (``enqueue(..., cost=)``; row field
    ``cost``, absent for the default 1)."""
    expires_at: float | None = None
    """Its start-by deadline, epoch seconds on the server's clock (``enqueue(...,
    expires=)``); None: none."""
    spent: float | None = None
    """What its last settled run really spent (``current_job().set_cost``, ``complete(...,
    cost=)``; row field ``spent``); None: never settled."""
    unique_key: str | None = None
    """The uniqueness key the job was enqueued with (``leaseq.Unique``); None: none."""
    after: str | None = None
    """For a keep-last successor: the id of the running job it was queued behind."""
    traceparent: str | None = None
    """The W3C trace context of the span that enqueued the job, as stored
    (``leaseq.observe.tracing``); None when it was enqueued outside any span."""
    depends_on: tuple[str, ...] = ()
    """The ids of the job's parents, in the order given (row field ``depends_on``)."""
    parents_left: int = 0
    """How many parents have not finished yet (row field ``parents_left``; 0 once released)."""
    on_parent_failure: ParentFailure = "cancel"
    """What a failed parent does to this job (row field ``on_parent_failure``)."""
    failed_parents: tuple[str, ...] = ()
    """Parents that ended dead, cancelled or deleted while this job waited
    (``on_parent_failure="run"`` runs it anyway; ``"cancel"`` names the first)."""
    children: int = 0
    """Children of this job that have not finished (row field ``children``): while
    any has not, the row is kept whatever the retention (docs/workflows.md)."""
    cancelled_children: int = 0
    """Waiting children this job cancelled when it failed (``on_parent_failure="cancel"``);
    ``retry_dead`` of this job does not bring them back."""
    flow: str | None = None
    """The name of the ``enqueue_flow`` call that created the job, if any."""
    traceback: str | None = None
    """The last failure's traceback, minus leaseq's own frames (None: none, or
    the last failure was an expired lease or an explicit ``fail``)."""
    failures: tuple[Failure, ...] = ()
    """The job's failed attempts, oldest first: the newest 10 are kept."""
    wait_key: str | None = None
    """While it is suspended in ``current_job().wait_for``: the signal key it waits
    for (``q.signal``); None otherwise (a sleep, or not suspended)."""
    wait_step: str | None = None
    """The step name of that wait: the signal's payload is recorded under it."""


class TimedOut(msgspec.Struct, frozen=True, tag="timed_out"):
    """The record of a signal wait that ended with no signal: its ``timeout``
    passed, or an operator ran the job now (``Job.steps`` shows it as this;
    the row holds an empty ``step:<name>``). ``wait_for`` raises SignalTimeout."""


TIMED_OUT = TimedOut()


class Gone(enum.Enum):
    """The marker of a job whose row is gone, in what ``results`` and
    ``wait_many`` return: no row has the id any more (its retention passed,
    the count bound or ``purge``/``delete`` removed it) or it was never
    enqueued. Not ``None``, which stays a job's own result (or, from
    ``wait_many``, a job not finished by the timeout). Falsy, so
    ``[j for j in jobs if j]`` keeps only what was found; test it with
    ``value is leaseq.GONE``. docs/events.md, "Waiting for results"."""

    GONE = "gone"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "leaseq.GONE"


GONE: Final = Gone.GONE
"""The one ``Gone`` value (see ``Gone``)."""


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

    One count per ``State``, named as the state (``counts()`` gives them in
    ``State`` order; tests/test_states_declared_once.py fails when a state has
    none): the jobs in it now, succeeded and cancelled rows not yet expired.
    ``totals`` are counters since the queue was created (``enqueued``,
    ``succeeded``, ``failed``, ``dead``, ``expired``, ``released``,
    ``retried``, ``cancelled``). Times are seconds.
    """

    queue: str
    pending: int
    scheduled: int
    waiting: int = 0
    """Jobs waiting for their parents (``depends_on``)."""
    active: int
    suspended: int = 0
    """Jobs asleep (``current_job().sleep``) until their ``run_at``."""
    succeeded: int
    dead: int
    cancelled: int
    expired: int
    """Active jobs whose lease deadline has passed but that no reaper took yet."""
    expiring_soon: int
    """Active jobs whose lease ends within the next ``soon`` seconds."""
    overdue: int = 0
    """Scheduled jobs already due, not yet made pending (the next claim or reap
    does): ``backlog`` counts them."""
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
    cost_limit: float | None = None
    """The queue's cost limit: cost claimed per ``cost_per`` s (``set_limits(cost_rate=)``)."""
    cost_per: float | None = None
    recent_cost: float | None = None
    """Cost claimed in the last ``cost_per`` seconds, settled where settled (None
    without a cost limit)."""

    def counts(self) -> dict[State, int]:
        """The number of jobs in each state, in ``State`` order."""
        return {state: getattr(self, state.value) for state in State}

    @property
    def backlog(self) -> int:
        """Jobs that could run now: pending, plus scheduled ones already due (the
        figure an autoscaler scales workers on; docs/deploy.md)."""
        return self.pending + self.overdue


class Step(msgspec.Struct, frozen=True):
    """One job of ``Queue.enqueue_flow``: its payload, its id and its job options.

    ``depends_on`` may name steps earlier in the same call (by id) and jobs that
    already exist in the queue. ``id=None`` makes a fresh id (only later steps
    can then not name it; give ids to the steps others depend on). The other
    fields are the job options of ``enqueue`` (``JobOptions``), None meaning
    the queue's default.
    """

    payload: Any
    id: str | None = None
    depends_on: Sequence[str] = ()
    on_parent_failure: ParentFailure = "cancel"
    kind: str | None = None
    delay: float | None = None
    priority: int = 0
    max_attempts: int | None = None
    timeout: float | None = None
    group: str | None = None
    cost: float | None = None
    expires: float | datetime.datetime | None = None


DEFAULT_BACKOFF = Backoff()
"""The queue default: 1 s doubling to at most an hour, half of each delay jittered."""
