"""Operator runs that span many script calls, written once and without I/O.

Each run is a generator: it yields a ``Call``, receives that call's parsed
reply through ``send()``, and returns a small typed result; the queue
operations of ``leaseq.store.ops`` run it with ``yield from``, so the paging rules
exist in one place for every transport.

Both runs work from a fixed snapshot: the first page records the index's
highest score, and the run pages by (score, stepped-over count) up to it.
Rows acted on leave the index; rows that cannot be acted on (a job key that
is not a hash, a damaged state or attempts) stay, are reported in the
result and are paged past, so one damaged job never blocks the rest. A job
that dies again while retry-all runs scores above the snapshot (or carries
this run's id in ``retry_op``) and is not retried twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from leaseq.errors import DamagedRow
from leaseq.store.core import PURGE_LIMIT, START, Call, Page, QueueCore
from leaseq.types import State

__all__ = ["OpResult", "purge_op", "retry_all_dead_op"]

Op = Generator[Call[Page], Page, "OpResult"]


@dataclass(frozen=True, slots=True)
class OpResult:
    """What a run did: rows acted on, and the damaged jobs it stepped over."""

    done: int
    damaged: list[DamagedRow] = field(default_factory=list)


def _paged(first: Callable[[tuple[str, str, int]], Call[Page]]) -> Op:
    done, cursor = 0, START
    damaged: dict[str, DamagedRow] = {}
    while True:
        page = yield first(cursor)
        done += page.done
        for row in page.damaged:
            damaged.setdefault(row.job_id, row)
        if not page.more:
            return OpResult(done, list(damaged.values()))
        cursor = page.cursor


def purge_op(core: QueueCore, state: State | str, limit: int = PURGE_LIMIT) -> Op:
    """Delete every job that was in ``state``'s index when the run began,
    ``limit`` index entries per call. Raises InvalidArgument (a bad or active
    state) before any call."""
    core.purge(state)  # validates the state before the first call
    return _paged(lambda cursor: core.purge(state, cursor, limit))


def retry_all_dead_op(core: QueueCore, attempts: int | None, limit: int = PURGE_LIMIT) -> Op:
    """Retry every job that was dead when the run began, once each, ``limit``
    entries per call. Raises InvalidArgument (bad attempts) before any call."""
    op = uuid.uuid4().hex
    core.retry_page(attempts, op)  # validates attempts before the first call
    return _paged(lambda cursor: core.retry_page(attempts, op, cursor, limit))
