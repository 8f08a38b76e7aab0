"""Testing your own tasks: run a queue's jobs to the end, in-process.

``drain(q)`` runs every job of ``q`` with a real worker until none is left,
jobs scheduled for later (a delay, a retry's backoff) and asleep
(``current_job().sleep``) included, without waiting for their time; it
returns how many runs there were. ``memory_queue()`` gives a queue on a fresh
embedded ``memory://`` store (the ``memory`` extra). ``jobs(q, *states)``
lists what a test enqueued. docs/testing.md shows a team's ``conftest.py``.

What ``drain`` runs is what a worker runs: the same claims, leases, retries,
timeouts and durable steps, in one worker of one slot, so jobs run one at a
time in queue order. It does not end a wait for a signal (``wait_for``): such
a job stays suspended until the test sends the signal and drains again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from leaseq.errors import InvalidArgument, JobNotFound, JobStateError
from leaseq.queue import Queue
from leaseq.sharded import ShardedQueue
from leaseq.transport.memory import forget
from leaseq.types import Job, Lease, State
from leaseq.worker import Worker

__all__ = ["DrainLimit", "drain", "jobs", "memory_queue"]

PAGE = 1000
"""Jobs read per page of an index (``Queue.ls``)."""


class DrainLimit(InvalidArgument):
    """``drain`` ran more jobs than its ``limit``: a job that enqueues another
    forever, or a limit too small for the test."""


class _Runs:
    """A worker's observer (``leaseq.observe.JobObserver``) that counts the
    handler runs it starts and stops the worker once they pass ``limit``."""

    def __init__(self, limit: int) -> None:
        self.count, self.limit = 0, limit
        self.worker: Worker | None = None

    def slots(self, queue: str, concurrency: int) -> None:
        pass

    def started(self, queue: str, lease: Lease, ttl: float) -> None:
        self.count += 1
        if self.count > self.limit and self.worker is not None:
            self.worker.stop()  # a job that enqueues another forever: one burst never ends

    def finished(
        self, queue: str, outcome: str, seconds: float, lease: Lease | None = None
    ) -> None:
        pass

    def lost(self, queue: str, n: int = 1) -> None:
        pass


def drain(
    queue: Queue | ShardedQueue,
    handlers: Callable[..., Any] | Mapping[str, Callable[..., Any]] | None = None,
    *,
    limit: int = 100_000,
) -> int:
    """Run every job of ``queue`` until none is left; return how many runs there
    were (a job retried twice counts three).

    ``handlers``: what a ``leaseq.Worker`` takes (one handler, or handlers by
    kind); None: the queue's tasks (``@q.task``). Jobs due later (a delay, a
    retry's backoff) and jobs asleep are made due at once (``run_now``), round
    after round, until a round leaves nothing claimable: then every job has
    succeeded, died, been cancelled, or waits for a signal. Raises DrainLimit
    past ``limit`` runs, and whatever a run of the worker raises.
    """
    if handlers is None:
        handlers = queue.tasks
        if not handlers:
            raise InvalidArgument(
                f"queue {queue.name!r} has no tasks (@q.task): pass drain(q, handlers)"
            )
    runs = _Runs(limit)
    while True:
        runs.worker = Worker(queue, handlers, concurrency=1, handle_signals=False, metrics=runs)
        runs.worker.run(burst=True)
        if runs.count > limit:
            raise DrainLimit(f"drain ran {runs.count} jobs, past its limit of {limit}")
        if not _make_due(queue):
            return runs.count


def _make_due(queue: Queue | ShardedQueue) -> int:
    """Make every scheduled job and every sleeping one due now; how many it moved."""
    moved = 0
    for job in jobs(queue, State.SCHEDULED, State.SUSPENDED):
        if job.state is State.SUSPENDED and job.wait_key is not None:
            continue  # waits for a signal: the test sends it
        try:
            queue.run_now(job.id)
        except (JobNotFound, JobStateError):
            continue  # moved on meanwhile (a handler thread of an earlier run)
        moved += 1
    return moved


def jobs(queue: Queue | ShardedQueue, *states: State | str) -> list[Job]:
    """Every job of ``queue`` in ``states`` (default: every state), each state's
    in its index order (pending: next to run first): what a test enqueued."""
    out: list[Job] = []
    for state in states or tuple(State):
        offset = 0
        while True:
            page = queue.ls(state, offset=offset, limit=PAGE)
            out += page
            # Pending's ready list may hold entries of jobs gone (shown as none):
            # a short page there is not yet the end.
            if not page or (len(page) < PAGE and State(state) is not State.PENDING):
                break
            offset += PAGE
    return out


@contextmanager
def memory_queue(name: str = "test", **settings: Any) -> Iterator[Queue]:
    """A queue on a fresh embedded ``memory://`` store of its own (``settings``
    as for ``leaseq.Queue``), closed when the block ends; nothing is shared
    with another test's queue."""
    url = f"memory://leaseq-testing-{uuid.uuid4().hex}"
    queue = Queue.from_url(url, name, **settings)
    try:
        yield queue
    finally:
        queue.close()
        forget(url)  # the store itself, not only its keys
