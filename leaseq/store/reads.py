"""Reading a queue: the stats call, and job rows decoded into Jobs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from leaseq.errors import (
    DamagedKey,
    DamagedRow,
    InvalidArgument,
)
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.replies import as_text, parse_job, parse_page
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call
from leaseq.types import Job, State, Stats

__all__ = ["ReadCalls", "done_ids", "wait_names"]

_HIDDEN = ("seq", "clock", "limit_held", "incarnation", "shards", "gseq", "gturn", "wsweep")
"""Integer fields of the meta hash that are the scripts' bookkeeping (sequences, the
clock floor, ...), not totals: left out of ``Stats.totals``."""

_LIMITS = ("concurrency", "rate", "per_ms", "recent_claims", "group_concurrency")
"""The stats reply's limit fields: -1 where the queue has no such limit."""


class ReadCalls(QueueSettings):
    """The calls that read a queue, and the decoding of its rows."""

    def stats(self, soon: float) -> Call[Stats]:
        soon_ms = v.seconds_to_ms(soon, "soon", minimum_ms=0, maximum=v.MAX_TTL)

        def parse(r: list[Any]) -> Stats:
            got = {as_text(r[0][i]): int(r[0][i + 1]) for i in range(0, len(r[0]), 2)}
            meta = r[1]
            now, oldest, due = got["now_ms"], got["oldest_pending_at"], got["next_due_at"]
            totals = {
                as_text(meta[i]): _counter(self.keys.meta, meta[i], meta[i + 1])
                for i in range(0, len(meta) - 1, 2)
                if as_text(meta[i]) != "events"  # the stream's switch ('off'), not a counter
            }
            for hidden in _HIDDEN:
                totals.pop(hidden, None)
            paused_ms = totals.pop("paused", None)  # the flag of pause.lua, not a counter
            limit = {name: None if got[name] < 0 else got[name] for name in _LIMITS}
            per = limit["per_ms"]
            return Stats(
                queue=self.name,
                **{state.value: got[state.value] for state in State},
                expired=got["expired"],
                expiring_soon=got["expiring_soon"],
                oldest_pending_age=None if oldest < 0 else max(0, now - oldest) / 1000,
                next_due_in=None if due < 0 else max(0, due - now) / 1000,
                server_time=now / 1000,
                totals=totals,
                paused=paused_ms is not None,
                paused_at=None if paused_ms is None else paused_ms / 1000,
                concurrency_limit=limit["concurrency"],
                rate_limit=limit["rate"],
                rate_per=None if per is None else per / 1000,
                recent_claims=limit["recent_claims"],
                group_concurrency_limit=limit["group_concurrency"],
                groups_ready=got["groups_ready"],
                groups_held=got["groups_held"],
            )

        return SCRIPTS["stats"].call(self.keys, parse, soon_ms=soon_ms)

    # -- reading rows -------------------------------------------------------

    def parse_page(
        self, names: Sequence[str], rows: Sequence[Any], damaged: list[DamagedRow] | None
    ) -> list[Job]:
        """The Jobs of one ``ls`` page (see ``_replies.parse_page``)."""
        return parse_page(self.codec, self.name, names, rows, damaged)

    def parse_job(self, job_id: str, raw: dict[Any, Any]) -> Job | None:
        """A job row from HGETALL as a Job; raises DamagedRow naming the field."""
        return parse_job(self.codec, self.name, job_id, raw)


def _counter(meta: str, field: Any, value: Any) -> int:
    """A meta hash counter as an int; DamagedKey naming it when it was set by hand
    to something else (``stats`` would otherwise fail with a bare ValueError)."""
    try:
        return int(value)
    except ValueError:
        raise DamagedKey(
            f"{meta} field {as_text(field)!r} is {as_text(value)!r}, not an integer "
            "(set it right with redis-cli HSET, or HDEL it)"
        ) from None


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
