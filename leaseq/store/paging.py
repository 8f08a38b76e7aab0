"""Operator runs that span many script calls (purge, retry all), paged once and
without I/O.

Each run is a generator: it yields a ``Call``, receives that call's parsed
reply through ``send()``, and returns a small typed result; the operations
of ``leaseq.store.purge`` and ``leaseq.store.retry`` run it with ``yield from``,
so the paging rules exist in one place for every transport.

Both runs work from a fixed snapshot: the first page records the index's
highest score, and the run pages by (score, stepped-over count) up to it.
Rows acted on leave the index; rows that cannot be acted on (a job key that
is not a hash, a damaged state or attempts) stay, are reported in the
result and are paged past, so one damaged job never blocks the rest. A job
that dies again while retry-all runs scores above the snapshot (or carries
this run's id in ``retry_op``) and is not retried twice.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from leaseq.errors import DamagedRow
from leaseq.store.replies import as_text
from leaseq.store.steps import Call

__all__ = ["PAGE_LIMIT", "START", "Cursor", "OpResult", "Page", "Run", "paged"]

PAGE_LIMIT = 1000
"""Index entries one purge or retry-all call looks at at most; fewer once the
call has worked its time budget (lua/lib/over_budget.lua): its page says more."""

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


@dataclass(frozen=True, slots=True)
class OpResult:
    """What a run did: rows acted on, and the damaged jobs it stepped over."""

    done: int
    damaged: list[DamagedRow] = field(default_factory=list)


Run = Generator[Call[Page], Page, OpResult]
"""An operator run: yields one page's call at a time, returns what it did."""


def paged(page_at: Callable[[Cursor], Call[Page]]) -> Run:
    """Run ``page_at(cursor)`` from ``START`` until a page says there is no more."""
    done, cursor = 0, START
    damaged: dict[str, DamagedRow] = {}
    while True:
        page = yield page_at(cursor)
        done += page.done
        for row in page.damaged:
            damaged.setdefault(row.job_id, row)
        if not page.more:
            return OpResult(done, list(damaged.values()))
        cursor = page.cursor
