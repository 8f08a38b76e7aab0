"""What the dashboard's pages show, as text and rows for the templates: times as
"3 min ago" with the exact time, a queue's counts and limits, a job's row, its
fields in order and its place in a workflow, the server's facts. No I/O but the
reads ``graph`` makes through the queue it is given.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from leaseq.errors import LeaseqError
from leaseq.observe.humanize import span, utc
from leaseq.types import Job, State, Stats

STATES = [s.value for s in State]
PAGE_SIZE = 50
PAGE_SIZES = (20, 50, 100, 200)
TIME_FIELDS = ("enqueued_at", "run_at", "claimed_at", "lease_until", "finished_at")
NAV = (
    ("/", "Queues"),
    ("/workers", "Workers"),
    ("/schedules", "Schedules"),
    ("/limits", "Limits & groups"),
    ("/events", "Events"),
    ("/server", "Server"),
)
"""The navigation bar of every page: path under the app's root, label."""
EVICTING = (
    "allkeys-lru allkeys-lfu allkeys-random volatile-lru volatile-lfu volatile-random volatile-ttl"
)
"""maxmemory-policy values under which Redis may delete keys: job rows among them
(the volatile ones only keys with a TTL, which leaseq's finished rows can have)."""


def section(path: str) -> str:
    """The navigation entry a path belongs to (a queue and its jobs: Queues)."""
    for href, _ in NAV[1:]:
        if path == href or path.startswith(href + "/"):
            return href
    return "/"


BASE_KEY = "leaseq.base"
"""The scope key ``MountedAt`` keeps the app's own mount path in."""


class MountedAt:
    """Middleware: note where the app is mounted before routing, as a request
    inside a mount of its own (``/static``) sees that mount in ``root_path``: a
    404 there drew every link under ``/static/``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault(BASE_KEY, scope.get("root_path", ""))
        await self.app(scope, receive, send)


def base_path(request: Request) -> str:
    """Where this app is mounted ('' at the root)."""
    return str(request.scope.get(BASE_KEY, request.scope.get("root_path", ""))).rstrip("/")


def quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def int_param(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def fmt_time(t: float | None, now: float, lease: bool = False) -> dict[str, str]:
    """``{"text": "3 min ago", "iso": "2026-...Z", "raw": "1767225600000"}``."""
    if t is None:
        return {"text": "", "iso": "", "raw": ""}
    stamp = utc(t)  # None for a time damaged by hand past what a datetime holds
    iso = "out of range" if stamp is None else stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    if lease:
        text = f"expires in {span(t - now)}" if t >= now else f"expired {span(now - t)} ago"
    else:
        text = f"in {span(t - now)}" if t > now else f"{span(now - t)} ago"
    return {"text": text, "iso": iso, "raw": str(round(t * 1000))}


def queue_row(s: Stats, now: float) -> dict[str, Any]:
    return {
        "name": s.queue,
        "counts": {st: getattr(s, st) for st in STATES},
        "paused": s.paused,
        "paused_at": fmt_time(s.paused_at, now),
        "expired": s.expired,
        "expiring_soon": s.expiring_soon,
        "oldest": "" if s.oldest_pending_age is None else span(s.oldest_pending_age),
        "oldest_seconds": s.oldest_pending_age,
        "next_due": "" if s.next_due_in is None else f"in {span(s.next_due_in)}",
        "totals": s.totals,
        "limits": limits_text(s),
    }


def limits_text(s: Stats) -> str:
    """The global and group limits and how close the queue is to them ('' if none)."""
    parts = []
    if s.concurrency_limit is not None:
        parts.append(f"concurrency {s.active}/{s.concurrency_limit} active")
    if s.rate_limit is not None and s.rate_per is not None:
        parts.append(f"rate {s.recent_claims or 0}/{s.rate_limit} in {s.rate_per:g} s")
    if s.cost_limit is not None and s.cost_per is not None:
        parts.append(f"cost {s.recent_cost or 0:g}/{s.cost_limit:g} in {s.cost_per:g} s")
    if s.group_concurrency_limit is not None:
        parts.append(
            f"group concurrency {s.group_concurrency_limit}: {s.groups_ready} groups ready, "
            f"{s.groups_held} held at the limit"
        )
    return " · ".join(parts)


def group_limits_text(limits: Any) -> str:
    """The per-group rate and the groups with limits of their own ('' if none)."""
    if limits is None:
        return ""
    parts = []
    if limits.group_rate is not None:
        parts.append(f"group rate {limits.group_rate} per {limits.group_per:g} s")
    if limits.group_cost_rate is not None:
        parts.append(f"group cost {limits.group_cost_rate:g} per {limits.group_cost_per:g} s")
    for name, own in limits.groups.items():
        parts.append(f"group {name}: {own.describe()}")
    return " · ".join(parts)


def preview(value: Any, limit: int = 80) -> str:
    if value is None:
        return ""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pretty(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def progress(value: Any) -> dict[str, Any] | None:
    """A handler's progress report as a bar: a fraction 0..1, a percentage, or
    ``{"done": d, "total": t}`` / ``{"percent": p}``; None when it is none of these
    (the value is shown as JSON instead)."""
    pct: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        pct = value * 100 if 0 <= value <= 1 else value
    elif isinstance(value, dict):
        done, total = value.get("done"), value.get("total")
        if isinstance(done, (int, float)) and isinstance(total, (int, float)) and total > 0:
            pct = done / total * 100
        elif isinstance(value.get("percent"), (int, float)):
            pct = float(value["percent"])
    if pct is None or not math.isfinite(pct):
        return None
    pct = max(0.0, min(100.0, pct))
    return {"pct": round(pct, 1), "text": f"{pct:.0f}%"}


def held_job(job: Job, now: float) -> dict[str, Any]:
    """An active job as the workers page shows it under its worker."""
    return {
        "id": job.id,
        "queue": job.queue,
        "kind": job.kind or "",
        "age": fmt_time(job.claimed_at, now),
        "progress": progress(job.progress),
        "progress_json": "" if job.progress is None else preview(job.progress, 80),
    }


def server_facts(info: dict[str, Any]) -> dict[str, Any]:
    """The server page's facts from INFO, with the eviction warning."""
    used = int(info.get("used_memory", 0) or 0)
    limit = int(info.get("maxmemory", 0) or 0)
    policy = str(info.get("maxmemory_policy", "unknown"))
    aof = str(info.get("aof_enabled", "0")) == "1"
    last_save = info.get("rdb_last_save_time")
    return {
        "version": info.get("redis_version", "?"),
        "mode": info.get("redis_mode", "standalone"),
        "uptime": span(float(info.get("uptime_in_seconds", 0) or 0)),
        "used": bytes_text(used),
        "peak": bytes_text(int(info.get("used_memory_peak", 0) or 0)),
        "limit": bytes_text(limit) if limit else "no limit (maxmemory 0)",
        "used_pct": round(used / limit * 100, 1) if limit else None,
        "policy": policy,
        "evicts": policy in EVICTING.split(),
        "clients": info.get("connected_clients", "?"),
        "blocked": info.get("blocked_clients", 0),
        "ops": info.get("instantaneous_ops_per_sec", "?"),
        "aof": aof,
        "rdb_changes": info.get("rdb_changes_since_last_save", "?"),
        "rdb_last_save": fmt_time(float(last_save), float(last_save))["iso"]
        if last_save
        else "never",
        "rdb_status": info.get("rdb_last_bgsave_status", "?"),
        "role": info.get("role", "?"),
        "replicas": info.get("connected_slaves", 0),
        "key_count": sum(
            int(v.get("keys", 0))
            for k, v in info.items()
            if k.startswith("db") and isinstance(v, dict)
        ),
    }


def bytes_text(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def job_row(job: Job, now: float) -> dict[str, Any]:
    error = (job.last_error or "").strip()
    return {
        "id": job.id,
        "state": job.state.value,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "parents_left": job.parents_left,
        "worker": job.worker or "",
        "error": error.splitlines()[0] if error else "",
        "last_error": job.last_error or "",
        "kind": job.kind or "",
        "group": job.group or "",
        "wait_key": job.wait_key or "",
        "progress": progress(job.progress),
        "progress_json": "" if job.progress is None else preview(job.progress, 80),
        "payload": preview(job.payload),
        "result": preview(job.result),
        "times": {f: fmt_time(getattr(job, f), now, lease=f == "lease_until") for f in TIME_FIELDS},
    }


FIELD_ORDER = [
    "state",
    "attempts",
    "max_attempts",
    "priority",
    "group",
    *TIME_FIELDS,
    "worker",
    "last_error",
]


GRAPH_SHOWN = 50
"""Most parents, and most children, a job page lists (with their states)."""


def graph(target: Any, job: Job) -> dict[str, Any] | None:
    """A job's place in its workflow, for the job page: its parents and the
    children still waiting for it, each with its state (None: no workflow)."""
    kids = [] if job.state.finished else target.children(job.id)
    if not job.depends_on and not kids:
        return None

    def linked(ids: Sequence[str]) -> list[dict[str, str]]:
        rows = []
        for i in ids[:GRAPH_SHOWN]:
            try:
                found = target.get(i)
                state = found.state.value if found else "gone"
            except LeaseqError:  # a relative damaged by hand: the page still shows
                state = "damaged"
            rows.append({"id": i, "state": state})
        return rows

    return {
        "parents": linked(job.depends_on),
        "more_parents": max(0, len(job.depends_on) - GRAPH_SHOWN),
        "children": linked(kids),
        "more_children": max(0, len(kids) - GRAPH_SHOWN),
        "left": job.parents_left,
        "policy": job.on_parent_failure,
        "pinned": job.children,
    }


def field_order(name: str) -> tuple[int, str]:
    return (FIELD_ORDER.index(name) if name in FIELD_ORDER else len(FIELD_ORDER), name)
