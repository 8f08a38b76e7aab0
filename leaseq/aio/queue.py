"""``leaseq.aio.Queue``: the same API as ``leaseq.Queue`` with ``async def``.

Each method builds its script call with the shared ``QueueCore`` and awaits
it through ``leaseq._redis.arun``; the argument building, reply parsing,
error mapping and even the blocking-claim arithmetic are the sync queue's,
only the transport differs. Works on ``redis.asyncio.Redis`` and
``redis.asyncio.cluster.RedisCluster``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions as rex

from .. import _redis
from .._base import QueueBase
from .._core import (
    Call,
    Claimed,
    R,
    block_until,
    block_wait,
    parse_state,
)
from .._replies import as_text
from ..errors import DamagedRow, InvalidArgument, JobNotFound, JobStateError, LeaseLost
from ..keys import QueueKeys, check_job_id
from ..types import Job, Lease, State, Stats

__all__ = ["Queue"]


class Queue(QueueBase):
    """One named queue on one ``redis.asyncio`` client (or async RedisCluster).

    Settings are those of ``leaseq.Queue``, keyword-only and checked here.
    Durations are seconds (float); every method raises what its sync twin does.
    """

    _kind = "aio.Queue"

    @classmethod
    def from_url(cls, url: str, name: str, **settings: Any) -> Queue:
        """A queue on a new ``redis.asyncio`` client for ``url``; settings as for ``Queue``."""
        if not isinstance(url, str) or not url:
            raise InvalidArgument(f"a Redis URL is needed, not {url!r}")
        try:
            client = aioredis.Redis.from_url(url)
        except ValueError as exc:
            raise InvalidArgument(f"bad Redis URL: {_redis.redact(str(exc))}") from None
        return cls(name, redis=client, **settings)

    async def _run(self, call: Call[R]) -> R:
        if not self._checked:
            await self._check_server()
        result = await _redis.arun(self.redis, call)
        replicas = self._core.replicas_for(call)
        if replicas:  # durable=: see docs/scaling.md
            timeout = self._core.durable_timeout_ms
            acked = await _redis.await_replicas(self.redis, call.keys[0], replicas, timeout)
            return self._core.check_replicated(call, acked, result)
        return result

    async def _check_server(self) -> None:
        self._checked = True
        try:
            policy = await self.redis.config_get("maxmemory-policy")
        except (rex.RedisError, AttributeError, NotImplementedError):
            return  # CONFIG is often forbidden on managed servers; not fatal.
        _redis.check_server_reply(policy)

    # -- producing ----------------------------------------------------------

    async def enqueue(
        self,
        payload: Any,
        *,
        id: str | None = None,
        max_attempts: int | None = None,
        delay: float | None = None,
        priority: int = 0,
    ) -> str:
        """Add one job; return its id (see ``leaseq.Queue.enqueue``)."""
        ids, calls = self._core.enqueue_calls([payload], [id], max_attempts, delay, priority)
        await self._run(calls[0])
        return ids[0]

    async def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        max_attempts: int | None = None,
        delay: float | None = None,
        priority: int = 0,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Add many jobs, all validated before any is written; return their ids in order."""
        job_ids, calls = self._core.enqueue_calls(
            list(payloads), ids, max_attempts, delay, priority
        )
        for call in calls:
            await self._run(call)
        return job_ids

    # -- consuming ------------------------------------------------------------

    async def claim(
        self, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> Lease | None:
        """Lease one job for ``ttl`` seconds, or return None (``block``: seconds to wait)."""
        leases = await self.claim_many(1, ttl=ttl, worker=worker, block=block)
        return leases[0] if leases else None

    async def claim_many(
        self, count: int, ttl: float = 30.0, worker: str | None = None, block: float | None = None
    ) -> list[Lease]:
        """Lease up to ``count`` jobs in one script call (or wait up to ``block`` s for one)."""
        call = self._core.claim(count, ttl, worker)
        give_up = block_until(block, time.monotonic())
        while True:
            claimed = await self._run(call)
            leases = await self._settle(claimed)
            wait = block_wait(give_up, claimed, time.monotonic())
            if wait <= 0:
                return leases
            await self.wait_for_wake(wait)

    async def claim_now(
        self, count: int, ttl: float = 30.0, worker: str | None = None, started: int | None = None
    ) -> tuple[list[Lease], float | None]:
        """One claim call that never waits: the leases, and the seconds until
        something may become claimable by itself (None: nothing scheduled or leased).
        ``started``: as for ``leaseq.Queue.claim_now``."""
        claimed = await self._run(self._core.claim(count, ttl, worker, started))
        return await self._settle(claimed), claimed.wait

    async def wait_for_wake(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds on the wake list; True if a token was taken."""
        wait = _redis.wake_timeout(self.redis, timeout)
        with _redis.translate_errors():
            got = await self.redis.blpop([self.keys.wake], timeout=wait)
        return got is not None

    async def _settle(self, claimed: Claimed) -> list[Lease]:
        for call in self._core.settle(claimed):
            with contextlib.suppress(LeaseLost):
                await self._run(call)
        return claimed.leases

    async def extend(self, lease: Lease, ttl: float = 30.0) -> Lease:
        """Push the deadline to now + ``ttl`` (server clock); the lease with its new
        deadline. Raises LeaseLost."""
        (result,) = await self._run(self._core.extend([lease], ttl))
        if isinstance(result, LeaseLost):
            raise result
        return result

    async def extend_many(
        self, leases: Sequence[Lease], ttl: float = 30.0, started: Sequence[bool] | None = None
    ) -> list[Lease | LeaseLost]:
        """Heartbeat many leases in few calls; per lease, the renewed lease or the
        LeaseLost it met (see ``leaseq.Queue.extend_many``)."""
        calls = self._core.extend_calls(leases, ttl, started)
        return [r for call in calls for r in await self._run(call)]

    async def complete(
        self, lease: Lease, result: Any = None, *, effects: Sequence[Any] | None = None
    ) -> None:
        """Mark the job succeeded (storing ``result`` if not None), applying ``effects``
        in the same script (see ``leaseq.Queue.complete``). Raises LeaseLost."""
        call = self._core.complete(
            [lease], None if result is None else [result], None if effects is None else [effects]
        )
        lost = await self._run(call)
        if lost:
            raise lost[0]

    async def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[LeaseLost]:
        """Complete many leases in few calls; return the refusals (empty if all held)."""
        calls = self._core.complete_calls(leases, results)
        return [lost for call in calls for lost in await self._run(call)]

    async def fail(
        self, lease: Lease, error: object, retry_in: float | None = None, *, dead: bool = False
    ) -> State:
        """Record a failure: retry with backoff while attempts remain, else dead.
        Returns the new state. Raises LeaseLost."""
        return await self._run(self._core.fail(lease, error, retry_in, dead))

    async def release(self, lease: Lease) -> None:
        """Put the job back to pending now without spending the attempt (shutdown)."""
        await self._run(self._core.release(lease))

    async def once(self, lease: Lease, name: str) -> bool:
        """True the first time this job reaches the marker ``name``, False after."""
        return await self._run(self._core.once(lease, name))

    # -- maintenance and operators ---------------------------------------------

    async def reap(self) -> tuple[int, int]:
        """Hand back every expired lease: (returned to pending, dead-lettered)."""
        requeued = died = 0
        while True:
            r, d, more = await self._run(self._core.reap())
            requeued, died = requeued + r, died + d
            if not more:
                return requeued, died

    async def get(self, job_id: str) -> Job | None:
        """The job row, typed, or None. Raises DamagedRow."""
        job_id = check_job_id(job_id)
        with _redis.translate_errors():
            raw = await self.redis.hgetall(self.keys.job(job_id))
        return self._core.parse_job(job_id, raw)

    async def ls(
        self,
        state: State | str,
        *,
        offset: int = 0,
        limit: int = 100,
        damaged: list[DamagedRow] | None = None,
    ) -> list[Job]:
        """Jobs in ``state``, in index order (see ``leaseq.Queue.ls``)."""
        st = parse_state(state)
        with _redis.translate_errors():
            ids = await self.redis.zrange(self.keys.index(st.value), offset, offset + limit - 1)
            names = [as_text(i) for i in ids]
            # Every row is in the queue's slot, so this pipeline is one node's
            # even on a cluster.
            pipe = self.redis.pipeline(transaction=False)
            for job_id in names:
                pipe.hgetall(self.keys.job(job_id))
            rows = await pipe.execute(raise_on_error=False) if names else []
        return self._core.parse_page(names, rows, damaged)

    async def stats(self, soon: float = 10.0) -> Stats:
        """Counts per state and more, in one consistent read."""
        return await self._run(self._core.stats(soon))

    async def cancel(self, job_id: str) -> bool:
        """Cancel a pending or scheduled job. Raises JobNotFound, JobStateError."""
        return await self._run(self._core.cancel(job_id))

    async def retry_dead(self, job_id: str, *, attempts: int | None = None) -> int:
        """Make a dead job pending again; returns its new max_attempts."""
        return await self._run(self._core.retry(job_id, attempts))

    async def retry_all_dead(self, *, attempts: int | None = None) -> int:
        """Retry every dead job; returns how many. A row damaged by hand stays dead
        and is stepped over; a stale dead-set entry is dropped by the script."""
        done = skipped = 0
        while True:
            with _redis.translate_errors():
                ids = await self.redis.zrange(self.keys.dead, skipped, skipped + 999)
            if not ids:
                return done
            for raw in ids:
                try:
                    await self.retry_dead(as_text(raw), attempts=attempts)
                    done += 1
                except DamagedRow:
                    skipped += 1  # it stays in the dead set: page past it
                except (JobNotFound, JobStateError):
                    continue  # stale entry, already dropped from the dead set

    async def purge(self, state: State | str) -> int:
        """Delete every job in ``state`` (not active); returns how many rows went."""
        deleted = 0
        while True:
            gone, remaining = await self._run(self._core.purge(state))
            deleted += gone
            if remaining == 0:
                return deleted

    @staticmethod
    async def queues(redis: Any, prefix: str = "leaseq") -> list[str]:
        """Hash tags of the queues under ``prefix`` (SCAN of meta keys; on a
        cluster, of every primary)."""
        found = set()
        with _redis.translate_errors():
            async for key in redis.scan_iter(match=QueueKeys.meta_pattern(prefix), count=1000):
                name = QueueKeys.queue_of_meta(prefix, as_text(key))
                if name:
                    found.add(name)
        return sorted(found)
