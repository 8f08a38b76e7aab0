"""Pending's ready LIST read as a scored index (docs/keys-and-rows.md#the-ready-list).

Ungrouped pending jobs of priority 0 wait in the LIST ``ready``, not in the
pending ZSET, and run before it. A walk (``find``, the bulk actions) pages
through an index by score, so the list's entries get one too: their place,
meta ``ready_popped`` + their index, which never changes while an entry waits,
moved below every score of the ZSET (``PLACE_BASE`` + place, all under 0).
``lua/ready_page.lua`` reads a page and ``ready_popped`` in one step, so
claims popping the head between two pages move nothing. Entries of jobs
that left without a claim stay in the list until a claim pops them: a walk
keeps only those whose row is still a pending job of the list
(:func:`live_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.store.keys import QueueKeys
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.steps import Call, Command, Op

__all__ = [
    "PLACE_BASE",
    "entries",
    "entries_count",
    "live_rows",
    "page_call",
    "top",
]

PLACE_BASE = -(2**52)
"""The score of place 0 of the ready list: places stay exact integers below 0."""


def live_rows(ids: Sequence[str], listed: Sequence[bool], rows: Sequence[Any]) -> list[Any]:
    """The rows of a page of pending (``listed[i]``: entry i is the ready list's),
    a row blanked (read as a row gone: stepped over) when its entry is the list's
    and its job is no longer one the list holds (pending, ungrouped, priority 0:
    lua/lib/in_ready.lua), or when the page already kept that id (an id made
    again leaves two entries). A row that will not read is kept, to be reported."""
    kept: set[str] = set()
    out: list[Any] = []
    for job_id, in_list, raw in zip(ids, listed, rows, strict=True):
        if job_id in kept or (in_list and not isinstance(raw, Exception) and not _in_ready(raw)):
            out.append({})
        else:
            kept.add(job_id)
            out.append(raw)
    return out


def _in_ready(raw: Any) -> bool:
    if not isinstance(raw, dict) or not raw:
        return False
    wide = isinstance(next(iter(raw)), bytes)

    def get(name: str) -> str | None:
        value = raw.get(name.encode() if wide else name)
        return None if value is None else as_text(value)

    return get("state") == "pending" and get("group") is None and get("priority") in (None, "0")


def page_call(keys: QueueKeys, first: int, n: int) -> Call[tuple[int, int, list[str]]]:
    """ready_popped, the list's length and up to ``n`` ids from place ``first``, in one step."""
    return SCRIPTS["ready_page"].call(
        keys, lambda r: (int(r[0]), int(r[1]), [as_text(i) for i in r[2:]]), first=first, count=n
    )


def _page(keys: QueueKeys, first: int, n: int) -> Op[tuple[int, int, list[str]]]:
    got: tuple[int, int, list[str]] = yield page_call(keys, first, n)
    return got


def top(keys: QueueKeys) -> Op[float | None]:
    """The highest score of pending now, the ZSET's or else the list's last place
    (None: both empty): where a walk's snapshot ends."""
    got = yield Command("zrange", (keys.pending, -1, -1, False, True))
    if got:
        return float(got[0][1])
    popped, n, _ = yield from _page(keys, 0, 0)
    return float(PLACE_BASE + popped + n - 1) if n else None


def entries_count(keys: QueueKeys) -> Op[int]:
    """Entries of pending as ``ls`` pages them by offset: the list's, stale ones too
    (a page may show fewer jobs than it covers), then the set's."""
    listed = int((yield Command("llen", (keys.ready,))))
    return listed + int((yield Command("zcard", (keys.pending,))))


def entries(
    keys: QueueKeys, low: str, skip: int, upto: str, ask: int
) -> Op[list[tuple[str, float]]]:
    """Up to ``ask`` (id, score) entries of pending from score ``low`` (``skip``
    of those at ``low`` passed over) up to ``upto``: the list's, then the ZSET's."""
    out: list[tuple[str, float]] = []
    low_at, end = float(low), float(upto)
    if low_at < 0:
        # Places are unique: an entry at low itself was passed over when skip is 1.
        first = 0 if low_at == float("-inf") else int(low_at) - PLACE_BASE + skip
        last = None if end >= 0 else int(end) - PLACE_BASE
        want = ask if last is None else max(0, min(ask, last - first + 1))
        popped, _, ids = yield from _page(keys, first, want)  # past last: dropped below
        at = PLACE_BASE + max(first, popped)
        out = [(i, float(at + n)) for n, i in enumerate(ids) if end >= 0 or at + n <= end]
        if end < 0 or len(out) == ask:
            return out  # the snapshot ends in the list, or the page is full
        low, skip = "-inf", 0  # the list is done: on to the ZSET, from its start
    rest = yield Command("zrangebyscore", (keys.pending, low, upto, skip, ask - len(out), True))
    return out + [(as_text(m), float(s)) for m, s in rest]
