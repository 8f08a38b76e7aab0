"""Per-minute counts that survive restarts, kept in Redis with bounded retention.

The scripts that bump a queue's meta counters (enqueue, tick, complete, fail,
claim and reap, through ``lua/lib/bump_counter.lua``) add the same amount,
in the same call, to two bucket HASHes named for the server-clock time:
``{prefix}:{<queue>}:history:m:<minute>`` (kept 61 minutes) and
``...:history:t:<ten-minute>`` (kept a day and ten minutes). Each bucket
expires by itself, so retention costs nothing to enforce. ``read`` builds
the one script call that returns the last hour by minute and the last day by
ten minutes. No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = ["FIELDS", "HOUR", "TEN_MINUTES", "Bucket", "History", "history", "merge", "read"]

FIELDS = ("enqueued", "succeeded", "failed", "dead", "expired")
"""The counts each bucket may hold (a field appears once it is non-zero)."""
HOUR = 60
"""Minute buckets returned: the current minute and the 59 before it."""
TEN_MINUTES = 144
"""Ten-minute buckets returned: the last 24 hours."""


class Bucket(msgspec.Struct, frozen=True, kw_only=True):
    """Counts of one interval; ``start`` is epoch seconds on the server clock."""

    start: float
    seconds: float
    counts: dict[str, int]

    def get(self, field: str) -> int:
        return self.counts.get(field, 0)


class History(msgspec.Struct, frozen=True, kw_only=True):
    """The last hour by minute and the last day by ten minutes, oldest first
    (the last bucket of each is the one still filling)."""

    queue: str
    server_time: float
    minutes: list[Bucket]
    tens: list[Bucket]


def read(queue: QueueSettings) -> Call[History]:
    """The call that reads the queue's history buckets."""
    return SCRIPTS["history"].call(
        queue.keys, lambda r: _parse(queue.name, r), minutes=HOUR, tens=TEN_MINUTES
    )


def _counts(flat: Any) -> dict[str, int]:
    items = [as_text(x) for x in flat]
    out: dict[str, int] = {}
    for key, value in zip(items[::2], items[1::2], strict=True):
        try:
            out[key] = int(value)
        except ValueError:
            continue  # edited by hand: that one field is left out
    return out


def _parse(name: str, reply: list[Any]) -> History:
    now = int(reply[0]) / 1000
    first = int(reply[1])
    minutes = [
        Bucket(start=(first + i) * 60.0, seconds=60.0, counts=_counts(reply[2 + i]))
        for i in range(HOUR)
    ]
    at = 2 + HOUR
    first = int(reply[at])
    tens = [
        Bucket(start=(first + i) * 600.0, seconds=600.0, counts=_counts(reply[at + 1 + i]))
        for i in range(TEN_MINUTES)
    ]
    return History(queue=name, server_time=now, minutes=minutes, tens=tens)


def merge(name: str, parts: Sequence[History]) -> History:
    """One History for a sharded queue: each bucket summed over the shards
    (aligned on the first shard's buckets; shards share a server clock)."""

    def add(buckets: Sequence[Sequence[Bucket]]) -> list[Bucket]:
        out = []
        for same in zip(*buckets, strict=True):
            total: dict[str, int] = {}
            for b in same:
                for key, value in b.counts.items():
                    total[key] = total.get(key, 0) + value
            out.append(Bucket(start=same[0].start, seconds=same[0].seconds, counts=total))
        return out

    return History(
        queue=name,
        server_time=max(p.server_time for p in parts),
        minutes=add([p.minutes for p in parts]),
        tens=add([p.tens for p in parts]),
    )


def history(queue: QueueSettings) -> Op[History]:
    """Counts (enqueued, succeeded, failed, dead, expired) per minute over the
    last hour and per ten minutes over the last day, kept in Redis by the
    scripts that bump the counters (``leaseq.store.history``)."""
    found: History = yield read(queue)
    return found
