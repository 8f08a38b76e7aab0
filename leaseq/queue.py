"""``leaseq.Queue``: the synchronous API over redis-py.

Every state change is one script call built by ``QueueCore``; this class
only runs calls and loops where an operation spans many calls (batches,
blocking claims, reaping everything).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any

import redis as redis_lib
import redis.exceptions as rex

from . import _redis
from ._base import QueueBase
from ._core import (
    Call,
    Claimed,
    R,
    block_until,
    block_wait,
    parse_state,
)
from ._memory import memory_client
from ._replies import as_text
from .errors import DamagedRow, InvalidArgument, JobNotFound, JobStateError, LeaseLost
from .keys import QueueKeys, check_job_id
from .types import Job, Lease, State, Stats

__all__ = ["Queue"]


def connect(url: str) -> Any:
    """A redis-py client for ``url`` (``redis://``, ``rediss://``, ``unix://``, ``memory://``)."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"a Redis URL is needed, not {url!r}")
    if url.startswith("memory://"):
        return memory_client(url)
    try:
        return redis_lib.Redis.from_url(url)
    except ValueError as exc:
        raise InvalidArgument(f"bad Redis URL: {_redis.redact(str(exc))}") from None


class Queue(QueueBase):
    """One named queue on one Redis (or Redis Cluster) client.

    Settings are keyword-only and checked here; an unknown one is a
    TypeError. Durations are seconds (float). See ``docs/design.md``.
    """

    @classmethod
    def from_url(cls, url: str, name: str, **settings: Any) -> Queue:
        """A queue on a new client for ``url``; ``settings`` as for ``Queue``."""
        return cls(name, redis=connect(url), **settings)

    def _run(self, call: Call[R]) -> R:
        if not self._checked:
            self._check_server()
        result = _redis.run(self.redis, call)
        replicas = self._core.replicas_for(call)
        if replicas:  # durable=: see docs/scaling.md
            timeout = self._core.durable_timeout_ms
            acked = _redis.wait_replicas(self.redis, call.keys[0], replicas, timeout)
            return self._core.check_replicated(call, acked, result)
        return result

    def _check_server(self) -> None:
        self._checked = True
        try:
            policy = self.redis.config_get("maxmemory-policy")
        except (rex.RedisError, AttributeError, NotImplementedError):
            return  # CONFIG is often forbidden on managed servers; not fatal.
        _redis.check_server_reply(policy)

    # -- producing ----------------------------------------------------------

    def enqueue(
        self,
        payload: Any,
        *,
        id: str | None = None,
        max_attempts: int | None = None,
        delay: float | None = None,
        priority: int = 0,
    ) -> str:
        """Add one job; return its id (also when ``id`` already existed: then nothing changes).

        ``delay`` seconds (>= 0) before it may run; ``priority`` 0..1,000,000,
        lower first, FIFO within one. Raises InvalidPayload, PayloadTooLarge,
        InvalidName or InvalidArgument before writing anything.
        """
        ids, calls = self._core.enqueue_calls([payload], [id], max_attempts, delay, priority)
        self._run(calls[0])
        return ids[0]

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        max_attempts: int | None = None,
        delay: float | None = None,
        priority: int = 0,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Add many jobs in few script calls (chunks of 1000); return their ids in order.

        Every item is validated and encoded first: one bad item rejects the
        whole call and nothing is written.
        """
        job_ids, calls = self._core.enqueue_calls(
            list(payloads), ids, max_attempts, delay, priority
        )
        for call in calls:
            self._run(call)
        return job_ids

    # -- consuming ------------------------------------------------------------

    def claim(
        self, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Lease | None:
        """Lease one job for ``ttl`` seconds, or return None.

        ``block``: seconds to wait for a job (None = do not wait). Before
        leasing, the script promotes due scheduled jobs and reaps a bounded
        number of expired leases.
        """
        leases = self.claim_many(1, ttl=ttl, worker=worker, block=block)
        return leases[0] if leases else None

    def claim_many(
        self, count: int, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> list[Lease]:
        """Lease up to ``count`` jobs in one script call (or wait up to ``block`` s for one)."""
        call = self._core.claim(count, ttl, worker)
        give_up = block_until(block, time.monotonic())
        while True:
            claimed = self._run(call)
            leases = self._settle(claimed)
            wait = block_wait(give_up, claimed, time.monotonic())
            if wait <= 0:
                return leases
            self.wait_for_wake(wait)

    def claim_now(
        self, count: int, ttl: float = 30.0, worker: str | None = None, started: int | None = None
    ) -> tuple[list[Lease], float | None]:
        """One claim call that never waits, for loops that block their own way (Worker).

        Returns the leases (0..count) and the seconds until something may become
        claimable by itself — the next scheduled job falls due or the earliest
        lease ends (None: nothing is scheduled or leased). ``started``: how many
        leases go to a handler at once (None: all); the rest are prefetched.
        """
        claimed = self._run(self._core.claim(count, ttl, worker, started))
        return self._settle(claimed), claimed.wait

    def nudge(self) -> None:
        """Push one wake-up token, ending one blocked claimer's wait now."""
        with _redis.translate_errors():
            self.redis.rpush(self.keys.wake, "1")

    def wait_for_wake(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds on the wake list; True if a token was taken.

        Enqueues push tokens; a claim that empties pending deletes the list.
        The wait stays under the client's socket timeout, if it has one, so a
        quiet queue never looks like a dead server. Raises ServerUnavailable.
        """
        wait = _redis.wake_timeout(self.redis, timeout)
        with _redis.translate_errors():
            return self.redis.blpop([self.keys.wake], timeout=wait) is not None

    def _settle(self, claimed: Claimed) -> list[Lease]:
        # A payload that will not decode into the queue's type can never run:
        # dead-letter it now rather than crash-loop a worker on it.
        for call in self._core.settle(claimed):
            with contextlib.suppress(LeaseLost):
                self._run(call)
        return claimed.leases

    def extend(self, lease: Lease, ttl: float = 30.0) -> Lease:
        """Push the deadline to now + ``ttl`` (server clock), within ``lease_cap``
        of the claim; return the lease with its new deadline. Raises LeaseLost."""
        (result,) = self._run(self._core.extend([lease], ttl))
        if isinstance(result, LeaseLost):
            raise result
        return result

    def extend_many(
        self, leases: Sequence[Lease], ttl: float = 30.0, started: Sequence[bool] | None = None
    ) -> list[Lease | LeaseLost]:
        """Heartbeat many leases in few calls (chunks of 500). Per lease, in order:
        the lease with its new deadline, or the LeaseLost it met (nothing written
        for that one). A worker's heartbeat for all it holds; ``started[i]`` says a
        prefetched lease's handler has started (a crash then charges it)."""
        calls = self._core.extend_calls(leases, ttl, started)
        return [r for call in calls for r in self._run(call)]

    def complete(
        self, lease: Lease, result: Any = None, *, effects: Sequence[Any] | None = None
    ) -> None:
        """Mark the job succeeded (storing ``result`` if not None). Raises LeaseLost
        (AlreadyFinished when a replay finds it done under this same token).

        ``effects``: Redis writes such as ``("HINCRBY", "app:{q}:totals", "sent", 1)``
        applied in the same script, only while the lease holds — exactly once or
        not at all. Allowed commands and key rules: ``leaseq.effects``. A bad
        effect raises InvalidArgument and nothing is written (the lease holds).
        """
        lost = self._run(
            self._core.complete(
                [lease],
                None if result is None else [result],
                None if effects is None else [effects],
            )
        )
        if lost:
            raise lost[0]

    def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[LeaseLost]:
        """Complete many leases in few calls; return the refusals (empty if all held)."""
        calls = self._core.complete_calls(leases, results)
        return [lost for call in calls for lost in self._run(call)]

    def fail(
        self, lease: Lease, error: object, retry_in: float | None = None, *, dead: bool = False
    ) -> State:
        """Record a failure. Retry after ``retry_in`` s (default: the queue's backoff)
        while attempts remain, else dead-letter; ``dead=True`` dead-letters at once.
        Returns the job's new state. Raises LeaseLost."""
        return self._run(self._core.fail(lease, error, retry_in, dead))

    def release(self, lease: Lease) -> None:
        """Put the job back to pending now without spending the attempt (shutdown)."""
        self._run(self._core.release(lease))

    def once(self, lease: Lease, name: str) -> bool:
        """True the first time this job reaches the marker ``name`` (any attempt),
        False after. Set before the effect: a crash right after it skips the
        effect on redelivery. Raises LeaseLost."""
        return self._run(self._core.once(lease, name))

    # -- maintenance and operators ---------------------------------------------

    def reap(self) -> tuple[int, int]:
        """Hand back every expired lease: (returned to pending, dead-lettered)."""
        requeued = died = 0
        while True:
            r, d, more = self._run(self._core.reap())
            requeued, died = requeued + r, died + d
            if not more:
                return requeued, died

    def get(self, job_id: str) -> Job | None:
        """The job row, typed, or None. Raises DamagedRow for a row that will not read."""
        job_id = check_job_id(job_id)
        with _redis.translate_errors():
            raw = self.redis.hgetall(self.keys.job(job_id))
        return self._core.parse_job(job_id, raw)

    def ls(
        self,
        state: State | str,
        *,
        offset: int = 0,
        limit: int = 100,
        damaged: list[DamagedRow] | None = None,
    ) -> list[Job]:
        """Jobs in ``state``, in index order (pending: next to run first).

        A row damaged by hand raises DamagedRow, unless ``damaged`` is a list:
        then it is appended there and the rest of the page is still returned.
        """
        st = parse_state(state)
        with _redis.translate_errors():
            ids = self.redis.zrange(self.keys.index(st.value), offset, offset + limit - 1)
            pipe = self.redis.pipeline(transaction=False)
            names = [as_text(i) for i in ids]
            for job_id in names:
                pipe.hgetall(self.keys.job(job_id))
            rows = pipe.execute(raise_on_error=False)
        return self._core.parse_page(names, rows, damaged)

    def stats(self, soon: float = 10.0) -> Stats:
        """Counts per state and more, in one consistent read."""
        return self._run(self._core.stats(soon))

    def cancel(self, job_id: str) -> bool:
        """Cancel a pending or scheduled job: True if cancelled now, False if it already
        was. Raises JobNotFound, or JobStateError once it has started."""
        return self._run(self._core.cancel(job_id))

    def retry_dead(self, job_id: str, *, attempts: int | None = None) -> int:
        """Make a dead job pending again with ``attempts`` more tries (default: the
        queue's max_attempts). ``attempts`` in the row is kept, ``max_attempts``
        raised; returns the new max_attempts. Raises JobNotFound, JobStateError."""
        return self._run(self._core.retry(job_id, attempts))

    def retry_all_dead(self, *, attempts: int | None = None) -> int:
        """Retry every dead job; returns how many. A row damaged by hand stays dead
        and is stepped over; a stale dead-set entry is dropped by the script."""
        done = skipped = 0
        while True:
            with _redis.translate_errors():
                ids = self.redis.zrange(self.keys.dead, skipped, skipped + 999)
            if not ids:
                return done
            for raw in ids:
                try:
                    self.retry_dead(as_text(raw), attempts=attempts)
                    done += 1
                except DamagedRow:
                    skipped += 1  # it stays in the dead set: page past it
                except (JobNotFound, JobStateError):
                    continue  # stale entry, already dropped from the dead set

    def purge(self, state: State | str) -> int:
        """Delete every job in ``state`` (not active); returns how many rows went."""
        deleted = 0
        while True:
            gone, remaining = self._run(self._core.purge(state))
            deleted += gone
            if remaining == 0:
                return deleted

    @staticmethod
    def queues(redis: Any, prefix: str = "leaseq") -> list[str]:
        """Names of the queues under ``prefix`` on this server (by SCAN of meta keys)."""
        found = set()
        with _redis.translate_errors():
            for key in redis.scan_iter(match=QueueKeys.meta_pattern(prefix), count=1000):
                name = QueueKeys.queue_of_meta(prefix, as_text(key))
                if name:
                    found.add(name)
        return sorted(found)
