"""Every queue operation, written once, without I/O.

An operation is a generator: it yields *steps* (a script ``Call``, or one of
the few plain commands below) and receives each step's reply through
``send()``; its return value is the operation's result. A leaseq error
raised by a step is thrown back into the generator at the ``yield``, so an
operation catches what it can step over (a damaged row in ``retry_all_dead``)
exactly as if the call had been made inline.

``QueueOps`` holds one queue's operations; ``leaseq.store.sharded_ops.ShardedOps``
those of a queue spread over hash tags, built from its shards' ``QueueOps``. The public
classes (``leaseq.Queue``, ``leaseq.aio.Queue``, ``leaseq.ShardedQueue``,
``leaseq.aio.ShardedQueue``) only run these generators on their client
(``leaseq.transport.drive``): one implementation of each operation, many transports.
The ``sync_op`` / ``async_op`` wrappers there keep each signature and
docstring, so the public methods are typed exactly as written here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from leaseq.errors import DamagedRow, JobNotFound, LeaseLost
from leaseq.store import admin as _admin
from leaseq.store import control as _control
from leaseq.store import events as _ev
from leaseq.store import history as _hist
from leaseq.store import limits as _lim
from leaseq.store import registry as _reg
from leaseq.store import schedules as _sch
from leaseq.store import validate as v
from leaseq.store.core import QueueCore
from leaseq.store.keys import QueueKeys, check_job_id
from leaseq.store.leases import Claimed, block_until, block_wait
from leaseq.store.produce import enqueue_traced
from leaseq.store.reads import FINISHED, done_ids, wait_names
from leaseq.store.replies import as_text
from leaseq.store.settings import parse_state
from leaseq.store.steps import Command, Feed, Listen, Op, Rows, Scan, Wake
from leaseq.types import Job, JobOptions, Lease, State, Stats

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["WAKE_SLICE", "QueueOps", "list_queues"]

R = TypeVar("R")


WAKE_SLICE = 0.1
"""Longest wait on one shard's wake list while a sharded blocking claim sits idle.

Wake lists of different shards are in different slots, so one BLPOP cannot
watch them all on a cluster: an idle claimer watches one shard at a time
and looks at all of them at least every ``WAKE_SLICE * shards`` seconds."""


def list_queues(prefix: str) -> Op[list[str]]:
    """Names (hash tags) of the queues under ``prefix``: one SCAN for the keys a
    queue keeps besides its job rows (``QueueKeys.queue_pattern``), so a queue
    whose meta hash went is still listed while any index of it is left."""
    keys = yield Scan(QueueKeys.queue_pattern(prefix))
    found = {QueueKeys.queue_of_key(prefix, as_text(key)) for key in keys}
    return sorted(name for name in found if name)


class QueueOps:
    """The operations of one queue (or one shard), over its ``QueueCore``."""

    def __init__(self, core: QueueCore) -> None:
        self.core = core
        self.keys = core.keys

    # -- producing ----------------------------------------------------------

    def enqueue(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> Op[str]:
        """Add one job; return its id (also when ``id`` already existed: then nothing changes).

        ``options`` (``leaseq.JobOptions``): ``max_attempts``, ``delay`` seconds
        (>= 0) before it may run, ``priority`` 0..1,000,000 (lower first, FIFO
        within one), ``group``, ``kind``, ``timeout``. Raises InvalidPayload,
        PayloadTooLarge, InvalidName or InvalidArgument before writing anything.
        """
        core = self.core
        ids = yield from enqueue_traced(
            core.name, False, lambda tp: core.enqueue_calls([payload], [id], options, tp)
        )
        return ids[0]

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        ids: Sequence[str] | None = None,
        **options: Unpack[JobOptions],
    ) -> Op[list[str]]:
        """Add many jobs in few script calls (chunks of 1000); return their ids in order.
        Every job gets the same ``options`` (as for ``enqueue``).

        Every item is validated and encoded first: one bad item rejects the
        whole call and nothing is written.
        """
        core, items = self.core, list(payloads)
        return (
            yield from enqueue_traced(
                core.name,
                True,
                lambda tp: core.enqueue_calls(items, ids, options, tp, caller="enqueue_many"),
            )
        )

    # -- consuming ------------------------------------------------------------

    def claim(
        self, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Op[Lease | None]:
        """Lease one job for ``ttl`` seconds, or return None.

        ``block``: seconds to wait for a job (None = do not wait). Before
        leasing, the script promotes due scheduled jobs and reaps a bounded
        number of expired leases.
        """
        leases = yield from self.claim_many(1, ttl=ttl, worker=worker, block=block)
        return leases[0] if leases else None

    def claim_many(
        self, count: int, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Op[list[Lease]]:
        """Lease up to ``count`` jobs in one script call (or wait up to ``block`` s for one)."""
        call = self.core.claim(count, ttl, worker)
        give_up = block_until(block, time.monotonic())
        while True:
            claimed = yield call
            leases = yield from self._settle(claimed)
            wait = block_wait(give_up, claimed, time.monotonic())
            if wait <= 0:
                return leases
            yield Wake(self.keys.wake, wait)

    def claim_now(
        self,
        count: int,
        ttl: float = 30.0,
        worker: str | None = None,
        started: int | None = None,
    ) -> Op[tuple[list[Lease], float | None]]:
        """One claim call that never waits, for loops that block their own way (Worker).

        Returns the leases (0..count) and the seconds until something may become
        claimable by itself — the next scheduled job falls due or the earliest
        lease ends (None: nothing is scheduled or leased). ``started``: how many
        leases go to a handler at once (None: all); the rest are prefetched, and
        a crash before their start refunds their attempt.
        """
        claimed = yield self.core.claim(count, ttl, worker, started)
        leases = yield from self._settle(claimed)
        return leases, claimed.wait

    def _settle(self, claimed: Claimed) -> Op[list[Lease]]:
        # A payload that will not decode into the queue's type can never run:
        # dead-letter it now rather than crash-loop a worker on it.
        for call in self.core.settle(claimed):
            with contextlib.suppress(LeaseLost):  # someone else already moved the job
                yield call
        return claimed.leases

    def nudge(self) -> Op[None]:
        """Push one wake-up token, ending one blocked claimer's wait now."""
        yield Command("rpush", (self.keys.wake, "1"))

    def wait_for_wake(self, timeout: float) -> Op[bool]:
        """Block up to ``timeout`` seconds on the wake list; True if a token was taken.

        Enqueues push tokens; a claim that empties pending deletes the list.
        Raises ServerUnavailable.
        """
        got = yield Wake(self.keys.wake, timeout)
        return bool(got)

    def extend(self, lease: Lease, ttl: float = 30.0) -> Op[Lease]:
        """Push the deadline to now + ``ttl`` (server clock), within ``lease_cap``
        of the claim; return the lease with its new deadline. Raises LeaseLost."""
        (result,) = yield self.core.extend([lease], ttl)
        if isinstance(result, LeaseLost):
            raise result
        renewed: Lease = result
        return renewed

    def extend_many(
        self, leases: Sequence[Lease], ttl: float = 30.0, started: Sequence[bool] | None = None
    ) -> Op[list[Lease | LeaseLost]]:
        """Heartbeat many leases in few calls (chunks of 500). Per lease, in order:
        the lease with its new deadline, or the LeaseLost it met (nothing written
        for that one). A worker's heartbeat for all it holds; ``started[i]`` says a
        prefetched lease's handler has started (a crash then charges it)."""
        out: list[Lease | LeaseLost] = []
        for call in self.core.extend_calls(leases, ttl, started):
            out += yield call
        return out

    def complete(
        self, lease: Lease, result: Any = None, *, effects: Sequence[Any] | None = None
    ) -> Op[None]:
        """Mark the job succeeded (storing ``result`` if not None). Raises LeaseLost
        (AlreadyFinished when a replay finds it done under this same token).

        ``effects``: Redis writes such as ``("HINCRBY", "app:{q}:totals", "sent", 1)``
        applied in the same script, only while the lease holds — exactly once or
        not at all. Allowed commands and key rules: ``leaseq.store.effects``. A bad
        effect raises InvalidArgument and nothing is written (the lease holds).
        """
        lost = yield self.core.complete(
            [lease],
            None if result is None else [result],
            None if effects is None else [effects],
        )
        if lost:
            raise lost[0]

    def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> Op[list[LeaseLost]]:
        """Complete many leases in few calls; return the refusals (empty if all held)."""
        lost: list[LeaseLost] = []
        for call in self.core.complete_calls(leases, results):
            lost += yield call
        return lost

    def fail(
        self, lease: Lease, error: object, retry_in: float | None = None, *, dead: bool = False
    ) -> Op[State]:
        """Record a failure. Retry after ``retry_in`` s (default: the queue's backoff)
        while attempts remain, else dead-letter; ``dead=True`` dead-letters at once.
        Returns the job's new state. Raises LeaseLost."""
        state: State = yield self.core.fail(lease, error, retry_in, dead)
        return state

    def release(self, lease: Lease) -> Op[None]:
        """Put the job back to pending now without spending the attempt (shutdown)."""
        yield self.core.release(lease)

    def once(self, lease: Lease, name: str) -> Op[bool]:
        """True the first time this job reaches the marker ``name`` (any attempt),
        False after. Set before the effect: a crash right after it skips the
        effect on redelivery. Raises LeaseLost."""
        first: bool = yield self.core.once(lease, name)
        return first

    # -- waiting for results ---------------------------------------------------

    def wait(self, job_id: str, timeout: float = 30.0) -> Op[Job | None]:
        """The job once it finished (succeeded, dead or cancelled), or None after
        ``timeout`` seconds. Raises JobNotFound when no row has this id (never
        enqueued, or gone: ``keep_succeeded`` passed, purged)."""
        jobs = yield from self.wait_many([job_id], timeout)
        return jobs[0]

    def wait_many(self, ids: Sequence[str], timeout: float = 300.0) -> Op[list[Job | None]]:
        """Wait for many jobs at once: per id, in order, its finished Job, or None
        where it had not finished by ``timeout`` seconds. No polling: the finishing
        scripts signal the queue's ``done`` stream; this listens on it (XREAD
        BLOCK) and reads only the rows it names. Raises JobNotFound for an id
        whose row is gone when looked at."""
        names = wait_names(ids)
        give_up = time.monotonic() + v.delay_ms(timeout, "timeout") / 1000.0
        out: list[Job | None] = [None] * len(names)
        where: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            where.setdefault(name, []).append(i)
        # Subscribe first (the stream's newest entry), then look at the rows:
        # a job that finishes in between is in the stream after the cursor.
        newest = yield Command("xrevrange", (self.keys.done, "+", "-", 1))
        cursor = as_text(newest[0][0]) if newest else "0-0"
        unfinished = yield from self._finished(list(where), where, out, missing_is_error=True)
        while unfinished:
            left = give_up - time.monotonic()
            if left <= 0:
                break
            entries = yield Listen(self.keys.done, cursor, left)
            named: set[str] = set()
            for entry_id, fields in entries:
                cursor = entry_id
                named.update(i for i in done_ids(fields) if i in unfinished)
            if named:
                still = yield from self._finished(sorted(named), where, out, True)
                unfinished -= named - still
        if unfinished:
            # A last look: a signal trimmed out of the stream (past ~10,000
            # finishing calls while this waiter was away) is not lost for good.
            yield from self._finished(sorted(unfinished), where, out, True)
        return out

    def _finished(
        self,
        names: list[str],
        where: dict[str, list[int]],
        out: list[Job | None],
        missing_is_error: bool,
    ) -> Op[set[str]]:
        """Read the rows of ``names`` (one pipeline); put the finished ones into
        ``out``; return the names still unfinished."""
        rows = yield Rows([self.keys.job(name) for name in names])
        still: set[str] = set()
        for name, raw in zip(names, rows, strict=True):
            if isinstance(raw, Exception):
                raise DamagedRow(name, "<key>", None, "not a hash")
            job = self.core.parse_job(name, raw)
            if job is None:
                if missing_is_error:
                    raise JobNotFound(name)
                continue
            if job.state in FINISHED:
                for i in where[name]:
                    out[i] = job
            else:
                still.add(name)
        return still

    def progress(self, lease: Lease, value: Any) -> Op[None]:
        """Store a small JSON ``value`` (<= 4096 bytes) as the job's ``progress``,
        fenced like every lease write. Raises LeaseLost, InvalidPayload."""
        yield self.core.progress(lease, value)

    # -- maintenance and operators ---------------------------------------------

    def reap(self) -> Op[tuple[int, int]]:
        """Hand back every expired lease: (returned to pending, dead-lettered)."""
        requeued = died = 0
        while True:
            r, d, more = yield self.core.reap()
            requeued, died = requeued + r, died + d
            if not more:
                return requeued, died

    def get(self, job_id: str) -> Op[Job | None]:
        """The job row, typed, or None. Raises DamagedRow for a row that will not read."""
        job_id = check_job_id(job_id)
        raw = yield Command("hgetall", (self.keys.job(job_id),))
        return self.core.parse_job(job_id, raw)

    def ls(
        self,
        state: State | str,
        *,
        offset: int = 0,
        limit: int = 100,
        damaged: list[DamagedRow] | None = None,
    ) -> Op[list[Job]]:
        """Jobs in ``state``, in index order (pending: next to run first).

        A row damaged by hand raises DamagedRow, unless ``damaged`` is a list:
        then it is appended there and the rest of the page is still returned.
        """
        st = parse_state(state)
        offset = max(0, int(offset))
        ids = yield Command("zrange", (self.keys.index(st.value), offset, offset + limit - 1))
        names = [as_text(i) for i in ids]
        # Every row is in the queue's slot: one pipeline, one node, even on a cluster.
        rows = (yield Rows([self.keys.job(job_id) for job_id in names])) if names else []
        return self.core.parse_page(names, rows, damaged)

    def stats(self, soon: float = 10.0) -> Op[Stats]:
        """Counts per state and more, in one consistent read."""
        stats: Stats = yield self.core.stats(soon)
        return stats

    def cancel(self, job_id: str) -> Op[bool]:
        """Cancel a pending or scheduled job: True if cancelled now, False if it already
        was. Raises JobNotFound, or JobStateError once it has started."""
        done: bool = yield self.core.cancel(job_id)
        return done

    def retry_dead(self, job_id: str, *, attempts: int | None = None) -> Op[int]:
        """Make a dead job pending again with ``attempts`` more tries (default: the
        queue's max_attempts). ``attempts`` in the row is kept, ``max_attempts``
        raised; returns the new max_attempts. Raises JobNotFound, JobStateError."""
        bound: int = yield self.core.retry(job_id, attempts)
        return bound

    def retry_all_dead(
        self, *, attempts: int | None = None, damaged: list[DamagedRow] | None = None
    ) -> Op[int]:
        """Retry every job that was dead when the call began, once each; returns
        how many. A row damaged by hand stays dead and is stepped over (appended
        to ``damaged`` when given); a stale dead-set entry is dropped."""
        result = yield from _admin.retry_all_dead_op(self.core, attempts)
        if damaged is not None:
            damaged.extend(result.damaged)
        return result.done

    def purge(self, state: State | str, *, damaged: list[DamagedRow] | None = None) -> Op[int]:
        """Delete every job that was in ``state`` (not active) when the call began;
        returns how many rows went. A job key that is not a hash is stepped over
        (appended to ``damaged`` when given)."""
        result = yield from _admin.purge_op(self.core, state)
        if damaged is not None:
            damaged.extend(result.damaged)
        return result.done

    def reset_clock(self) -> Op[tuple[float | None, float]]:
        """Drop the queue's clock floor after a server clock that ran ahead was
        set back; returns (the floor dropped or None, server time), epoch seconds."""
        dropped: tuple[float | None, float] = yield self.core.reset_clock()
        return dropped

    # -- schedules and limits (docs/design.md, "Flow control") ----------------------

    def schedule(
        self,
        name: str,
        payload: Any,
        *,
        cron: str | None = None,
        tz: str | None = None,
        every: float | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
    ) -> Op[_sch.Schedule]:
        """Create or change (upsert) the schedule ``name``: one job with ``payload`` per
        due time, by ``cron`` (in zone ``tz``, default UTC) or ``every`` seconds.
        Raises InvalidArgument (also for a bad cron or zone) before writing."""
        return (
            yield from _sch.schedule(
                self.core,
                name,
                payload,
                cron=cron,
                tz=tz,
                every=every,
                max_attempts=max_attempts,
                priority=priority,
            )
        )

    def unschedule(self, name: str) -> Op[bool]:
        """Remove the schedule ``name``: True if it existed (its jobs are left alone)."""
        existed: bool = yield _sch.unschedule(self.core, name)
        return existed

    def schedules(self) -> Op[list[_sch.Schedule]]:
        """Every schedule of this queue, soonest due first."""
        return (yield from _sch.schedules(self.core))

    def tick(self) -> Op[int]:
        """Make the one job of each schedule whose due time has come (server clock);
        returns how many jobs were made. Safe to call from any number of processes."""
        return (yield from _sch.tick(self.core))

    def set_limits(
        self,
        *,
        concurrency: int | _lim.Unset | None = _lim.UNSET,
        rate: int | _lim.Unset | None = _lim.UNSET,
        per: float | _lim.Unset | None = _lim.UNSET,
        group_concurrency: int | _lim.Unset | None = _lim.UNSET,
    ) -> Op[_lim.Limits]:
        """Change the queue's global limits, kept in Redis and enforced by every claim:
        at most ``concurrency`` active leases, at most ``rate`` claims per ``per`` s.
        None removes a limit; one not given stays. Returns the limits now in force."""
        limits: _lim.Limits = yield _lim.set_limits(
            self.core, concurrency, rate, per, group_concurrency
        )
        return limits

    def limits(self) -> Op[_lim.Limits]:
        """The queue's global limits, with how many leases are active and claims recent."""
        limits: _lim.Limits = yield _lim.read_limits(self.core)
        return limits

    # -- steering the whole queue --------------------------------------------------

    def pause(self) -> Op[bool]:
        """Stop handing out jobs, for every worker at once (the claim script checks
        the flag). Enqueue still works; leases in flight finish. True if paused now,
        False if it already was."""
        paused: bool = yield _control.pause(self.core)
        return paused

    def resume(self) -> Op[bool]:
        """Hand out jobs again and wake blocked claimers. True if it was paused."""
        resumed: bool = yield _control.resume(self.core)
        return resumed

    def drop(self, *, force: bool = False) -> Op[int]:
        """Delete the whole queue: every job, its counters and flags; returns how many
        rows went. Paused from the first call on (1,000 jobs per call). Raises
        JobStateError while leases are in flight, unless ``force``: then their
        holders' completions meet LeaseLost."""
        deleted = 0
        while True:
            gone, remaining = yield _control.drop(self.core, force)
            deleted += int(gone)
            if remaining == 0:
                return deleted

    def delete(self, job_id: str) -> Op[str]:
        """Delete one job that holds no lease (row and index entry); returns the
        state it was in. Raises JobNotFound, or JobStateError for an active job."""
        state: str = yield _control.delete(self.core, job_id)
        return state

    def run_now(self, job_id: str) -> Op[None]:
        """Make a scheduled job (a delay or a retry's backoff) claimable now.
        Raises JobNotFound, or JobStateError when it is not scheduled."""
        yield _control.run_now(self.core, job_id)

    # -- workers -----------------------------------------------------------------

    def register_worker(
        self, worker: str, *, ttl: float, concurrency: int = 0, done: int = 0, running: int = 0
    ) -> Op[None]:
        """Write or refresh ``worker``'s row (host, pid, counts) for ``ttl`` seconds;
        workers call it with their heartbeat (``leaseq.store.registry``)."""
        yield _reg.register(
            self.core, worker, ttl=ttl, concurrency=concurrency, done=done, running=running
        )

    def unregister_worker(self, worker: str) -> Op[None]:
        """Remove ``worker``'s row now (a clean stop)."""
        yield _reg.unregister(self.core, worker)

    def workers(self) -> Op[list[_reg.WorkerInfo]]:
        """The workers alive on this queue (rows not expired), oldest first."""
        found: list[_reg.WorkerInfo] = yield _reg.list_workers(self.core)
        return found

    def history(self) -> Op[_hist.History]:
        """Counts (enqueued, succeeded, failed, dead, expired) per minute over the
        last hour and per ten minutes over the last day, kept in Redis by the
        scripts that bump the counters (``leaseq.store.history``)."""
        found: _hist.History = yield _hist.read(self.core)
        return found

    # -- the event stream ------------------------------------------------------------

    def events(
        self,
        since: str | _ev.Event | None = None,
        *,
        block: float | None = None,
        limit: int | None = None,
    ) -> Feed[_ev.Event]:
        """Iterate the queue's job transitions (``leaseq.Event``), oldest first.

        ``since``: None or ``'0'`` from the oldest entry kept, ``'$'`` only those
        written from now on, a stream id to resume after that entry, or an Event
        to resume right after that transition (no loss, no duplicate).
        ``block``: None ends at the end of the stream; else wait up to that many
        seconds for more each time it is caught up, ending after a wait that
        brought nothing; ``math.inf`` follows forever. ``limit``: end after that
        many events. Raises InvalidArgument (at the call) for a bad argument.
        """
        cursor, skip = _ev.check_since(since)
        reader = _ev.EventReader(
            self.keys.events,
            cursor,
            skip,
            _ev.check_block(block),
            _ev.check_limit(limit),
            since.stream_id if isinstance(since, _ev.Event) else "",
        )
        while not reader.finished:
            yield reader.page()

    def set_events(
        self, enabled: bool | None = None, *, maxlen: int | None = None
    ) -> Op[_ev.EventSettings]:
        """Turn the queue's event stream on or off and set its bound (entries, kept
        approximately); None leaves a setting as it is. Stored in the queue's meta
        hash and read by every script at every call, so every worker follows at
        once. Returns the settings now in force. Raises InvalidArgument."""
        settings: _ev.EventSettings = yield _ev.set_settings(self.core, enabled, maxlen)
        return settings

    def event_settings(self) -> Op[_ev.EventSettings]:
        """The queue's event switch and bound, and how many entries the stream holds."""
        settings: _ev.EventSettings = yield _ev.read_settings(self.core)
        return settings
