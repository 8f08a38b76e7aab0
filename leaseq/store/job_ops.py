"""The operations on jobs, written once without I/O: produce, consume, wait.

``JobOps`` is the half of ``leaseq.store.ops.QueueOps`` that moves and reads
single jobs and batches of them; ``OperatorOps`` (``leaseq.store.operator_ops``)
the half that acts on the whole queue.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from leaseq.errors import DamagedRow, JobNotFound, LeaseLost
from leaseq.store import validate as v
from leaseq.store.core import QueueCore
from leaseq.store.keys import QueueKeys
from leaseq.store.leases import Claimed, block_until, block_wait
from leaseq.store.produce import enqueue_traced
from leaseq.store.reads import done_ids, wait_names
from leaseq.store.replies import as_text
from leaseq.store.steps import Call, Command, Listen, Op, Rows, Wake, joined
from leaseq.types import Job, JobOptions, Lease, State

if TYPE_CHECKING:
    from typing_extensions import Unpack


__all__ = ["JobOps"]


class JobOps:
    """The job operations of one queue (or one shard), over its ``QueueCore``."""

    core: QueueCore
    keys: QueueKeys

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
        return (yield from joined(self.core.extend_calls(leases, ttl, started)))

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
        return (yield from joined(self.complete_calls(leases, results)))

    def complete_calls(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[Call[list[LeaseLost]]]:
        """The calls of ``complete_many``, every result encoded (one that will not
        encode raises now, before any call runs)."""
        return self.core.complete_calls(leases, results)

    def fail(
        self,
        lease: Lease,
        error: object,
        retry_in: float | None = None,
        *,
        dead: bool = False,
        traceback: str | None = None,
    ) -> Op[State]:
        """Record a failure. Retry after ``retry_in`` s (default: the queue's backoff)
        while attempts remain, else dead-letter; ``dead=True`` dead-letters at once.
        ``error`` is the ``last_error`` text (``Type: message``), ``traceback`` the
        row's ``traceback`` field (None clears it); the row keeps a bounded log of
        its failed attempts (``Job.failures``). Returns the job's new state.
        Raises LeaseLost."""
        state: State = yield self.core.fail(lease, error, retry_in, dead, traceback)
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
            if job.state.finished:
                for i in where[name]:
                    out[i] = job
            else:
                still.add(name)
        return still

    def progress(self, lease: Lease, value: Any) -> Op[None]:
        """Store a small JSON ``value`` (<= 4096 bytes) as the job's ``progress``,
        fenced like every lease write. Raises LeaseLost, InvalidPayload."""
        yield self.core.progress(lease, value)
