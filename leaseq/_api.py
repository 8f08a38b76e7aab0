"""The public queue methods, declared once per transport.

``SyncQueueAPI`` is every operation of ``leaseq.store.ops`` as a plain method,
``AsyncQueueAPI`` as an ``async def`` one. ``leaseq.Queue`` and
``leaseq.ShardedQueue`` take the first, the ``leaseq.aio`` queues the
second; what runs is ``self._ops`` (a ``QueueOps`` or a ``ShardedOps``), so
a plain and a sharded queue share every method and its documentation.
"""

from __future__ import annotations

from typing import TypeVar

from leaseq.store.ops import QueueOps as O
from leaseq.transport.drive import AsyncDriver, SyncDriver, async_feed, async_op, sync_feed, sync_op

__all__ = ["AsyncQueueAPI", "SyncQueueAPI"]

S = TypeVar("S", bound="SyncQueueAPI")
A = TypeVar("A", bound="AsyncQueueAPI")


class SyncQueueAPI(SyncDriver):
    """The queue operations, run on a redis-py client.

    A queue made by ``from_url`` owns its client: ``close()`` (or a ``with``
    block) closes it; a client passed in stays the caller's to close.
    """

    _owns_client: bool

    def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            self.redis.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    enqueue = sync_op(O.enqueue)
    enqueue_many = sync_op(O.enqueue_many)
    claim = sync_op(O.claim)
    claim_many = sync_op(O.claim_many)
    claim_now = sync_op(O.claim_now)
    nudge = sync_op(O.nudge)
    wait_for_wake = sync_op(O.wait_for_wake)
    extend = sync_op(O.extend)
    extend_many = sync_op(O.extend_many)
    complete = sync_op(O.complete)
    complete_many = sync_op(O.complete_many)
    fail = sync_op(O.fail)
    release = sync_op(O.release)
    once = sync_op(O.once)
    reap = sync_op(O.reap)
    get = sync_op(O.get)
    wait = sync_op(O.wait)
    progress = sync_op(O.progress)
    wait_many = sync_op(O.wait_many)
    ls = sync_op(O.ls)
    stats = sync_op(O.stats)
    cancel = sync_op(O.cancel)
    retry_dead = sync_op(O.retry_dead)
    retry_all_dead = sync_op(O.retry_all_dead)
    purge = sync_op(O.purge)
    reset_clock = sync_op(O.reset_clock)
    pause = sync_op(O.pause)
    resume = sync_op(O.resume)
    drop = sync_op(O.drop)
    delete = sync_op(O.delete)
    run_now = sync_op(O.run_now)
    schedule = sync_op(O.schedule)
    unschedule = sync_op(O.unschedule)
    schedules = sync_op(O.schedules)
    tick = sync_op(O.tick)
    set_limits = sync_op(O.set_limits)
    limits = sync_op(O.limits)
    register_worker = sync_op(O.register_worker)
    unregister_worker = sync_op(O.unregister_worker)
    workers = sync_op(O.workers)
    history = sync_op(O.history)
    events = sync_feed(O.events)
    set_events = sync_op(O.set_events)
    event_settings = sync_op(O.event_settings)


class AsyncQueueAPI(AsyncDriver):
    """The queue operations, awaited on a ``redis.asyncio`` client; ``close()`` and
    ``async with`` as for ``SyncQueueAPI``."""

    _owns_client: bool

    async def close(self) -> None:
        """Close the client if this queue made it (``from_url``); else do nothing."""
        if self._owns_client:
            self._owns_client = False
            closer = getattr(self.redis, "aclose", None) or self.redis.close  # redis-py < 5.0.1
            await closer()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    enqueue = async_op(O.enqueue)
    enqueue_many = async_op(O.enqueue_many)
    claim = async_op(O.claim)
    claim_many = async_op(O.claim_many)
    claim_now = async_op(O.claim_now)
    nudge = async_op(O.nudge)
    wait_for_wake = async_op(O.wait_for_wake)
    extend = async_op(O.extend)
    extend_many = async_op(O.extend_many)
    complete = async_op(O.complete)
    complete_many = async_op(O.complete_many)
    fail = async_op(O.fail)
    release = async_op(O.release)
    once = async_op(O.once)
    reap = async_op(O.reap)
    get = async_op(O.get)
    wait = async_op(O.wait)
    progress = async_op(O.progress)
    wait_many = async_op(O.wait_many)
    ls = async_op(O.ls)
    stats = async_op(O.stats)
    cancel = async_op(O.cancel)
    retry_dead = async_op(O.retry_dead)
    retry_all_dead = async_op(O.retry_all_dead)
    purge = async_op(O.purge)
    reset_clock = async_op(O.reset_clock)
    pause = async_op(O.pause)
    resume = async_op(O.resume)
    drop = async_op(O.drop)
    delete = async_op(O.delete)
    run_now = async_op(O.run_now)
    schedule = async_op(O.schedule)
    unschedule = async_op(O.unschedule)
    schedules = async_op(O.schedules)
    tick = async_op(O.tick)
    set_limits = async_op(O.set_limits)
    limits = async_op(O.limits)
    register_worker = async_op(O.register_worker)
    unregister_worker = async_op(O.unregister_worker)
    workers = async_op(O.workers)
    history = async_op(O.history)
    events = async_feed(O.events)
    set_events = async_op(O.set_events)
    event_settings = async_op(O.event_settings)
