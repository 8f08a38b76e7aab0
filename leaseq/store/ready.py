"""Pending's ready LIST read as a scored index (docs/keys-and-rows.md#the-ready-list).

Ungrouped pending jobs of priority 0 wait in the LIST ``ready``, not in the
pending ZSET, and run before it. A walk (``find``, the bulk actions) pages
through an index by score, so the list's entries get one too: their place,
meta ``ready_popped`` + their index, which never changes while an entry waits,
moved below every score of the ZSET (``PLACE_BASE`` + place, all under 0).
Entries of jobs that left without a claim stay in the list until a claim pops
them; a walk reads their rows and sees they are no longer pending.
"""

from __future__ import annotations

import math

from leaseq.store.keys import QueueKeys
from leaseq.store.replies import as_text
from leaseq.store.steps import Command, Op

__all__ = ["PLACE_BASE", "count", "entries", "top"]

PLACE_BASE = -(2**52)
"""The score of place 0 of the ready list: places stay exact integers below 0."""

_TRIES = 3
"""Reads of a page of the list while claims move its head, before taking one as it is."""


def top(keys: QueueKeys) -> Op[float | None]:
    """The highest score of pending now, the ZSET's or else the list's last place
    (None: both empty): where a walk's snapshot ends."""
    got = yield Command("zrange", (keys.pending, -1, -1, False, True))
    if got:
        return float(got[0][1])
    popped = yield from _popped(keys)
    n = int((yield Command("llen", (keys.ready,))))
    return float(PLACE_BASE + popped + n - 1) if n else None


def count(keys: QueueKeys) -> Op[int]:
    """Entries of pending a walk covers: the ZSET's, and the list's less its stale ones."""
    in_set = int((yield Command("zcard", (keys.pending,))))
    listed = int((yield Command("llen", (keys.ready,))))
    stale = yield Command("hget", (keys.meta, "ready_stale"))
    return in_set + max(0, listed - int(stale or 0))


def entries(
    keys: QueueKeys, low: str, skip: int, upto: str, ask: int
) -> Op[list[tuple[str, float]]]:
    """Up to ``ask`` (id, score) entries of pending from score ``low`` (``skip``
    of those at ``low`` passed over) up to ``upto``: the list's, then the ZSET's."""
    out: list[tuple[str, float]] = []
    low_at, end = float(low), float(upto)
    if low_at < 0:
        for _ in range(_TRIES):
            popped = yield from _popped(keys)
            first = 0 if math.isinf(low_at) else int(low_at) - PLACE_BASE - popped
            first = first + skip if first >= 0 else 0  # passed-over entries were popped since
            want = ask if end >= 0 else min(ask, int(end) - PLACE_BASE - popped - first + 1)
            ids = []
            if want > 0:
                ids = yield Command("lrange", (keys.ready, first, first + want - 1))
            if (yield from _popped(keys)) == popped:
                break
        at = PLACE_BASE + popped + first
        out = [(as_text(i), float(at + n)) for n, i in enumerate(ids)]
        if end < 0 or len(out) == ask:
            return out  # the snapshot ends in the list, or the page is full
        low, skip = "-inf", 0  # the list is done: on to the ZSET, from its start
    rest = yield Command("zrangebyscore", (keys.pending, low, upto, skip, ask - len(out), True))
    return out + [(as_text(m), float(s)) for m, s in rest]


def _popped(keys: QueueKeys) -> Op[int]:
    return int((yield Command("hget", (keys.meta, "ready_popped"))) or 0)
