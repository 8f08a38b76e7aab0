"""Workers that say they are alive: one small hash per worker with a TTL.

A running worker refreshes ``{prefix}:{<queue>}:worker:<id>`` (a HASH with a
TTL of ``REGISTRY_TTL`` at most) from its reporter loop, and keeps its id in
the queue's ``workers`` ZSET scored by when the row expires, so listing never
needs ``KEYS``: it reads the index, trims what expired and reads each row, in
one script call. A worker that stops cleanly removes its row; one killed
with SIGKILL drops off once its TTL passes.

Calls are built here from a ``QueueSettings`` (no I/O), with the operations
that run them.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import msgspec

from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = [
    "LIST_LIMIT",
    "REGISTRY_TTL",
    "WorkerInfo",
    "list_workers",
    "register_worker",
    "unregister_worker",
    "workers",
    "refresh_every",
    "register",
    "unregister",
]

REGISTRY_TTL = 15.0
"""Longest a worker's row outlives its last refresh, in seconds (a shorter
lease ``ttl`` makes it shorter: see ``refresh_every``)."""
LIST_LIMIT = 1000
"""Most workers one listing returns."""


def refresh_every(ttl: float) -> float:
    """Seconds between refreshes for a worker whose leases last ``ttl``: the
    heartbeat's ``ttl / 3``, at most a third of ``REGISTRY_TTL``. The row lives
    three refreshes, so one slow refresh never makes a live worker vanish."""
    return min(ttl / 3, REGISTRY_TTL / 3)


class WorkerInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One registered worker, as its last refresh wrote it. Times are epoch
    seconds on the server's clock."""

    id: str
    host: str
    pid: int
    queue: str
    started: float
    seen: float
    """When the worker last refreshed its row."""
    expires: float
    """When the row goes unless refreshed again (``seen`` + its TTL)."""
    concurrency: int
    done: int
    """Jobs the worker finished (any outcome) since it started."""
    running: int
    """Leases it held at the last refresh (running or prefetched)."""
    listed_at: float
    """The server's clock when this listing was read: what ``up`` and
    ``since_seen`` are measured against. Not the newest ``seen`` of the
    listing: a lone worker would always look just seen, a hung one never late."""

    @property
    def up(self) -> float:
        """Seconds since the worker started, at ``listed_at``."""
        return max(0.0, self.listed_at - self.started)

    @property
    def since_seen(self) -> float:
        """Seconds since its last refresh, at ``listed_at``: a few heartbeats at
        most for a worker that is well; more, and it is hung or cut off."""
        return max(0.0, self.listed_at - self.seen)


def register(
    queue: QueueSettings,
    worker: str,
    *,
    ttl: float,
    concurrency: int,
    done: int,
    running: int,
    serving: str | None = None,
) -> Call[None]:
    """Write (or refresh) ``worker``'s row, to live ``ttl`` seconds. ``serving``:
    what its ``queue`` field says when the worker serves several queues
    (``high,default,low``); None: this queue's name."""
    worker = check_job_id(worker, "worker id")
    ttl_ms = v.seconds_to_ms(ttl, "ttl", minimum_ms=1, maximum=86_400.0)
    return SCRIPTS["register"].call(
        queue.keys,
        _none,
        at={"id": worker},
        id=worker,
        ttl_ms=ttl_ms,
        host=socket.gethostname(),
        pid=os.getpid(),
        queue=queue.name if serving is None else serving,
        concurrency=v.integer(concurrency, "concurrency", 0, v.MAX_CONCURRENCY),
        done=v.integer(done, "done", 0, 2**62),
        running=v.integer(running, "running", 0, 2**62),
    )


def unregister(queue: QueueSettings, worker: str) -> Call[None]:
    """Remove ``worker``'s row now (a clean stop)."""
    worker = check_job_id(worker, "worker id")
    return SCRIPTS["register"].call(
        queue.keys,
        _none,
        at={"id": worker},
        id=worker,
        ttl_ms=0,
        host="",
        pid=0,
        queue=queue.name,
        concurrency=0,
        done=0,
        running=0,
    )


def list_workers(queue: QueueSettings, limit: int = LIST_LIMIT) -> Call[list[WorkerInfo]]:
    """The live workers of the queue, oldest index entry first."""
    limit = v.integer(limit, "limit", 1, LIST_LIMIT)
    return SCRIPTS["workers"].call(queue.keys, _parse_list, limit=limit)


def _none(reply: Any) -> None:
    return None


def _parse_list(reply: list[Any]) -> list[WorkerInfo]:
    listed_at = int(reply[0]) / 1000
    out = []
    for i in range(1, len(reply) - 1, 2):
        flat = [as_text(x) for x in reply[i + 1]]
        row = dict(zip(flat[::2], flat[1::2], strict=True))
        info = _info(as_text(reply[i]), row, listed_at)
        if info is not None:
            out.append(info)
    out.sort(key=lambda w: (w.started, w.id))
    return out


def _info(worker: str, row: dict[str, str], listed_at: float) -> WorkerInfo | None:
    """A row as WorkerInfo; None for one damaged by hand (never breaks a listing)."""
    try:
        seen = int(row["seen"])
        return WorkerInfo(
            id=worker,
            host=row.get("host", ""),
            pid=int(row.get("pid", "0")),
            queue=row.get("queue", ""),
            started=int(row.get("started", seen)) / 1000,
            seen=seen / 1000,
            expires=(seen + int(row.get("ttl_ms", "0"))) / 1000,
            concurrency=int(row.get("concurrency", "0")),
            done=int(row.get("done", "0")),
            running=int(row.get("running", "0")),
            listed_at=listed_at,
        )
    except (KeyError, ValueError):
        return None


def register_worker(
    queue: QueueSettings,
    worker: str,
    *,
    ttl: float,
    concurrency: int = 0,
    done: int = 0,
    running: int = 0,
    serving: str | None = None,
) -> Op[None]:
    """Write or refresh ``worker``'s row (host, pid, counts) for ``ttl`` seconds;
    workers call it with their heartbeat (``leaseq.store.registry``). ``serving``:
    the queues a worker of several queues serves (its row's ``queue``)."""
    yield register(
        queue,
        worker,
        ttl=ttl,
        concurrency=concurrency,
        done=done,
        running=running,
        serving=serving,
    )


def unregister_worker(queue: QueueSettings, worker: str) -> Op[None]:
    """Remove ``worker``'s row now (a clean stop)."""
    yield unregister(queue, worker)


def workers(queue: QueueSettings) -> Op[list[WorkerInfo]]:
    """The workers alive on this queue (rows not expired), oldest first."""
    found: list[WorkerInfo] = yield list_workers(queue)
    return found
