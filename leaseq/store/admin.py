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
from typing import Any

from leaseq.errors import (
    DamagedRow,
    InvalidArgument,
)
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.replies import admin_error, as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings, parse_state
from leaseq.store.steps import Call
from leaseq.types import State

KEEP: Any = object()
"""``retry(..., payload=KEEP)``: the job keeps its own payload."""

__all__ = [
    "PURGE_LIMIT",
    "START",
    "AdminCalls",
    "Cursor",
    "OpResult",
    "Page",
    "purge_op",
    "retry_all_dead_op",
]

PURGE_LIMIT = 1000
"""Index entries one purge or retry-all page looks at."""

Cursor = tuple[str, str, int]
"""Where a paged operator run is: (snapshot's top score, cursor score, entries
at the cursor score stepped over). Scores are Redis's own score strings."""
START: Cursor = ("", "-inf", 0)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a purge or retry-all: how many rows it acted on, whether to
    go on and from where, and the jobs it stepped over as damaged."""

    done: int
    more: bool
    cursor: Cursor
    damaged: list[DamagedRow]

    @staticmethod
    def parse(r: list[Any]) -> Page:
        damaged = [
            DamagedRow(as_text(r[i]), as_text(r[i + 1]), as_text(r[i + 2]), "stepped over")
            for i in range(5, len(r) - 2, 3)
        ]
        upto = as_text(r[2])
        cursor = (upto, as_text(r[3]), int(r[4]))
        return Page(int(r[0]), bool(upto) and int(r[1]) == 1, cursor, damaged)


class AdminCalls(QueueSettings):
    """The operator calls of one job or one page: cancel, retry, purge, clock reset."""

    def cancel(self, job_id: str) -> Call[bool]:
        job_id = check_job_id(job_id)
        k = self.keys

        def parse(reply: list[Any]) -> bool:
            if as_text(reply[0]) != "OK":
                raise admin_error("cancel", job_id, reply)
            return int(reply[1]) == 1

        return SCRIPTS["cancel"].call(k, parse, at={"id": job_id}, id=job_id, keep_ms=self.keep_ms)

    def retry(self, job_id: str, attempts: int | None, payload: Any = KEEP) -> Call[int]:
        """Retry a dead job; with ``payload``, replace its payload in the same call."""
        job_id = check_job_id(job_id)
        body = b"" if payload is KEEP else self.codec.encode(payload)
        extra = (
            self.max_attempts
            if attempts is None
            else v.integer(attempts, "attempts", 1, v.MAX_ATTEMPTS)
        )
        k = self.keys

        def parse(reply: list[Any]) -> int:
            if as_text(reply[0]) != "OK":
                raise admin_error("retry", job_id, reply)
            return int(reply[1])

        return SCRIPTS["retry"].call(
            k, parse, at={"id": job_id}, id=job_id, extra=extra, payload=body
        )

    def update(self, job_id: str, payload: Any) -> Call[None]:
        """Replace the payload of a job that has not started (encoded and size-checked
        here, before the call)."""
        job_id = check_job_id(job_id)
        body = self.codec.encode(payload)

        def parse(reply: list[Any]) -> None:
            if as_text(reply[0]) != "OK":
                raise admin_error("update", job_id, reply)

        return SCRIPTS["update"].call(self.keys, parse, at={"id": job_id}, id=job_id, payload=body)

    def purge(
        self, state: State | str, cursor: Cursor = START, limit: int = PURGE_LIMIT
    ) -> Call[Page]:
        """One page of a purge of ``state`` (not active), from ``cursor`` on.

        The first page (``START``) fixes the snapshot: the index's highest
        score at that moment; later pages pass the returned ``Page.cursor``.
        Loop with ``_admin.purge_op``.
        """
        st = parse_state(state)
        if st is State.ACTIVE:
            raise InvalidArgument(
                "active jobs cannot be purged: their leases are held "
                "(let them finish, or reap them once expired)"
            )
        upto, after, skip = cursor
        return SCRIPTS["purge"].call(
            self.keys,
            Page.parse,
            at={"state": st.value},
            state=st.value,
            limit=limit,
            upto=upto,
            after=after,
            skip=skip,
        )

    def retry_page(
        self, attempts: int | None, op: str, cursor: Cursor = START, limit: int = PURGE_LIMIT
    ) -> Call[Page]:
        """One page of a retry of every dead job (see ``_admin.retry_all_dead_op``).

        ``op`` is the run's id: a job it already retried that died again is
        not retried a second time by the same run.
        """
        extra = (
            self.max_attempts
            if attempts is None
            else v.integer(attempts, "attempts", 1, v.MAX_ATTEMPTS)
        )
        upto, after, skip = cursor
        return SCRIPTS["retry_all"].call(
            self.keys,
            Page.parse,
            extra=extra,
            limit=limit,
            op=check_job_id(op, "operation id"),
            upto=upto,
            after=after,
            skip=skip,
        )

    def reset_clock(self) -> Call[tuple[float | None, float]]:
        """Drop the queue's clock floor (after a server clock ran ahead and was
        set back): returns (the floor dropped, or None; the server time), epoch s."""

        def parse(r: list[Any]) -> tuple[float | None, float]:
            floor = int(r[0])
            return (None if floor < 0 else floor / 1000.0), int(r[1]) / 1000.0

        return SCRIPTS["reset_clock"].call(self.keys, parse)


Run = Generator[Call[Page], Page, "OpResult"]
"""An operator run: yields one page's call at a time, returns what it did."""


@dataclass(frozen=True, slots=True)
class OpResult:
    """What a run did: rows acted on, and the damaged jobs it stepped over."""

    done: int
    damaged: list[DamagedRow] = field(default_factory=list)


def _paged(first: Callable[[tuple[str, str, int]], Call[Page]]) -> Run:
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


def purge_op(core: AdminCalls, state: State | str, limit: int = PURGE_LIMIT) -> Run:
    """Delete every job that was in ``state``'s index when the run began,
    ``limit`` index entries per call. Raises InvalidArgument (a bad or active
    state) before any call."""
    core.purge(state)  # validates the state before the first call
    return _paged(lambda cursor: core.purge(state, cursor, limit))


def retry_all_dead_op(core: AdminCalls, attempts: int | None, limit: int = PURGE_LIMIT) -> Run:
    """Retry every job that was dead when the run began, once each, ``limit``
    entries per call. Raises InvalidArgument (bad attempts) before any call."""
    op = uuid.uuid4().hex
    core.retry_page(attempts, op)  # validates attempts before the first call
    return _paged(lambda cursor: core.retry_page(attempts, op, cursor, limit))
