"""The threaded worker's record of a held lease."""

from __future__ import annotations

from dataclasses import dataclass

from leaseq.handler import JobContext
from leaseq.types import Lease
from leaseq.work.outcomes import Outcome


@dataclass(eq=False)
class Task:
    """One held lease of the threaded worker. ``outcome`` is set by the handler
    thread once it is done (or to RELEASE for a lease handed back unstarted)."""

    lease: Lease
    ctx: JobContext
    next_beat: float
    """When to extend next, ``time.monotonic()`` seconds."""
    outcome: Outcome | None = None
    prefetched: bool = False
    """Claimed as a prefetch: the server refunds its attempt if it expires unstarted."""
    started: bool = False
    """Its handler has begun (set by the handler thread)."""
    reported: bool = False
    """The server has been told (by a heartbeat) that it started."""
    limit: float | None = None
    """The handler's time limit, seconds (``job_timeout``), set when it starts."""
    since: float = 0.0
    """When it was claimed, ``time.monotonic()`` seconds (how long a spare has waited)."""
    timeout_at: float = float("inf")
    """When the handler's time is up, ``time.monotonic()`` seconds."""
    timed_out: bool = False
    """The reporter failed the attempt for its timeout; what the handler does later is discarded."""
    returned: bool = False
    """The handler thread has returned (or raised)."""
    handed_back: bool = False
    """Released by this worker (not lost to another): at shutdown while its handler
    ran, or unstarted, a spare that waited too long (no handler thread runs it then)."""

    @property
    def key(self) -> tuple[str, str, int, int]:
        """This lease among the worker's: queue, job id, attempt and the row's
        incarnation (the queues of a set may hold one id; a job deleted and
        enqueued again under its id starts over at attempt 1)."""
        lease = self.lease
        return lease.queue, lease.id, lease.attempt, lease.incarnation
