"""Waiting for results: a job's finished row, read when the finishing scripts
signal the queue's ``done`` stream (XREAD BLOCK), never by polling."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument, JobNotFound
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.reads import parse_job
from leaseq.store.replies import as_text
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Command, Listen, Op, Rows
from leaseq.types import Job

__all__ = ["done_ids", "wait", "wait_many", "wait_names"]


def wait_names(ids: object) -> list[str]:
    """The checked ids of a ``wait_many``. A str is one id, not a list of them:
    ``wait_many("abc")`` would wait for jobs 'a', 'b' and 'c' (and raise
    JobNotFound for 'a'); it is refused as InvalidArgument instead."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise InvalidArgument(f"ids must be a list of job ids, not {ids!r:.80}")
    return [check_job_id(i) for i in ids]


def done_ids(fields: Any) -> list[str]:
    """The job ids of one ``done`` stream entry (field ``ids``, space-separated)."""
    raw = fields.get(b"ids", fields.get("ids", b"")) if isinstance(fields, dict) else b""
    return as_text(raw).split()


def wait(queue: QueueSettings, job_id: str, timeout: float = 30.0) -> Op[Job | None]:
    """The job once it finished (succeeded, dead or cancelled), or None after
    ``timeout`` seconds. Raises JobNotFound when no row has this id (never
    enqueued, or gone: ``keep_succeeded`` passed, purged)."""
    jobs = yield from wait_many(queue, [job_id], timeout)
    return jobs[0]


def wait_many(
    queue: QueueSettings, ids: Sequence[str], timeout: float = 300.0
) -> Op[list[Job | None]]:
    """Wait for many jobs at once: per id, in order, its finished Job, or None
    where it had not finished by ``timeout`` seconds. No polling: the finishing
    scripts signal the queue's ``done`` stream; this listens on it (XREAD
    BLOCK) and reads only the rows it names. Raises JobNotFound for an id
    whose row is gone when looked at."""
    names = wait_names(ids)
    give_up = time.monotonic() + v.delay_ms(timeout, "timeout") / 1000.0
    out: list[Job | None] = [None] * len(names)
    where: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        where.setdefault(name, []).append(i)
    # Subscribe first (the stream's newest entry), then look at the rows:
    # a job that finishes in between is in the stream after the cursor.
    newest = yield Command("xrevrange", (queue.keys.done, "+", "-", 1))
    cursor = as_text(newest[0][0]) if newest else "0-0"
    unfinished = yield from _finished(queue, list(where), where, out, missing_is_error=True)
    while unfinished:
        left = give_up - time.monotonic()
        if left <= 0:
            break
        entries = yield Listen(queue.keys.done, cursor, left)
        named: set[str] = set()
        for entry_id, fields in entries:
            cursor = entry_id
            named.update(i for i in done_ids(fields) if i in unfinished)
        if named:
            still = yield from _finished(queue, sorted(named), where, out, True)
            unfinished -= named - still
    if unfinished:
        # A last look: a signal trimmed out of the stream (past ~10,000
        # finishing calls while this waiter was away) is not lost for good.
        yield from _finished(queue, sorted(unfinished), where, out, True)
    return out


def _finished(
    queue: QueueSettings,
    names: list[str],
    where: dict[str, list[int]],
    out: list[Job | None],
    missing_is_error: bool,
) -> Op[set[str]]:
    """Read the rows of ``names`` (one pipeline); put the finished ones into
    ``out``; return the names still unfinished."""
    rows = yield Rows([queue.keys.job(name) for name in names])
    still: set[str] = set()
    for name, raw in zip(names, rows, strict=True):
        if isinstance(raw, Exception):
            raise DamagedRow(name, "<key>", None, "not a hash")
        job = parse_job(queue, name, raw)
        if job is None:
            if missing_is_error:
                raise JobNotFound(name)
            continue
        if job.state.finished:
            for i in where[name]:
                out[i] = job
        else:
            still.add(name)
    return still
