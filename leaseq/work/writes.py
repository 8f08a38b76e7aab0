"""How the threaded worker writes outcomes.

Completions that follow each other are written in one ``complete_many``
call; failures, retries, dead-letters and releases one script call each.
Every write carries the lease's token, so a lease lost meanwhile is refused
by the server, never overwritten.
"""

from __future__ import annotations

import logging
import queue as queue_mod
import time
from collections.abc import Callable
from typing import Any

from leaseq.errors import AlreadyFinished, DamagedRow, InvalidArgument, LeaseLost, LeaseqError
from leaseq.handler import JobContext
from leaseq.observe.observer import JobObserver
from leaseq.types import Lease
from leaseq.work.held import Task
from leaseq.work.log import log_job, log_written, logger
from leaseq.work.outage import error_kind
from leaseq.work.outcomes import RELEASE, WRITE_BATCH, Outcome, completion_batch

OUTCOME_LINGER = 0.002
"""Seconds the reporter waits, after a first outcome, for others to join its write
while more jobs are running (the added latency of a completion, at most)."""


def gather(
    done: queue_mod.SimpleQueue[Task | None], into: list[Task], timeout: float, linger: bool
) -> None:
    """Move finished tasks from ``done`` to ``into`` (at most ``WRITE_BATCH``),
    waiting up to ``timeout`` s for the first. With ``linger`` (other jobs are
    running) their outcomes may gather for a moment, so one complete_many
    carries many and the handlers' puts wake no one meanwhile. A None in
    ``done`` only wakes the reporter."""
    try:
        item = done.get(timeout=timeout)
    except queue_mod.Empty:
        return
    if item is not None and linger:
        time.sleep(OUTCOME_LINGER)
    while True:
        if item is not None:
            into.append(item)
            if len(into) >= WRITE_BATCH:
                return
        try:
            item = done.get_nowait()
        except queue_mod.Empty:
            return


def unstarted(work: queue_mod.SimpleQueue[Task | None]) -> list[Task]:
    """The leases still waiting for a handler thread, taken off ``work`` with the
    RELEASE outcome (at shutdown: handed back unstarted, no attempt spent)."""
    out: list[Task] = []
    while True:
        try:
            task = work.get_nowait()
        except queue_mod.Empty:
            return out
        if task is not None:
            task.outcome = RELEASE
            out.append(task)


class OutcomeWriter:
    """Writes finished tasks in order; ``holds`` says whether a task's lease is still
    ours, ``settle`` forgets tasks once written (or discarded)."""

    def __init__(
        self,
        queue: Any,
        counts: dict[str, int],
        holds: Callable[[Task], bool],
        settle: Callable[[list[Task]], None],
    ) -> None:
        self.queue = queue
        self.counts = counts
        self.holds = holds
        self.settle = settle
        self._lost_told = 0

    def report_lost(self, observer: JobObserver | None) -> None:
        """Tell ``observer`` how many more outcomes were discarded since last told."""
        lost = self.counts["lost"]
        if observer is not None and lost != self._lost_told:
            observer.lost(self.queue.name, lost - self._lost_told)
        self._lost_told = lost

    def _log(self, level: int, task: Task | None, msg: str, *args: Any) -> None:
        log_job(self.queue.name, level, task, msg, *args)

    def write(self, unwritten: list[Task]) -> None:
        """Write outcomes in order, removing each from ``unwritten`` once written.
        Raises ServerUnavailable (what is left stays in ``unwritten``) and fatal errors."""
        while unwritten:
            head = unwritten[0]
            outcome = head.outcome or RELEASE
            if not self.holds(head):
                # Lost to a heartbeat, or already handed back at shutdown.
                if head.ctx.lost.is_set() and outcome.kind != "release" and not head.handed_back:
                    self.counts["lost"] += 1
                    self._log(logging.WARNING, head, "lease was lost: outcome discarded")
                unwritten.pop(0)
                self.settle([head])
                continue
            if outcome.kind == "complete":
                # The completions that follow in order, as far as one call takes them.
                admit = completion_batch()
                admit(head.lease)
                n = 1
                while n < len(unwritten):
                    nxt = unwritten[n]
                    if not (nxt.outcome and nxt.outcome.kind == "complete" and self.holds(nxt)):
                        break
                    if not admit(nxt.lease):
                        break
                    n += 1
                run = unwritten[:n]
                self._complete(run)
                del unwritten[:n]
                self.settle(run)
                continue
            self._write_one(head, outcome)
            unwritten.pop(0)
            self.settle([head])

    def _complete(self, tasks: list[Task]) -> None:
        # Every result was checked by decide() with the queue's own encoder.
        leases = [t.lease for t in tasks]
        results = [t.outcome.result if t.outcome else None for t in tasks]
        costs = [t.ctx.spent for t in tasks]  # set_cost's, sent only where one was set
        refused = self.queue.complete_many(
            leases, results, costs if any(c is not None for c in costs) else None
        )
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

    def _write_one(self, task: Task, outcome: Outcome) -> None:
        if outcome.kind == "release":
            why = "shutdown" if outcome is RELEASE else outcome.error
            self.release(task, logging.INFO, f"released ({why})")
            return
        if outcome.kind == "suspend":
            self._suspend(task, outcome)
            return
        retry_in = outcome.retry_in
        backoff = task.ctx.backoff  # a typed task's own (@q.task(backoff=))
        if retry_in is None and backoff is not None:
            retry_in = backoff if isinstance(backoff, float) else backoff.delay(task.lease.attempt)
        try:
            state = self.queue.fail(
                task.lease,
                outcome.error,
                retry_in,
                dead=outcome.kind == "dead",
                traceback=outcome.traceback or None,
                cost=task.ctx.spent,
            )
        except LeaseLost as exc:
            self.counts["lost"] += 1
            self._log(logging.WARNING, task, "fail refused, outcome discarded: %s", exc)
            return
        except (DamagedRow, InvalidArgument) as exc:
            self.counts["lost"] += 1
            self._log(logging.WARNING, task, "outcome not written (%s); lease will expire", exc)
            return
        self.counts["dead" if state.value == "dead" else "failed"] += 1
        log_written(self.queue.name, task.lease, outcome, state.value)

    def _suspend(self, task: Task, outcome: Outcome) -> None:
        """The handler slept or waits for a signal (``current_job().sleep``,
        ``wait_for``): the job waits in suspended."""
        try:
            wakes = self.queue.suspend(task.lease, outcome.error, outcome.retry_in, outcome.result)
        except (LeaseLost, DamagedRow, InvalidArgument) as exc:
            self.counts["lost"] += 1
            self._log(logging.WARNING, task, "sleep not written (%s): outcome discarded", exc)
            return
        self.counts["suspended"] += 1
        how = "for a signal" if wakes is None else f"until {wakes:.3f}"
        self._log(logging.INFO, task, "suspended (%s) %s", outcome.error, how)

    def hand_back(self, leases: list[Lease]) -> None:
        """Release leases a claim brought in after the stop (never left active)."""
        for lease in leases:
            try:
                self.release(
                    Task(lease, JobContext(lease), 0.0), logging.INFO, "released (claimed at stop)"
                )
            except LeaseqError as exc:
                self._log(logging.WARNING, None, "could not release %s (%s)", lease.id, exc)

    def release(self, task: Task, level: int, done: str) -> None:
        """Hand the job back to pending now (no attempt spent) and log ``done``;
        a lease already lost is only logged. Raises ServerUnavailable."""
        try:
            # A lease whose handler never began spent nothing of its cost estimate.
            self.queue.release(task.lease, cost=None if task.started else 0)
        except (LeaseLost, DamagedRow) as exc:
            self._log(logging.WARNING, task, "release refused: %s", exc)
            return
        self.counts["released"] += 1
        self._log(level, task, done)

    def release_running(self, running: list[Task]) -> None:
        """Past a stop's grace: release the jobs whose handlers still run (their
        outcome will be discarded), forgetting each. On a server that does not
        answer, each call fails only after the client's timeouts and retries (a
        minute and more with redis-py's defaults): after the first such failure
        the others are left to expire, not tried one by one."""
        down = False
        for i, task in enumerate(running):
            if not down:
                try:
                    self.release(task, logging.WARNING, "released unfinished at shutdown")
                except LeaseqError as exc:
                    self._log(
                        logging.WARNING, task, "could not release (%s); lease will expire", exc
                    )
                    down = error_kind(exc) == "transient"
                    if down and len(running) > i + 1:
                        self._log(
                            logging.WARNING,
                            None,
                            "%d more running job(s) not released; their leases will expire",
                            len(running) - i - 1,
                        )
            self.settle([task])
