"""Around one job's handler: what metrics and tracing hear, and the outcome
handed to the reporter. Handler threads (``leaseq.work.engine``) and slots on
a loop (``leaseq.work.loop_slots``) run handlers; both end a run here, so a
job ends alike whichever ran it.
"""

from __future__ import annotations

import logging
import queue as queue_mod
from collections.abc import Callable
from typing import Any

from leaseq.observe.observer import JobObserver
from leaseq.observe.tracing import JobTracer
from leaseq.types import Lease
from leaseq.work.held import Task
from leaseq.work.log import log_job
from leaseq.work.outcomes import DONE, Encode, decide
from leaseq.work.timeouts import Timeouts
from leaseq.work.told import Told

__all__ = ["JobRuns"]


class JobRuns:
    """How the runs of one worker's jobs begin and end (see the module doc)."""

    def __init__(
        self,
        queue: str,
        ttl: float,
        metrics: JobObserver | None,
        tracer: JobTracer | None,
        encode: Callable[[Lease], Encode | None],
        timeouts: Timeouts,
    ) -> None:
        self.queue, self.ttl, self.metrics, self.tracer = queue, ttl, metrics, tracer
        self.encode, self.timeouts = encode, timeouts

    def told(self, task: Task) -> Told | None:
        """What this job's run tells metrics and tracing, if either is on."""
        if self.metrics is None and self.tracer is None:
            return None
        return Told(self.queue, self.metrics, task.lease, self.ttl, self.tracer)

    def finish(
        self,
        task: Task,
        done: queue_mod.SimpleQueue[Task | None],
        raised: BaseException | None,
        value: Any,
        told: Told | None,
    ) -> None:
        """``task``'s handler ended (``raised``, or returned ``value``): put it on
        ``done`` with its outcome for the reporter, unless it timed out or was
        handed back meanwhile (``Timeouts.returned``: then it is discarded)."""
        outcome = (
            DONE
            if raised is None and value is None
            else decide(raised, value, self.encode(task.lease))
        )
        if told is not None:
            told.finished(outcome.kind, task.lease)
        written = self.timeouts.returned(task, outcome)
        if told is not None:  # a run that timed out ends with its timeout outcome
            ended = task.outcome if task.outcome is not None else outcome
            told.span_end(ended, raised if written else None, written and task.ctx.lost.is_set())
        if written:
            done.put(task)

    def bug(self, exc: BaseException) -> None:
        """A bug of the worker itself: said, not lost silently."""
        log_job(self.queue, logging.ERROR, None, "worker error: %r", exc)
