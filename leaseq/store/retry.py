"""Retrying dead jobs: one (``lua/retry.lua``, optionally with a new payload), or
every job that was dead when the run began (``lua/retry_all.lua``, paged by
``leaseq.store.paging``)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from leaseq.errors import DamagedRow
from leaseq.store import validate as v
from leaseq.store.edit import checked_edit
from leaseq.store.keys import check_job_id
from leaseq.store.paging import PAGE_LIMIT, START, Cursor, Page, Run, paged
from leaseq.store.replies import admin_error, as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = [
    "KEEP",
    "retry_all_dead",
    "retry_all_dead_op",
    "retry_call",
    "retry_dead",
    "retry_page",
]

KEEP: Any = object()
"""``retry(..., payload=KEEP)``: the job keeps its own payload."""


def _more_attempts(queue: QueueSettings, attempts: int | None) -> int:
    if attempts is None:
        return queue.max_attempts
    return v.integer(attempts, "attempts", 1, v.MAX_ATTEMPTS)


def retry_call(
    queue: QueueSettings,
    job_id: str,
    attempts: int | None,
    payload: Any = KEEP,
    expires: float | datetime.datetime | None = None,
) -> Call[int]:
    """Retry a dead job; with ``payload``, replace its payload in the same call;
    with ``expires``, give it a new start-by deadline (else it has none)."""
    job_id = check_job_id(job_id)
    body = b"" if payload is KEEP else queue.codec.encode(payload)
    extra = _more_attempts(queue, attempts)
    deadline = v.expires(expires)

    def parse(reply: list[Any]) -> int:
        if as_text(reply[0]) != "OK":
            raise admin_error("retry", job_id, reply)
        return int(reply[1])

    return SCRIPTS["retry"].call(
        queue.keys,
        parse,
        at={"id": job_id},
        id=job_id,
        extra=extra,
        payload=body,
        expires=deadline,
    )


def retry_dead(
    queue: QueueSettings,
    job_id: str,
    *,
    attempts: int | None = None,
    payload: Any = KEEP,
    kind: str | None = None,
    expires: float | datetime.datetime | None = None,
) -> Op[int]:
    """Make a dead job pending again with ``attempts`` more tries (default: the
    queue's max_attempts). ``attempts`` in the row is kept, ``max_attempts``
    raised; returns the new max_attempts. ``payload``: a new payload, checked
    as ``enqueue`` checks one, written in the same call (edit and retry; the
    old one goes to the event stream). Raises JobNotFound, JobStateError,
    InvalidPayload, PayloadTooLarge, and what a typed task of the job's kind
    raises for a call that does not fit it. ``kind``: the job must be of this
    kind (InvalidArgument otherwise; a typed task's ``retry_dead`` passes its
    name), read in the same HGET. ``expires``: a new start-by deadline, as for
    ``enqueue`` (a job dead-lettered past its deadline is retried with none unless
    given one)."""
    call = retry_call(queue, job_id, attempts, payload, expires)
    if payload is not KEEP or kind is not None:
        yield from checked_edit(queue, job_id, payload, kind, payload is not KEEP)
    bound: int = yield call
    return bound


def retry_page(
    queue: QueueSettings,
    attempts: int | None,
    op: str,
    cursor: Cursor = START,
    limit: int = PAGE_LIMIT,
) -> Call[Page]:
    """One page of a retry of every dead job (see ``retry_all_dead_op``).

    ``op`` is the run's id: a job it already retried that died again is
    not retried a second time by the same run.
    """
    extra = _more_attempts(queue, attempts)
    upto, after, skip = cursor
    return SCRIPTS["retry_all"].call(
        queue.keys,
        Page.parse,
        extra=extra,
        limit=limit,
        op=check_job_id(op, "operation id"),
        upto=upto,
        after=after,
        skip=skip,
    )


def retry_all_dead_op(queue: QueueSettings, attempts: int | None, limit: int = PAGE_LIMIT) -> Run:
    """Retry every job that was dead when the run began, once each, ``limit``
    entries per call at most (fewer once a call has worked its time budget: the
    page says more is left). Raises InvalidArgument (bad attempts) before any call."""
    op = uuid.uuid4().hex
    retry_page(queue, attempts, op)  # validates attempts before the first call
    return paged(lambda cursor: retry_page(queue, attempts, op, cursor, limit))


def retry_all_dead(
    queue: QueueSettings,
    *,
    attempts: int | None = None,
    damaged: list[DamagedRow] | None = None,
) -> Op[int]:
    """Retry every job that was dead when the call began, once each; returns
    how many. A row damaged by hand stays dead and is stepped over (appended
    to ``damaged`` when given); a stale dead-set entry is dropped."""
    result = yield from retry_all_dead_op(queue, attempts)
    if damaged is not None:
        damaged.extend(result.damaged)
    return result.done
