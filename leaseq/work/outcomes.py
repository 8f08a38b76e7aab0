"""The one outcome policy both workers share, and how the threaded worker writes it.

:func:`decide` is a pure function (no I/O): from what a handler returned or
raised it says whether the job completes, retries (and in how long) or dies,
and what goes in ``last_error``. ``leaseq.Worker`` and ``leaseq.aio.Worker``
both call it and only carry out the :class:`Outcome` it returns, so the two
cannot drift apart.

:func:`error_kind` sorts what a *worker's own* queue call raised:
``transient`` (``ServerUnavailable`` and its subclasses: a server down, a
failover, a busy server) is retried with backoff and logged once per outage
(:class:`Outage`); ``job`` (the lease is lost, the row is damaged, a value
was refused) concerns that one job and is logged; anything else
(``fatal``: bad credentials, a queue key of the wrong type, a script the
server refuses) ends ``run()`` with that error.

The rest is the threaded worker's record of a held lease and its
``OutcomeWriter``: completions that follow each other are written in one
``complete_many`` call; failures, retries, dead-letters and releases one
script call each. Every write carries the lease's token, so a lease lost
meanwhile is refused by the server, never overwritten.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from leaseq.errors import (
    AlreadyFinished,
    DamagedRow,
    InvalidArgument,
    InvalidPayload,
    LeaseLost,
    LeaseqError,
    PayloadTooLarge,
    ServerUnavailable,
)
from leaseq.handler import Dead, JobContext, Retry, UnknownKind, describe_error, format_traceback
from leaseq.protocols import members
from leaseq.store import validate as v
from leaseq.types import Lease

logger = logging.getLogger("leaseq.worker")

WRITE_BATCH = 1000
"""Most completions written in one complete_many call (it chunks further)."""
BACKOFF_START, BACKOFF_CAP = 0.1, 5.0
"""Seconds between attempts to reach a Redis that is down: doubling, capped, jittered."""


def completion_batch(limit: int = WRITE_BATCH) -> Callable[[Lease], bool]:
    """A new ``complete_many`` call, as ``admit(lease)``: True (and the lease
    counted in) while the call has room for it and holds no lease of the same
    job id and attempt yet; False leaves it for a later call.

    Why the pair once: ``complete_many`` names a refused lease by job id and
    attempt only (``LeaseLost.job_id``, ``.token``), and those do not tell every
    lease apart: the queues of a set may hold one id, and a job deleted and
    enqueued again under its id starts over at attempt 1. With each pair once
    in a call, each refusal is its own lease's. Both workers batch through this."""
    named: set[tuple[str, int]] = set()

    def admit(lease: Lease) -> bool:
        name = (lease.id, lease.attempt)
        if len(named) >= limit or name in named:
            return False
        named.add(name)
        return True

    return admit


Encode = Callable[[Any, str], bytes]
"""The queue's encoder (``Codec.encode``): raises InvalidPayload / PayloadTooLarge."""


# -- prefetch --------------------------------------------------------------------

CLAIM_BATCH = 500
"""Most leases asked for in one claim call."""
PREFETCH_HORIZON = 0.05
"""With no fixed ``prefetch``, hold about this many seconds of work beyond the
jobs running: fast jobs get big batches (few round trips), slow jobs get
few spare leases (other workers are not starved of them)."""
SPARE_WAIT_FLOOR = 5.0
"""Seconds a spare may always wait, however short the ttl (see ``Prefetch.overdue``)."""
HOLD_WINDOW = 5.0
"""Longest span of finished jobs that decides whether spares come back after a
hand-back (``Prefetch.adapt``): a long ttl must not keep a worker without
spares for that long once its jobs are fast again."""


class Prefetch:
    """How many leases a worker holds at most (``limit``): ``concurrency`` running
    and spare ones claimed ahead, so a handler never waits for a round trip. A
    fixed ``prefetch`` of spares, or (None) about ``PREFETCH_HORIZON`` of work at
    the rate jobs finish, never fewer than ``concurrency`` nor more than
    ``CLAIM_BATCH``. The threaded and the async worker both follow it.

    A spare is meant to wait about ``PREFETCH_HORIZON``; heartbeats keep it as
    long as the worker lives (a waiting lease is not capped). So one that has
    waited ``max_wait`` seconds (``ttl``, at least ``SPARE_WAIT_FLOOR``) is
    ``overdue``: every slot has been busy that long (hung handlers, say), and
    the worker releases it (no attempt spent, no crash refund used) for another
    worker. The ttl because a crashed worker's spare would be free again after
    that long anyway: a live one should not hold it longer. The floor because a
    short ttl must not turn a brief wait into a release and a claim. After such
    a hand-back (``handed_back``) the worker holds no spares (it claims only for
    idle slots), or it would claim the same jobs straight back, and again at
    every freed slot while handlers stay that slow. Spares come back once
    jobs finish fast enough to use them: at a rate of twice the spares it
    would hold per ``max_wait``, measured over at least ``max_wait`` or
    ``HOLD_WINDOW``, the shorter (``adapt`` watches)."""

    def __init__(
        self,
        concurrency: int,
        prefetch: int | None,
        now: float,
        finished: int = 0,
        ttl: float = 0.0,
    ) -> None:
        """``finished``: the running count of jobs done that ``adapt`` will be given,
        as it stands now (a worker's count may carry over from an earlier run).
        ``ttl``: the worker's lease length, seconds (the spares' ``max_wait``)."""
        self.concurrency = concurrency
        self.fixed = prefetch is not None
        self._limit = concurrency + (concurrency if prefetch is None else prefetch)
        self._at, self._seen = now, finished
        self.max_wait = max(ttl, SPARE_WAIT_FLOOR)
        self._held_back = False
        # While held back: the (time, finished count) its throughput is measured from.
        self._since: tuple[float, int] | None = None

    @property
    def limit(self) -> int:
        """Most leases to hold now: only ``concurrency`` after spares were handed back."""
        return self.concurrency if self._held_back else self._limit

    def adapt(self, finished: int, now: float) -> None:
        """Re-size an adaptive prefetch from ``finished`` (a running count of jobs done),
        and after a hand-back, take spares again once jobs finish fast enough."""
        if self._held_back:
            if self._since is None:
                self._since = (now, finished)
            elif (took := now - self._since[0]) >= min(self.max_wait, HOLD_WINDOW) and took > 0:
                # At the rate jobs finished since, the spares it would hold would be
                # used in half of max_wait: they would not wait too long.
                done = (finished - self._since[1]) * self.max_wait / took
                if done >= 2 * (self._limit - self.concurrency):
                    self._held_back = False
                self._since = (now, finished)
        if self.fixed or now - self._at < 0.1:
            return
        rate = (finished - self._seen) / (now - self._at)
        self._at, self._seen = now, finished
        spare = min(max(round(rate * PREFETCH_HORIZON), self.concurrency), CLAIM_BATCH)
        self._limit = self.concurrency + spare

    def room(self, held: int) -> bool:
        """Time to claim with ``held`` leases held: a handler is idle, or half the
        spares are spent. Refilling at half, not at every freed lease, keeps claims
        large (one call for many jobs) while the other half keeps the handlers busy."""
        if held < self.concurrency:
            return True
        return self.limit - held >= max(1, (self.limit - self.concurrency) // 2)

    def overdue(self, since: float, now: float) -> bool:
        """A spare claimed at ``since`` has waited too long by ``now`` (same clock,
        seconds): hand it back (then call ``handed_back``)."""
        return now - since >= self.max_wait

    def handed_back(self) -> None:
        """Overdue spares went back: hold no spares until jobs finish fast enough."""
        self._held_back = True
        self._since = None


# -- shutdown ----------------------------------------------------------------------

H = TypeVar("H")


def past_grace(held: Iterable[H], returned: Callable[[H], bool]) -> tuple[list[H], list[H]]:
    """What a worker does with its held jobs once a stop's grace has run out, the one
    rule both follow: ``(running, finished)``. Handlers still running are stopped
    (cancelled, or for a thread, its outcome discarded) and their jobs released.
    Those that have ``returned`` are not running: their outcome is written, though
    the worker may not have picked it up yet (an outcome set but not queued; a job
    task not resumed, or its write in flight). Released, a finished job would run
    again; cut off mid-write, it would stay active and run again after expiry."""
    running: list[H] = []
    finished: list[H] = []
    for item in held:
        (finished if returned(item) else running).append(item)
    return running, finished


# -- the policy ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What becomes of a job whose handler finished (or that never started).

    ``kind``: ``complete`` (store ``result``), ``retry`` (``fail``: after
    ``retry_in`` seconds, None = the queue's backoff; dead once attempts are
    used up), ``dead`` (``fail(dead=True)``), ``release`` (back to pending,
    attempt refunded: shutdown only). ``error`` is the ``last_error`` text;
    ``label`` names the cause in log lines.
    """

    kind: Literal["complete", "retry", "dead", "release"]
    result: Any = None
    retry_in: float | None = None
    error: str = ""
    label: str = ""
    traceback: str = ""
    """The handler's traceback without leaseq's frames ('' for none): the row's
    ``traceback`` field."""


RELEASE = Outcome("release", label="release")
OVERDUE = Outcome("release", label="overdue", error="waited too long for a handler slot")
"""A spare handed back unstarted, ``Prefetch.overdue`` (the threaded worker's record)."""
DONE = Outcome("complete", label="done")
"""A handler that returned None (the one outcome of most jobs: made once)."""


class HandlerTimeout(Exception):
    """What a worker hands ``decide`` when a handler ran past its time limit."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


def job_timeout(lease: Lease, default: float | None) -> float | None:
    """The time limit of ``lease``'s handler, seconds: the job's own
    (``enqueue(..., timeout=)``), else the worker's ``timeout``; None for none."""
    return lease.timeout if lease.timeout is not None else default


def decide(
    raised: BaseException | None, result: Any = None, encode: Encode | None = None
) -> Outcome:
    """The outcome of a handler that returned ``result`` (``raised`` None) or raised.

    - a return value completes the job, stored as its result — unless it can
      never be stored (``encode`` refuses it: too large, or not data). The
      handler has run to the end and its side effects happened, so running it
      again would repeat them for a result that still would not fit: the job is
      **dead-lettered at once**, ``last_error`` naming the size and the limit
      (or why it does not encode); an operator can fix the handler and retry it;
    - ``leaseq.Retry(in_)`` retries after ``in_`` seconds; an ``in_`` that is
      not a valid delay (negative, NaN, over a year) falls back to the queue's
      backoff, and ``last_error`` says so;
    - ``leaseq.Dead(reason)`` dead-letters at once;
    - ``HandlerTimeout(n)`` (the handler ran past its time limit) fails the attempt
      with ``last_error`` "timed out after n s", retried or dead-lettered by the
      usual rules;
    - anything else (any ``BaseException``: a handler's ``SystemExit`` is its
      own failure, not the worker's) fails the job with ``Type: message`` in
      ``last_error`` and the traceback (minus leaseq's frames) apart;
      cancellation of an async handler reads "cancelled".
    """
    if raised is None:
        if result is None:
            return DONE
        if encode is not None:
            problem = _unstorable(result, encode)
            if problem:
                return Outcome("dead", error=problem, label="result")
        return Outcome("complete", result=result, label="done")
    if isinstance(raised, Retry):
        text = f"Retry: {raised.reason}"
        try:
            v.delay_ms(raised.in_, "Retry.in_")
        except InvalidArgument as exc:
            return Outcome(
                "retry", error=f"{text} (bad delay, queue backoff used: {exc})", label="retry"
            )
        return Outcome("retry", retry_in=raised.in_, error=text, label="retry")
    if isinstance(raised, Dead):
        return Outcome("dead", error=f"Dead: {raised.reason}", label="dead")
    if isinstance(raised, HandlerTimeout):  # the worker's verdict: an ordinary failure
        return Outcome("retry", error=str(raised), label="timeout")
    if isinstance(raised, UnknownKind):  # not run: retried so a rolling deploy can serve it
        return Outcome("retry", error=str(raised), label="kind")
    if isinstance(raised, asyncio.CancelledError):
        return Outcome("retry", error="CancelledError: the handler was cancelled", label="error")
    return Outcome(
        "retry", error=describe_error(raised), label="error", traceback=format_traceback(raised)
    )


def _unstorable(result: Any, encode: Encode) -> str:
    """Why ``result`` can never be stored ('' if it can)."""
    try:
        encode(result, "result")
    except PayloadTooLarge as exc:
        return (
            f"ResultTooLarge: the handler returned a result of {exc.size} bytes encoded, over "
            f"the queue's max_payload_bytes of {exc.limit}; the handler had finished (its "
            "side effects happened), so the job is dead-lettered, not run again"
        )
    except InvalidPayload as exc:
        return (
            f"InvalidResult: the handler's result (of type {type(result).__qualname__}) cannot "
            f"be stored: {exc}; the handler had finished (its side effects happened), so the "
            "job is dead-lettered, not run again"
        )
    return ""


def check_worker(
    handler: object, concurrency: object, ttl: object, grace: object, reap: object
) -> None:
    """The settings both workers take, checked alike. Raises InvalidArgument."""
    v.worker_settings(concurrency, ttl, grace, reap)
    if not callable(handler):
        raise InvalidArgument(f"handler must be callable, not {handler!r}")


def result_encoder(queue: Any) -> Callable[[Lease], Encode | None]:
    """The encoder a lease's result is stored with, by the lease: a plain, async or
    sharded queue has one; each queue of a set its own (their ``max_payload_bytes``
    may differ, and ``decide`` must refuse what the job's own queue will not store)."""
    queues = members(queue)
    if len(queues) > 1:
        by_name = {q.name: _encoder(q) for q in queues}
        first = by_name[queues[0].name]
        return lambda lease: by_name.get(lease.queue, first)
    encode = _encoder(queues[0])
    return lambda lease: encode


def _encoder(queue: Any) -> Encode | None:
    core = getattr(queue, "_core", None)
    if core is None and getattr(queue, "shards", None):
        core = getattr(queue.shards[0], "_core", None)
    codec = getattr(core, "codec", None)
    return None if codec is None else codec.encode


# -- errors of the worker's own calls -------------------------------------------------


HELD_POLL = 0.25
"""Longest a burst run sleeps before it claims again while a limit holds pending jobs."""


def held_back(queues: tuple[Any, ...]) -> bool:
    """After a claim that got nothing (burst): whether jobs are still pending in a
    queue that is not paused, so a limit held the claim back. Limits are at least 1
    and rate windows pass: such jobs become claimable by themselves."""
    return any(_held(q.stats()) for q in queues)


async def held_back_async(queues: tuple[Any, ...]) -> bool:
    """``held_back`` for ``aio`` queues."""
    for q in queues:
        if _held(await q.stats()):
            return True
    return False


def _held(stats: Any) -> bool:
    return bool(stats.pending) and not stats.paused


def held_wait(hint: float | None) -> float:
    """How long a burst run waits for held jobs: the claim's hint, within bounds."""
    return min(max(hint if hint is not None else HELD_POLL, 0.01), HELD_POLL)


def error_kind(exc: BaseException) -> Literal["transient", "job", "fatal"]:
    """How a worker treats an error its own queue call raised (see the module doc)."""
    if isinstance(exc, ServerUnavailable):
        return "transient"
    if isinstance(exc, (LeaseLost, DamagedRow, InvalidArgument)):
        return "job"
    return "fatal"


class Backoff:
    """Exponential, capped, jittered waits for retrying a Redis that is down."""

    def __init__(self) -> None:
        self.delay = 0.0

    def next(self) -> float:
        self.delay = min(BACKOFF_CAP, max(BACKOFF_START, self.delay * 2))
        return self.delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.delay = 0.0


class Outage:
    """One clear line per outage: a WARNING when calls start failing with a
    transient error, DEBUG for the retries after it, INFO once calls work again.
    Shared by the threads (or tasks) of one worker."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.since: float | None = None
        self._lock = threading.Lock()

    def failed(self, what: str, exc: BaseException, backoff: Backoff) -> float:
        """Log the failure; the seconds to wait before trying again."""
        delay = backoff.next()
        with self._lock:
            first = self.since is None
            if first:
                self.since = time.monotonic()
        log_job(
            self.queue,
            logging.WARNING if first else logging.DEBUG,
            None,
            "%s failed: %s; retrying in %.1fs, backing off up to %gs%s",
            what,
            exc,
            delay,
            BACKOFF_CAP,
            " (until Redis answers, retries are logged at DEBUG)" if first else "",
        )
        return delay

    def ok(self) -> None:
        """A call went through: end the outage, if there was one."""
        if self.since is None:
            return
        with self._lock:
            since, self.since = self.since, None
        if since is not None:
            log_job(
                self.queue,
                logging.INFO,
                None,
                "Redis answers again after %.1fs",
                time.monotonic() - since,
            )


# -- the threaded worker's record and writer --------------------------------------


@dataclass(eq=False)
class Task:
    """One held lease of the threaded worker. ``outcome`` is set by the handler
    thread once it is done (or to RELEASE for a lease handed back unstarted)."""

    lease: Lease
    ctx: JobContext
    next_beat: float
    """When to extend next, ``time.monotonic()`` seconds."""
    outcome: Outcome | None = None
    prefetched: bool = False
    """Claimed as a prefetch: the server refunds its attempt if it expires unstarted."""
    started: bool = False
    """Its handler has begun (set by the handler thread)."""
    reported: bool = False
    """The server has been told (by a heartbeat) that it started."""
    limit: float | None = None
    """The handler's time limit, seconds (``job_timeout``), set when it starts."""
    since: float = 0.0
    """When it was claimed, ``time.monotonic()`` seconds (how long a spare has waited)."""
    timeout_at: float = float("inf")
    """When the handler's time is up, ``time.monotonic()`` seconds."""
    timed_out: bool = False
    """The reporter failed the attempt for its timeout; what the handler does later is discarded."""
    returned: bool = False
    """The handler thread has returned (or raised)."""
    handed_back: bool = False
    """Released by this worker (not lost to another): at shutdown while its handler
    ran, or unstarted, a spare that waited too long (no handler thread runs it then)."""

    @property
    def key(self) -> tuple[str, str, int, int]:
        """This lease among the worker's: queue, job id, attempt and the row's
        incarnation (the queues of a set may hold one id; a job deleted and
        enqueued again under its id starts over at attempt 1)."""
        lease = self.lease
        return lease.queue, lease.id, lease.attempt, lease.incarnation


def extend_due(queue: Any, due: list[Task], now: float, ttl: float, every: float) -> None:
    """The threaded worker's heartbeat: extend every lease in ``due`` in one fenced
    call; a lease found lost gets ``ctx.lost`` set (and ``ctx.cancelled`` when the
    job was cancelled), the others their next beat.
    Prefetched leases whose handler has started since are flagged, so the server
    stops counting them as unstarted (a crash from now on spends the attempt)."""
    if not due:
        return
    news = [t.prefetched and t.started and not t.reported for t in due]
    results = queue.extend_many([t.lease for t in due], ttl, news if any(news) else None)
    for task, result, new in zip(due, results, news, strict=True):
        if isinstance(result, LeaseLost):
            if result.state == "cancelled":
                task.ctx.cancelled.set()
            task.ctx.lost.set()
            log_job(queue.name, logging.WARNING, task, "heartbeat found the lease lost: %s", result)
        else:
            task.lease = task.ctx.lease = result
            task.next_beat = now + every
            task.reported = task.reported or new


def log_job(queue: str, level: int, task: Task | Lease | None, msg: str, *args: Any) -> None:
    """Log with queue, job id and attempt on the line (and as ``extra`` fields)."""
    if not logger.isEnabledFor(level):
        return
    lease = task.lease if isinstance(task, Task) else task
    job, attempt = ("-", "-") if lease is None else (lease.id, str(lease.attempt))
    logger.log(
        level,
        "queue=%s job=%s attempt=%s " + msg,
        queue,
        job,
        attempt,
        *args,
        extra={"queue": queue, "job_id": job, "attempt": attempt},
    )


def log_written(queue: str, lease: Lease, outcome: Outcome, state: str) -> None:
    """The line both workers log when a failure, retry or dead-letter is written."""
    first = outcome.error.splitlines()[0] if outcome.error else ""
    log_job(queue, logging.WARNING, lease, "%s -> %s: %s", outcome.label, state, first)


class OutcomeWriter:
    """Writes finished tasks in order; ``holds`` says whether a task's lease is still
    ours, ``settle`` forgets tasks once written (or discarded)."""

    def __init__(
        self,
        queue: Any,
        counts: dict[str, int],
        holds: Callable[[Task], bool],
        settle: Callable[[list[Task]], None],
    ) -> None:
        self.queue = queue
        self.counts = counts
        self.holds = holds
        self.settle = settle

    def _log(self, level: int, task: Task | None, msg: str, *args: Any) -> None:
        log_job(self.queue.name, level, task, msg, *args)

    def write(self, unwritten: list[Task]) -> None:
        """Write outcomes in order, removing each from ``unwritten`` once written.
        Raises ServerUnavailable (what is left stays in ``unwritten``) and fatal errors."""
        while unwritten:
            head = unwritten[0]
            outcome = head.outcome or RELEASE
            if not self.holds(head):
                # Lost to a heartbeat, or already handed back at shutdown.
                if head.ctx.lost.is_set() and outcome.kind != "release" and not head.handed_back:
                    self.counts["lost"] += 1
                    self._log(logging.WARNING, head, "lease was lost: outcome discarded")
                unwritten.pop(0)
                self.settle([head])
                continue
            if outcome.kind == "complete":
                # The completions that follow in order, as far as one call takes them.
                admit = completion_batch()
                admit(head.lease)
                n = 1
                while n < len(unwritten):
                    nxt = unwritten[n]
                    if not (nxt.outcome and nxt.outcome.kind == "complete" and self.holds(nxt)):
                        break
                    if not admit(nxt.lease):
                        break
                    n += 1
                run = unwritten[:n]
                self._complete(run)
                del unwritten[:n]
                self.settle(run)
                continue
            self._write_one(head, outcome)
            unwritten.pop(0)
            self.settle([head])

    def _complete(self, tasks: list[Task]) -> None:
        # Every result was checked by decide() with the queue's own encoder.
        leases = [t.lease for t in tasks]
        results = [t.outcome.result if t.outcome else None for t in tasks]
        refused = self.queue.complete_many(leases, results)
        self.counts["succeeded"] += len(tasks) - len(refused)
        by_key = {(t.lease.id, t.lease.attempt): t for t in tasks}
        for exc in refused:
            task = by_key[(exc.job_id, exc.token)]
            if isinstance(exc, AlreadyFinished):
                self.counts["succeeded"] += 1  # a replay: our own completion landed
            else:
                self.counts["lost"] += 1
                self._log(logging.WARNING, task, "complete refused, result discarded: %s", exc)
        if logger.isEnabledFor(logging.DEBUG):
            for task in tasks:
                self._log(logging.DEBUG, task, "succeeded")

    def _write_one(self, task: Task, outcome: Outcome) -> None:
        if outcome.kind == "release":
            why = "shutdown" if outcome is RELEASE else outcome.error
            self.release(task, logging.INFO, f"released ({why})")
            return
        try:
            state = self.queue.fail(
                task.lease,
                outcome.error,
                outcome.retry_in,
                dead=outcome.kind == "dead",
                traceback=outcome.traceback or None,
            )
        except LeaseLost as exc:
            self.counts["lost"] += 1
            self._log(logging.WARNING, task, "fail refused, outcome discarded: %s", exc)
            return
        except (DamagedRow, InvalidArgument) as exc:
            self.counts["lost"] += 1
            self._log(logging.WARNING, task, "outcome not written (%s); lease will expire", exc)
            return
        self.counts["dead" if state.value == "dead" else "failed"] += 1
        log_written(self.queue.name, task.lease, outcome, state.value)

    def hand_back(self, leases: list[Lease]) -> None:
        """Release leases a claim brought in after the stop (never left active)."""
        for lease in leases:
            try:
                self.release(
                    Task(lease, JobContext(lease), 0.0), logging.INFO, "released (claimed at stop)"
                )
            except LeaseqError as exc:
                self._log(logging.WARNING, None, "could not release %s (%s)", lease.id, exc)

    def release(self, task: Task, level: int, done: str) -> None:
        """Hand the job back to pending now (no attempt spent) and log ``done``;
        a lease already lost is only logged. Raises ServerUnavailable."""
        try:
            self.queue.release(task.lease)
        except (LeaseLost, DamagedRow) as exc:
            self._log(logging.WARNING, task, "release refused: %s", exc)
            return
        self.counts["released"] += 1
        self._log(level, task, done)
