"""The operations on a whole queue, written once without I/O: operators and flow.

``OperatorOps`` is the half of ``leaseq.store.ops.QueueOps`` that reaps,
retries, purges and cancels, steers the queue (pause, limits, schedules, drop),
keeps the worker registry and reads the history and the event stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leaseq.errors import DamagedRow
from leaseq.store import admin as _admin
from leaseq.store import control as _control
from leaseq.store import events as _ev
from leaseq.store import history as _hist
from leaseq.store import limits as _lim
from leaseq.store import registry as _reg
from leaseq.store import schedules as _sch
from leaseq.store.core import QueueCore
from leaseq.store.keys import QueueKeys, check_job_id
from leaseq.store.replies import as_text
from leaseq.store.settings import parse_state
from leaseq.store.steps import Command, Feed, Op, Rows
from leaseq.types import Job, JobOptions, State, Stats

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OperatorOps"]


class OperatorOps:
    """The queue-wide operations of one queue (or one shard), over its ``QueueCore``."""

    core: QueueCore
    keys: QueueKeys

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
        """Cancel a waiting, pending, scheduled or active job: True if cancelled now,
        False if it already was. An active job's running attempt loses its lease at
        once (its complete, fail and extend raise LeaseLost; its worker learns at its
        next heartbeat and cancels an async handler). A job's waiting children follow
        their ``on_parent_failure``. Raises JobNotFound, or JobStateError once it has
        finished."""
        done: bool = yield self.core.cancel(job_id)
        return done

    def retry_dead(
        self, job_id: str, *, attempts: int | None = None, payload: Any = _admin.KEEP
    ) -> Op[int]:
        """Make a dead job pending again with ``attempts`` more tries (default: the
        queue's max_attempts). ``attempts`` in the row is kept, ``max_attempts``
        raised; returns the new max_attempts. ``payload``: a new payload, checked
        as ``enqueue`` checks one, written in the same call (edit and retry; the
        old one goes to the event stream). Raises JobNotFound, JobStateError,
        InvalidPayload, PayloadTooLarge."""
        bound: int = yield self.core.retry(job_id, attempts, payload)
        return bound

    def update(self, job_id: str, *, payload: Any) -> Op[None]:
        """Replace the payload of a job that has not started (waiting, pending or
        scheduled); the old one goes to the event stream entry of the change.
        Checked as ``enqueue`` checks a payload, before anything is written.
        Raises JobNotFound, JobStateError (active or finished), InvalidPayload,
        PayloadTooLarge."""
        yield self.core.update(job_id, payload)

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

    # -- schedules and limits (docs/flow-control.md) ----------------------------------

    def schedule(
        self,
        name: str,
        payload: Any,
        *,
        cron: str | None = None,
        tz: str | None = None,
        every: float | None = None,
        **options: Unpack[JobOptions],
    ) -> Op[_sch.Schedule]:
        """Create or change (upsert) the schedule ``name``: one job with ``payload`` per
        due time, by ``cron`` (in zone ``tz``, default UTC) or ``every`` seconds.
        ``options`` are those of ``enqueue`` for each job it makes (``kind``,
        ``group``, ``priority``, ``max_attempts``, ``timeout``; ``unique=Unique(key)``
        skips a due time while the previous job holding the key is unfinished;
        not ``delay``). Raises InvalidArgument (also for a bad cron or zone) before
        writing."""
        return (
            yield from _sch.schedule(
                self.core, name, payload, cron=cron, tz=tz, every=every, **options
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
        group_rate: int | _lim.Unset | None = _lim.UNSET,
        group_per: float | _lim.Unset | None = _lim.UNSET,
    ) -> Op[_lim.Limits]:
        """Change the queue's global limits, kept in Redis and enforced by every claim:
        at most ``concurrency`` active leases, at most ``rate`` claims per ``per`` s;
        per fair group, at most ``group_concurrency`` active leases and at most
        ``group_rate`` claims per ``group_per`` s (a sliding window on the server
        clock; a group at its rate sits out while the other groups go on).
        None removes a limit; one not given stays. Returns the limits now in force."""
        limits: _lim.Limits = yield _lim.set_limits(
            self.core, concurrency, rate, per, group_concurrency, group_rate, group_per
        )
        return limits

    def set_group_limits(
        self,
        group: str,
        *,
        concurrency: int | _lim.Unset | None = _lim.UNSET,
        rate: int | _lim.Unset | None = _lim.UNSET,
        per: float | _lim.Unset | None = _lim.UNSET,
    ) -> Op[_lim.Limits]:
        """Limits of one fair group's own (one heavy tenant), over the queue's
        ``group_concurrency`` and ``group_rate``: at most ``concurrency`` active
        leases and ``rate`` claims per ``per`` s for ``group``. None removes one (the
        queue's applies again); one not given stays. Returns the limits now in force
        (``Limits.groups`` lists the groups with limits of their own)."""
        limits: _lim.Limits = yield _lim.set_group_limits(self.core, group, concurrency, rate, per)
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
        self,
        worker: str,
        *,
        ttl: float,
        concurrency: int = 0,
        done: int = 0,
        running: int = 0,
        serving: str | None = None,
    ) -> Op[None]:
        """Write or refresh ``worker``'s row (host, pid, counts) for ``ttl`` seconds;
        workers call it with their heartbeat (``leaseq.store.registry``). ``serving``:
        the queues a worker of several queues serves (its row's ``queue``)."""
        yield _reg.register(
            self.core,
            worker,
            ttl=ttl,
            concurrency=concurrency,
            done=done,
            running=running,
            serving=serving,
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
