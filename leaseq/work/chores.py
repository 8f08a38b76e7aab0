"""When a worker does its chores: reap expired leases, refresh its registry row,
tick the queue's schedules. Both workers keep one :class:`Chores` per run and
ask it what is due; they only make the calls.
"""

from __future__ import annotations

import contextlib
import logging
import random
from typing import Any

from leaseq.errors import LeaseqError
from leaseq.store.registry import refresh_every
from leaseq.store.schedules import TICK_INTERVAL
from leaseq.work.log import log_job


class Chores:
    """The timers of one run, in the driver's clock (seconds).

    ``reap_every``: seconds between full reaps (claims also reap a bounded
    number of expired leases each time). ``spread``: the first reap falls at
    a random point of the second half of the first interval, so workers
    started together do not all reap at once; without it the first reap is
    at once. The registry row is refreshed every ``refresh_every(ttl)`` and
    lives three refreshes; schedules tick every ``TICK_INTERVAL``.
    """

    def __init__(self, reap_every: float, ttl: float, now: float, *, spread: bool) -> None:
        self.reap_every = reap_every
        self.register_every = refresh_every(ttl)
        self.next_reap = now + reap_every * random.uniform(0.5, 1.0) if spread else now
        self.next_register = now
        self.next_tick = now

    def reap(self, now: float) -> bool:
        """Whether a reap is due at ``now`` (if so, the next one is planned)."""
        if now < self.next_reap:
            return False
        self.next_reap = now + self.reap_every
        return True

    def tick(self, now: float, queue: Any) -> bool:
        """Whether ``queue`` ticks its schedules now (if so, the next tick is planned);
        a queue without schedules never does."""
        if now < self.next_tick or not hasattr(queue, "tick"):
            return False
        self.next_tick = now + TICK_INTERVAL  # schedules: see leaseq.store.schedules
        return True

    def register(self, now: float) -> bool:
        """Whether the registry row is due for a refresh (plan the next with
        ``registered`` once the call went through)."""
        return now >= self.next_register

    def registered(self, now: float) -> None:
        self.next_register = now + self.register_every

    def row(self, concurrency: int, done: int, running: int) -> dict[str, Any]:
        """The keyword arguments of ``register_worker`` (``leaseq.store.registry``):
        ``running`` counts the leases held, running or prefetched."""
        return {
            "ttl": 3 * self.register_every,
            "concurrency": concurrency,
            "done": done,
            "running": running,
        }


def reap(queue: Any, name: str) -> None:
    """A full reap of ``queue`` (the worker's calls), logged when it found any."""
    requeued, died = queue.reap()
    if requeued or died:
        log_job(
            name,
            logging.INFO,
            None,
            "reaped expired leases: %d to pending, %d dead",
            requeued,
            died,
        )


def leave(queue: Any, served: Any, worker_id: str) -> None:
    """Take this worker's row out of the registry as its run ends (a queue without
    one has nothing to leave; a failure leaves the row to expire)."""
    if hasattr(served, "unregister_worker"):
        with contextlib.suppress(LeaseqError):
            queue.unregister_worker(worker_id)
