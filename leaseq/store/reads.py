"""Reading a queue: the stats call (``lua/stats.lua``), one job's row, and a page
of an index; rows decoded into Jobs (``leaseq.store.replies``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.errors import DamagedKey, DamagedRow
from leaseq.store import ready
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.replies import as_text
from leaseq.store.replies import parse_job as _parse_job
from leaseq.store.replies import parse_page as _parse_page
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings, parse_state
from leaseq.store.steps import Call, Command, Op, Rows
from leaseq.types import Job, State, Stats

__all__ = ["get", "ls", "parse_job", "parse_page", "stats", "stats_call"]

_HIDDEN = (
    "seq",
    "clock",
    "limit_held",
    "incarnation",
    "shards",
    "gseq",
    "gturn",
    "wsweep",
    "ready_popped",
    "ready_stale",
)
"""Integer fields of the meta hash that are the scripts' bookkeeping (sequences, the
clock floor, ...), not totals: left out of ``Stats.totals``."""

_LIMITS = ("concurrency", "rate", "per_ms", "recent_claims", "group_concurrency", "cost_per_ms")
"""The stats reply's limit fields: -1 where the queue has no such limit."""


def stats_call(queue: QueueSettings, soon: float) -> Call[Stats]:
    soon_ms = v.seconds_to_ms(soon, "soon", minimum_ms=0, maximum=v.MAX_TTL)

    def parse(r: list[Any]) -> Stats:
        got = {as_text(r[0][i]): float(r[0][i + 1]) for i in range(0, len(r[0]), 2)}
        meta = r[1]
        now, oldest, due = (int(got[f]) for f in ("now_ms", "oldest_pending_at", "next_due_at"))
        totals = {
            as_text(meta[i]): _counter(queue.keys.meta, meta[i], meta[i + 1])
            for i in range(0, len(meta) - 1, 2)
            if as_text(meta[i]) != "events"  # the stream's switch ('off'), not a counter
        }
        for hidden in _HIDDEN:
            totals.pop(hidden, None)
        paused_ms = totals.pop("paused", None)  # the flag of pause.lua, not a counter
        count = {name: int(value) for name, value in got.items()}  # all but the costs
        limit = {name: None if count[name] < 0 else count[name] for name in _LIMITS}
        per, cost_per = limit["per_ms"], limit["cost_per_ms"]
        return Stats(
            queue=queue.name,
            **{state.value: count[state.value] for state in State},
            expired=count["expired"],
            expiring_soon=count["expiring_soon"],
            overdue=count["overdue"],
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
            groups_ready=count["groups_ready"],
            groups_held=count["groups_held"],
            cost_limit=None if cost_per is None else got["cost_rate"],
            cost_per=None if cost_per is None else cost_per / 1000,
            recent_cost=None if cost_per is None else got["recent_cost"],
        )

    return SCRIPTS["stats"].call(queue.keys, parse, soon_ms=soon_ms)


def stats(queue: QueueSettings, soon: float = 10.0) -> Op[Stats]:
    """Counts per state and more, in one consistent read."""
    found: Stats = yield stats_call(queue, soon)
    return found


def parse_page(
    queue: QueueSettings,
    names: Sequence[str],
    rows: Sequence[Any],
    damaged: list[DamagedRow] | None,
) -> list[Job]:
    """The Jobs of one ``ls`` page (see ``replies.parse_page``)."""
    return _parse_page(queue.codec, queue.name, names, rows, damaged)


def parse_job(queue: QueueSettings, job_id: str, raw: dict[Any, Any]) -> Job | None:
    """A job row from HGETALL as a Job; raises DamagedRow naming the field."""
    return _parse_job(queue.codec, queue.name, job_id, raw)


def get(queue: QueueSettings, job_id: str) -> Op[Job | None]:
    """The job row, typed, or None. Raises DamagedRow for a row that will not read."""
    job_id = check_job_id(job_id)
    raw = yield Command("hgetall", (queue.keys.job(job_id),))
    return parse_job(queue, job_id, raw)


def ls(
    queue: QueueSettings,
    state: State | str,
    *,
    offset: int = 0,
    limit: int = 100,
    damaged: list[DamagedRow] | None = None,
) -> Op[list[Job]]:
    """Jobs in ``state``, in index order (pending: next to run first).

    A row damaged by hand raises DamagedRow, unless ``damaged`` is a list:
    then it is appended there and the rest of the page is still returned.
    """
    st = parse_state(state)
    offset = max(0, int(offset))
    if st is State.PENDING:
        names, listed = yield from _pending_ids(queue, offset, limit)
    else:
        ids = yield Command("zrange", (queue.keys.index(st.value), offset, offset + limit - 1))
        names, listed = [as_text(i) for i in ids], 0
    # Every row is in the queue's slot: one pipeline, one node, even on a cluster.
    rows = (yield Rows([queue.keys.job(job_id) for job_id in names])) if names else []
    if st is State.PENDING:
        # An entry of the ready list whose job left without a claim stays there
        # until a claim pops it (docs/keys-and-rows.md#the-ready-list): not shown;
        # nor twice an id made again after its row went (two entries).
        rows = ready.live_rows(names, [i < listed for i in range(len(names))], rows)
    return parse_page(queue, names, rows, damaged)


def _pending_ids(queue: QueueSettings, offset: int, limit: int) -> Op[tuple[list[str], int]]:
    """Entries ``offset`` .. ``offset + limit - 1`` of pending: the ready list's
    (priority 0, the first to run), then the pending set's; and how many came
    from the list."""
    keys = queue.keys
    ids = [as_text(i) for i in (yield Command("lrange", (keys.ready, offset, offset + limit - 1)))]
    listed = len(ids)
    if listed < limit:
        start = max(0, offset - int((yield Command("llen", (keys.ready,)))))
        more = yield Command("zrange", (keys.pending, start, start + limit - listed - 1))
        ids += [as_text(i) for i in more]
    return ids, listed


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
