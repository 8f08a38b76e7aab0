"""Waiting for results: a job's finished row, read when the finishing scripts
signal the queue's ``done`` stream (XREAD BLOCK), never by polling. The rows
waited on are held first (``lua/hold_results.lua``), so the count bound
(``keep_succeeded_count``) does not delete them under the waiter; an id whose
row is gone all the same comes back as ``leaseq.GONE``."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument, JobNotFound
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.reads import parse_job
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Batch, Call, Command, Listen, Op, Partial, joined, read_rows
from leaseq.types import GONE, Gone, Job

__all__ = [
    "HOLD_AFTER",
    "HOLD_CHUNK",
    "done_ids",
    "hold_calls",
    "hold_results",
    "wait",
    "wait_held",
    "wait_many",
    "wait_names",
]

HOLD_AFTER = 60.0
"""Seconds a waiter's hold on its rows outlasts its timeout: time for the
last look at its deadline, and for a ``results()`` of the same ids right
after it returns."""
HOLD_CHUNK = 1000
"""Ids sent in one ``hold_results`` call (fewer are done where a call stops
at its time budget; the rest is sent again)."""


def wait_names(ids: object) -> list[str]:
    """The checked ids of a ``wait_many``. A str is one id, not a list of them:
    ``wait_many("abc")`` would wait for jobs 'a', 'b' and 'c'; it is refused
    as InvalidArgument instead."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise InvalidArgument(f"ids must be a list of job ids, not {ids!r:.80}")
    return [check_job_id(i) for i in ids]


def done_ids(fields: Any) -> list[str]:
    """The job ids of one ``done`` stream entry (field ``ids``, space-separated)."""
    raw = fields.get(b"ids", fields.get("ids", b"")) if isinstance(fields, dict) else b""
    return as_text(raw).split()


def hold_calls(queue: QueueSettings, names: Sequence[str], hold_ms: int) -> list[Call[Batch[bool]]]:
    """The ``hold_results.lua`` calls that hold the rows of ``names`` for
    ``hold_ms`` from now (server clock), HOLD_CHUNK ids a call; a call that
    stops at its time budget is followed by one for its rest. Per id: True if
    a row was there to hold."""
    script = SCRIPTS["hold_results"]

    def call(part: Sequence[str]) -> Call[Batch[bool]]:
        def parse(reply: list[Any]) -> Batch[bool]:
            done = [int(x) == 1 for x in reply]
            if len(done) >= len(part):
                return done
            return Partial(done, call(part[len(done) :]))

        return script.call(queue.keys, parse, arg_tail=list(part), hold_ms=hold_ms)

    return [call(names[i : i + HOLD_CHUNK]) for i in range(0, len(names), HOLD_CHUNK)]


def hold_results(queue: QueueSettings, names: Sequence[str], timeout: float) -> Op[list[bool]]:
    """Hold the rows of ``names`` (checked ids, each once) against the count
    bound for ``timeout`` + HOLD_AFTER seconds: ``keep_succeeded_count`` steps
    over them until then (their ``keep_succeeded`` expiry still applies). Per
    id: True if a row was there to hold."""
    hold_ms = v.delay_ms(timeout, "timeout") + round(HOLD_AFTER * 1000)
    return (yield from joined(hold_calls(queue, names, hold_ms)))


def wait(queue: QueueSettings, job_id: str, timeout: float = 30.0) -> Op[Job | None]:
    """The job once it finished (succeeded, dead or cancelled), or None after
    ``timeout`` seconds. Its row is held against the count bound meanwhile
    (``wait_many``). Raises JobNotFound when no row has this id (never
    enqueued, or gone: ``keep_succeeded`` passed, purged): the call is about
    that one job."""
    jobs = yield from wait_many(queue, [job_id], timeout)
    found = jobs[0]
    if found is GONE:
        raise JobNotFound(job_id)
    return found


def wait_many(
    queue: QueueSettings, ids: Sequence[str], timeout: float = 300.0
) -> Op[list[Job | Gone | None]]:
    """Wait for many jobs at once: per id, in order, its finished Job, None
    where it had not finished by ``timeout`` seconds, or ``leaseq.GONE`` where
    no row has the id when looked at (never enqueued, deleted, or its
    retention passed). The rows are held first (``hold_results``), so the
    count bound does not delete them while this waits. No polling: the
    finishing scripts signal the queue's ``done`` stream; this listens on it
    (XREAD BLOCK) and reads only the rows it names."""
    names = wait_names(ids)
    give_up = time.monotonic() + v.delay_ms(timeout, "timeout") / 1000.0
    yield from hold_results(queue, list(dict.fromkeys(names)), timeout)
    return (yield from wait_held(queue, names, give_up))


def wait_held(
    queue: QueueSettings, names: Sequence[str], give_up: float
) -> Op[list[Job | Gone | None]]:
    """``wait_many`` once its rows are held: wait for ``names`` (checked ids)
    until ``give_up`` (a ``time.monotonic()`` deadline). A sharded queue holds
    every shard's rows first, then runs this per shard."""
    out: list[Job | Gone | None] = [None] * len(names)
    where: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        where.setdefault(name, []).append(i)
    # Subscribe first (the stream's newest entry), then look at the rows:
    # a job that finishes in between is in the stream after the cursor.
    newest = yield Command("xrevrange", (queue.keys.done, "+", "-", 1))
    cursor = as_text(newest[0][0]) if newest else "0-0"
    unfinished = yield from _finished(queue, list(where), where, out)
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
            still = yield from _finished(queue, sorted(named), where, out)
            unfinished -= named - still
    if unfinished:
        # A last look: a signal trimmed out of the stream (past ~10,000
        # finishing calls while this waiter was away) is not lost for good.
        yield from _finished(queue, sorted(unfinished), where, out)
    return out


def _finished(
    queue: QueueSettings,
    names: list[str],
    where: dict[str, list[int]],
    out: list[Job | Gone | None],
) -> Op[set[str]]:
    """Read the rows of ``names`` (pipelines of ROWS_CHUNK); put the finished ones, and
    GONE for those with no row, into ``out``; return the names still
    unfinished."""
    rows = yield from read_rows([queue.keys.job(name) for name in names])
    still: set[str] = set()
    for name, raw in zip(names, rows, strict=True):
        if isinstance(raw, Exception):
            raise DamagedRow(name, "<key>", None, "not a hash")
        job = parse_job(queue, name, raw)
        if job is not None and not job.state.finished:
            still.add(name)
            continue
        for i in where[name]:
            out[i] = GONE if job is None else job
    return still
