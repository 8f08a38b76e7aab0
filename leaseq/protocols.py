"""``QueueLike`` and ``AsyncQueueLike``: what a worker or the CLI needs of a queue.

``leaseq.Queue`` and ``leaseq.ShardedQueue`` are ``QueueLike``;
``leaseq.aio.Queue`` and ``leaseq.aio.ShardedQueue`` are ``AsyncQueueLike``.
Workers and the CLI take these protocols, not a concrete class, so a plain
and a sharded queue are interchangeable wherever one is consumed.

``QueueGroup`` is the base of the queue sets (``leaseq.queue_set``) and
``members`` reads it: here, below both, so the worker machinery
(``leaseq.work``) tells a set from a queue the same way the workers do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from leaseq.errors import LeaseLost
from leaseq.types import Job, JobOptions, Lease, State, Stats

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AsyncQueueLike", "QueueGroup", "QueueLike", "members"]


@runtime_checkable
class QueueLike(Protocol):
    """The synchronous queue API that ``leaseq.Worker`` and the CLI use."""

    @property
    def name(self) -> str: ...
    @property
    def worker_id(self) -> str: ...
    def enqueue(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> str: ...
    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        ids: Sequence[str] | None = None,
        **options: Unpack[JobOptions],
    ) -> list[str]: ...
    def claim_now(
        self,
        count: int,
        ttl: float = 30.0,
        worker: str | None = None,
        started: int | None = None,
    ) -> tuple[list[Lease], float | None]: ...
    def nudge(self) -> None: ...
    def wait_for_wake(self, timeout: float) -> bool: ...
    def extend(self, lease: Lease, ttl: float = 30.0) -> Lease: ...
    def extend_many(
        self,
        leases: Sequence[Lease],
        ttl: float = 30.0,
        started: Sequence[bool] | None = None,
        waiting: Sequence[bool] | None = None,
    ) -> list[Lease | LeaseLost]: ...
    def complete(
        self, lease: Lease, result: Any = None, *, effects: Sequence[Any] | None = None
    ) -> None: ...
    def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[LeaseLost]: ...
    def fail(
        self,
        lease: Lease,
        error: object,
        retry_in: float | None = None,
        *,
        dead: bool = False,
        traceback: str | None = None,
    ) -> State: ...
    def release(self, lease: Lease) -> None: ...
    def reap(self) -> tuple[int, int]: ...
    def tick(self) -> int: ...
    def get(self, job_id: str) -> Job | None: ...
    def stats(self, soon: float = 10.0) -> Stats: ...


@runtime_checkable
class AsyncQueueLike(Protocol):
    """The asyncio queue API that ``leaseq.aio.Worker`` uses."""

    @property
    def name(self) -> str: ...
    @property
    def worker_id(self) -> str: ...
    async def claim_now(
        self,
        count: int,
        ttl: float = 30.0,
        worker: str | None = None,
        started: int | None = None,
    ) -> tuple[list[Lease], float | None]: ...
    async def nudge(self) -> None: ...
    async def wait_for_wake(self, timeout: float) -> bool: ...
    async def extend(self, lease: Lease, ttl: float = 30.0) -> Lease: ...
    async def extend_many(
        self,
        leases: Sequence[Lease],
        ttl: float = 30.0,
        started: Sequence[bool] | None = None,
        waiting: Sequence[bool] | None = None,
    ) -> list[Lease | LeaseLost]: ...
    async def complete(
        self, lease: Lease, result: Any = None, *, effects: Sequence[Any] | None = None
    ) -> None: ...
    async def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[LeaseLost]: ...
    async def fail(
        self,
        lease: Lease,
        error: object,
        retry_in: float | None = None,
        *,
        dead: bool = False,
        traceback: str | None = None,
    ) -> State: ...
    async def release(self, lease: Lease) -> None: ...
    async def reap(self) -> tuple[int, int]: ...
    async def tick(self) -> int: ...
    async def get(self, job_id: str) -> Job | None: ...
    async def stats(self, soon: float = 10.0) -> Stats: ...


class QueueGroup:
    """Several queues one worker serves as one (``leaseq.queue_set.QueueSet`` and
    ``AsyncQueueSet`` derive from it): ``queues``, in their order."""

    queues: tuple[Any, ...]


def members(queue: Any) -> tuple[Any, ...]:
    """The queues a worker serves: a queue set's, or the one queue."""
    return tuple(queue.queues) if isinstance(queue, QueueGroup) else (queue,)
