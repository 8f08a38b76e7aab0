"""Claim scheduling both workers follow: how many leases to hold and when to
claim (:class:`Prefetch`), and when a burst run is done (:func:`held_back`).
"""

from __future__ import annotations

import logging
from typing import Any

from leaseq.work.log import log_job

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

    def plan(self, held: int, free: int) -> tuple[int, int] | None:
        """The next claim with ``held`` leases held and ``free`` handler slots idle:
        ``(leases to ask for, how many of them start at once)``; the rest are
        spares, which the claim marks prefetched so that a crash before they
        start spends no attempt. None while there is no room (``room``)."""
        if not self.room(held):
            return None
        return min(self.limit - held, CLAIM_BATCH), max(0, free)

    def overdue(self, since: float, now: float) -> bool:
        """A spare claimed at ``since`` has waited too long by ``now`` (same clock,
        seconds): hand it back (then call ``handed_back``)."""
        return now - since >= self.max_wait

    def handed_back(self) -> None:
        """Overdue spares went back: hold no spares until jobs finish fast enough."""
        self._held_back = True
        self._since = None


def log_handed_back(queue: str, count: int, max_wait: float) -> None:
    """The line both workers log as overdue spares go back (``Prefetch.overdue``)."""
    log_job(
        queue,
        logging.WARNING,
        None,
        "%d spare lease(s) waited %gs for a busy handler slot: handing them back",
        count,
        max_wait,
    )


# -- burst runs ------------------------------------------------------------------

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
