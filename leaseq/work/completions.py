"""The asyncio worker's completions: many job tasks' ``complete`` calls written
in few ``complete_many`` calls (``completion_batch`` decides which share one)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from leaseq.errors import AlreadyFinished
from leaseq.protocols import AsyncQueueLike
from leaseq.types import Lease
from leaseq.work.loop_calls import cut_off
from leaseq.work.outcomes import WRITE_BATCH, completion_batch

LINGER = 0.01
"""Seconds a completion call waits for others to join it while other jobs run:
longer than the threaded worker's (``leaseq.work.writes.OUTCOME_LINGER``), as
fewer jobs end per millisecond on an event loop (measured: 2 ms gave about 5
jobs a call on a no-op drain, 10 ms about 10, at the same jobs/s)."""


class Completions:
    """The completions of many job tasks, written in few ``complete_many`` calls.

    One call is in flight at a time; whatever finishes meanwhile goes out in the
    next, so a busy worker writes big batches and an idle one writes each job at
    once. While other leases are held (``held()`` counts them, these included),
    a call waits ``LINGER`` s first for more to join it: fast jobs would
    otherwise finish one or two per round trip and pay a call each. Each job
    task awaits its own completion and gets what a lone ``complete`` would have
    given it: None, or the exception for its lease (LeaseLost, AlreadyFinished,
    ...), or the call's error (then the whole call's jobs retry as they would
    alone; a replayed one finds AlreadyFinished).
    """

    def __init__(
        self, queue: AsyncQueueLike, held: Callable[[], int], counts: dict[str, int]
    ) -> None:
        self.queue = queue
        self.held = held
        self.counts = counts
        """Where each completion is counted as it lands: ``succeeded`` (a replay's
        AlreadyFinished too) or ``lost``, even if its job task is gone by then."""
        self._waiting: list[tuple[Lease, Any, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def complete(self, lease: Lease, result: Any) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((lease, result, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write())
        await done

    async def finish(self, timeout: float) -> None:
        """At the end of run(): send what is waiting, for at most ``timeout`` s. The
        handlers of these jobs have run: a completion dropped would leave the job
        active until its lease expired, then run it again (a spare not yet
        reported started would even be refunded as never started). Their job
        tasks may be cancelled meanwhile: the writes go on without them. Past the
        bound (a server that does not answer) the rest is dropped and the call in
        flight cut off: no call of this run may outlive it (the caller may close
        its client)."""
        writer = self._writer
        if writer is not None and not writer.done():
            await asyncio.wait({writer}, timeout=timeout)
        self._waiting.clear()
        self._writer = None
        if writer is not None:
            await cut_off({writer})  # a no-op once it has ended

    def _next_batch(self) -> list[tuple[Lease, Any, asyncio.Future[None]]]:
        """The waiting completions of the next call, oldest first, as
        ``completion_batch`` admits them; the rest wait for a later call."""
        batch: list[tuple[Lease, Any, asyncio.Future[None]]] = []
        later: list[tuple[Lease, Any, asyncio.Future[None]]] = []
        admit = completion_batch()
        for item in self._waiting:
            (batch if admit(item[0]) else later).append(item)
        self._waiting[:] = later
        return batch

    async def _write(self) -> None:
        while self._waiting:
            if self.held() > len(self._waiting) and len(self._waiting) < WRITE_BATCH:
                await asyncio.sleep(LINGER)
            batch = self._next_batch()
            try:
                refused = await self.queue.complete_many(
                    [lease for lease, _, _ in batch], [result for _, result, _ in batch]
                )
            except BaseException as exc:  # each waiter raises it (cancelled: so do they)
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            self._landed(batch, refused)

    def _landed(
        self, batch: list[tuple[Lease, Any, asyncio.Future[None]]], refused: list[Any]
    ) -> None:
        """Count a call's completions and answer each waiter: None, or its refusal."""
        by_lease = {(lost.job_id, lost.token): lost for lost in refused}
        for lease, _, done in batch:
            lost = by_lease.get((lease.id, lease.attempt))
            landed = lost is None or isinstance(lost, AlreadyFinished)
            self.counts["succeeded" if landed else "lost"] += 1
            if done.done():  # its job task was cancelled meanwhile
                continue
            if lost is None:
                done.set_result(None)
            else:
                done.set_exception(lost)
