"""Removing rows: every job of a state (``lua/purge.lua``, paged by
``leaseq.store.paging``), one job (``lua/delete.lua``), or the whole queue
(``lua/drop.lua``)."""

from __future__ import annotations

from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument
from leaseq.store.keys import check_job_id
from leaseq.store.paging import PAGE_LIMIT, START, Cursor, Page, Run, paged
from leaseq.store.replies import admin_error, as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings, parse_state
from leaseq.store.steps import Call, Op
from leaseq.types import State

__all__ = [
    "DROP_LIMIT",
    "delete",
    "delete_call",
    "drop",
    "drop_call",
    "purge",
    "purge_op",
    "purge_page",
]

DROP_LIMIT = 1000
"""Most jobs one drop call deletes; fewer once it has worked its time budget
(lua/lib/over_budget.lua), so no call blocks the server for long."""


def purge_page(
    queue: QueueSettings, state: State | str, cursor: Cursor = START, limit: int = PAGE_LIMIT
) -> Call[Page]:
    """One page of a purge of ``state`` (not active), from ``cursor`` on.

    The first page (``START``) fixes the snapshot: the index's highest
    score at that moment; later pages pass the returned ``Page.cursor``.
    Loop with ``purge_op``.
    """
    st = parse_state(state)
    if st is State.ACTIVE:
        raise InvalidArgument(
            "active jobs cannot be purged: their leases are held "
            "(let them finish, or reap them once expired)"
        )
    upto, after, skip = cursor
    return SCRIPTS["purge"].call(
        queue.keys,
        Page.parse,
        at={"state": st.value},
        state=st.value,
        limit=limit,
        upto=upto,
        after=after,
        skip=skip,
    )


def purge_op(queue: QueueSettings, state: State | str, limit: int = PAGE_LIMIT) -> Run:
    """Delete every job that was in ``state``'s index when the run began,
    ``limit`` index entries per call at most (fewer once a call has worked its
    time budget: the page says more is left). Raises InvalidArgument (a bad or
    active state) before any call."""
    purge_page(queue, state)  # validates the state before the first call
    return paged(lambda cursor: purge_page(queue, state, cursor, limit))


def purge(
    queue: QueueSettings, state: State | str, *, damaged: list[DamagedRow] | None = None
) -> Op[int]:
    """Delete every job that was in ``state`` (not active) when the call began;
    returns how many rows went. A job key that is not a hash is stepped over
    (appended to ``damaged`` when given)."""
    result = yield from purge_op(queue, state)
    if damaged is not None:
        damaged.extend(result.damaged)
    return result.done


def delete_call(queue: QueueSettings, job_id: str) -> Call[str]:
    """Delete one job row and its index entry, whatever its state but active.

    The reply is the state the job was in. JobNotFound for an unknown id,
    JobStateError for an active job (its lease is held: cancel is not
    possible either; let it finish or expire).
    """
    job_id = check_job_id(job_id)

    def parse(reply: Any) -> str:
        if as_text(reply[0]) != "OK":
            raise admin_error("delete", job_id, reply)
        return as_text(reply[1])

    return SCRIPTS["delete"].call(queue.keys, parse, at={"id": job_id}, id=job_id)


def delete(queue: QueueSettings, job_id: str) -> Op[str]:
    """Delete one job that holds no lease (row and index entry); returns the
    state it was in. Raises JobNotFound, or JobStateError for an active job."""
    state: str = yield delete_call(queue, job_id)
    return state


def drop_call(queue: QueueSettings, force: bool, limit: int = DROP_LIMIT) -> Call[tuple[int, int]]:
    """One step of deleting the whole queue: ``(rows deleted, jobs remaining)``.

    It deletes ``limit`` jobs at most, fewer once it has worked its time
    budget. Run it until nothing remains; the queue is paused from the first call
    on, and its meta hash (counters, the flag) goes with the last job.
    Without ``force`` a queue with leases in flight is refused (JobStateError
    naming how many), before anything is written.
    """

    def parse(reply: Any) -> tuple[int, int]:
        if as_text(reply[0]) != "OK":
            raise admin_error("drop", f"queue {queue.name!r}", reply)
        return int(reply[1]), int(reply[2])

    return SCRIPTS["drop"].call(queue.keys, parse, limit=limit, force=1 if force else 0)


def drop(queue: QueueSettings, *, force: bool = False) -> Op[int]:
    """Delete the whole queue: every job, its counters and flags; returns how many
    rows went. Paused from the first call on (1,000 jobs per call at most, fewer
    past a call's time budget). Raises
    JobStateError while leases are in flight, unless ``force``: then their
    holders' completions meet LeaseLost."""
    deleted = 0
    while True:
        gone, remaining = yield drop_call(queue, force)
        deleted += int(gone)
        if remaining == 0:
            return deleted
