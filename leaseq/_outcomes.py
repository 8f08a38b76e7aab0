"""The worker's held-lease record and how finished handlers become fenced queue writes.

Completions that follow each other are written in one ``complete_many``
call; failures, retries, dead-letters and releases one script call each.
Every write carries the lease's token, so a lease lost meanwhile is refused
by the server, never overwritten.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import AlreadyFinished, InvalidArgument, InvalidPayload, LeaseLost
from .handler import JobContext
from .queue import Queue
from .types import Lease

logger = logging.getLogger("leaseq.worker")

WRITE_BATCH = 1000
"""Most completions written in one complete_many call (it chunks further)."""
BACKOFF_START, BACKOFF_CAP = 0.1, 5.0
"""Seconds between attempts to reach a Redis that is down: doubling, capped, jittered."""


@dataclass(eq=False)
class Task:
    """One held lease. ``outcome`` is set by the handler thread once it is done:
    ("done", result) | ("retry", in_, text) | ("dead", text) | ("error", text) | ("release",)."""

    lease: Lease
    ctx: JobContext
    next_beat: float
    """When to extend next, ``time.monotonic()`` seconds."""
    outcome: tuple[Any, ...] | None = None


class Backoff:
    """Exponential, capped, jittered waits for retrying a Redis that is down."""

    def __init__(self) -> None:
        self.delay = 0.0

    def next(self) -> float:
        self.delay = min(BACKOFF_CAP, max(BACKOFF_START, self.delay * 2))
        return self.delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.delay = 0.0


def log_job(queue: str, level: int, task: Task | None, msg: str, *args: Any) -> None:
    """Log with queue, job id and attempt on the line (and as ``extra`` fields)."""
    if not logger.isEnabledFor(level):
        return
    job, attempt = ("-", "-") if task is None else (task.lease.id, str(task.lease.attempt))
    logger.log(
        level,
        "queue=%s job=%s attempt=%s " + msg,
        queue,
        job,
        attempt,
        *args,
        extra={"queue": queue, "job_id": job, "attempt": attempt},
    )


class OutcomeWriter:
    """Writes finished tasks in order; ``holds`` says whether a task's lease is still
    ours, ``settle`` forgets tasks once written (or discarded)."""

    def __init__(
        self,
        queue: Queue,
        counts: dict[str, int],
        holds: Callable[[Task], bool],
        settle: Callable[[list[Task]], None],
    ) -> None:
        self.queue = queue
        self.counts = counts
        self.holds = holds
        self.settle = settle

    def _log(self, level: int, task: Task | None, msg: str, *args: Any) -> None:
        log_job(self.queue.name, level, task, msg, *args)

    def write(self, unwritten: list[Task]) -> None:
        """Write outcomes in order, removing each from ``unwritten`` once written.
        Raises ServerUnavailable (what is left stays in ``unwritten``)."""
        while unwritten:
            head = unwritten[0]
            kind = head.outcome[0] if head.outcome else "release"
            if not self.holds(head):
                # Lost to a heartbeat, or already handed back at shutdown.
                if head.ctx.lost.is_set() and kind != "release":
                    self.counts["lost"] += 1
                    self._log(logging.WARNING, head, "lease was lost: outcome discarded")
                unwritten.pop(0)
                self.settle([head])
                continue
            if kind == "done":
                n = 1
                while n < min(len(unwritten), WRITE_BATCH):
                    nxt = unwritten[n]
                    if not (nxt.outcome and nxt.outcome[0] == "done" and self.holds(nxt)):
                        break
                    n += 1
                run = unwritten[:n]
                self._complete(run)
                del unwritten[:n]
                self.settle(run)
                continue
            self._write_one(head)
            unwritten.pop(0)
            self.settle([head])

    def _complete(self, tasks: list[Task]) -> None:
        leases = [t.lease for t in tasks]
        results = [t.outcome[1] if t.outcome else None for t in tasks]
        try:
            refused = self.queue.complete_many(leases, results)
        except InvalidPayload:
            if len(tasks) > 1:  # find the one result that will not encode
                for task in tasks:
                    self._complete([task])
                return
            text = f"InvalidPayload: the handler's result does not encode: {results[0]!r}"
            self._fail(tasks[0], "result", text[:500])
            return
        self.counts["succeeded"] += len(tasks) - len(refused)
        by_key = {(t.lease.id, t.lease.attempt): t for t in tasks}
        for exc in refused:
            task = by_key[(exc.job_id, exc.token)]
            if isinstance(exc, AlreadyFinished):
                self.counts["succeeded"] += 1  # a replay: our own completion landed
            else:
                self.counts["lost"] += 1
                self._log(logging.WARNING, task, "complete refused, result discarded: %s", exc)
        if logger.isEnabledFor(logging.DEBUG):
            for task in tasks:
                self._log(logging.DEBUG, task, "succeeded")

    def _write_one(self, task: Task) -> None:
        outcome = task.outcome or ("release",)
        kind = outcome[0]
        if kind == "release":
            self.release(task, logging.INFO, "released (shutdown)")
        elif kind == "retry":
            self._fail(task, "retry", outcome[2], retry_in=outcome[1])
        elif kind == "dead":
            self._fail(task, "dead", outcome[1], dead=True)
        else:
            self._fail(task, "error", outcome[1])

    def release(self, task: Task, level: int, done: str) -> None:
        """Hand the job back to pending now (no attempt spent) and log ``done``;
        a lease already lost is only logged. Raises ServerUnavailable."""
        try:
            self.queue.release(task.lease)
        except LeaseLost as exc:
            self._log(logging.WARNING, task, "release refused: %s", exc)
            return
        self.counts["released"] += 1
        self._log(level, task, done)

    def _fail(
        self, task: Task, what: str, text: str, retry_in: float | None = None, dead: bool = False
    ) -> None:
        try:
            try:
                state = self.queue.fail(task.lease, text, retry_in, dead=dead)
            except InvalidArgument as exc:  # e.g. Retry(in_=-1): still record the failure
                state = self.queue.fail(task.lease, f"{text} (bad retry: {exc})")
        except LeaseLost as exc:
            self.counts["lost"] += 1
            self._log(logging.WARNING, task, "fail refused, outcome discarded: %s", exc)
            return
        self.counts["dead" if state.value == "dead" else "failed"] += 1
        first = text.splitlines()[0] if text else ""
        self._log(logging.WARNING, task, "%s -> %s: %s", what, state.value, first)
