"""How a worker rides out a Redis that does not answer.

:func:`error_kind` sorts what a *worker's own* queue call raised:
``transient`` (``ServerUnavailable`` and its subclasses: a server down, a
failover, a busy server) is retried with backoff and logged once per outage
(:class:`Outage`); ``job`` (the lease is lost, the row is damaged, a value
was refused) concerns that one job and is logged; anything else
(``fatal``: bad credentials, a queue key of the wrong type, a script the
server refuses) ends ``run()`` with that error.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Literal

from leaseq.errors import DamagedRow, InvalidArgument, LeaseLost, LeaseqError, ServerUnavailable
from leaseq.observe.health import HEALTH
from leaseq.work.log import log_job

BACKOFF_START, BACKOFF_CAP = 0.1, 5.0
"""Seconds between attempts to reach a Redis that is down: doubling, capped, jittered."""


def error_kind(exc: BaseException) -> Literal["transient", "job", "fatal"]:
    """How a worker treats an error its own queue call raised (see the module doc)."""
    if isinstance(exc, ServerUnavailable):
        return "transient"
    if isinstance(exc, (LeaseLost, DamagedRow, InvalidArgument)):
        return "job"
    return "fatal"


class Backoff:
    """Exponential, capped, jittered waits for retrying a Redis that is down."""

    def __init__(self) -> None:
        self.delay = 0.0

    def next(self) -> float:
        self.delay = min(BACKOFF_CAP, max(BACKOFF_START, self.delay * 2))
        return self.delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.delay = 0.0


class Outage:
    """One clear line per outage: a WARNING when calls start failing with a
    transient error, DEBUG for the retries after it, INFO once calls work again.
    Shared by the threads (or tasks) of one worker.

    Calls are told apart by ``what`` (claim, heartbeat, outcome...): the outage
    ends once every kind that failed has gone through again, not at the first
    call of another kind that happens to land (a claim between two failed
    writes does not make it two outages)."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.since: float | None = None
        self._failing: set[str] = set()
        self._lock = threading.Lock()

    def failed(self, what: str, exc: BaseException, backoff: Backoff) -> float:
        """Log the failure; the seconds to wait before trying again."""
        delay = backoff.next()
        with self._lock:
            first = self.since is None
            if first:
                self.since = time.monotonic()
                HEALTH.outage(self, self.since)
            self._failing.add(what)
        log_job(
            self.queue,
            logging.WARNING if first else logging.DEBUG,
            None,
            "%s failed: %s; retrying in %.1fs, backing off up to %gs%s",
            what,
            exc,
            delay,
            BACKOFF_CAP,
            " (until Redis answers, retries are logged at DEBUG)" if first else "",
        )
        return delay

    def ok(self, what: str) -> None:
        """A ``what`` call was answered: end the outage once no kind still fails."""
        if self.since is None:
            return
        with self._lock:
            self._failing.discard(what)
            if self._failing:
                return
            since, self.since = self.since, None
            HEALTH.outage(self, None)
        if since is not None:
            log_job(
                self.queue,
                logging.INFO,
                None,
                "Redis answers again after %.1fs",
                time.monotonic() - since,
            )


def log_fatal(queue: str, exc: LeaseqError) -> None:
    """The line a worker logs once as a fatal error ends its run."""
    log_job(queue, logging.ERROR, None, "stopping: %s: %s", type(exc).__name__, exc)
