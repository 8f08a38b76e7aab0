"""The dashboard's pages across queues: the overview, workers, schedules, limits
and groups, events, the server; ``/metrics``, ``/api/scale/<queue>`` and the
``/live`` push stream.
Each view is ``view(site, request)``, made an endpoint by ``Site.endpoint``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from leaseq.errors import InvalidArgument, LeaseqError
from leaseq.observe.endpoint import scale_doc
from leaseq.observe.humanize import span
from leaseq.transport import client as _redis
from leaseq.web import charts
from leaseq.web.formatting import (
    PAGE_SIZE,
    PAGE_SIZES,
    STATES,
    base_path,
    fmt_time,
    held_job,
    int_param,
    preview,
    queue_row,
    server_facts,
)
from leaseq.web.site import Site

OVERVIEW_SORTS: dict[str, tuple[str, Any]] = {
    "name": ("name", lambda s: s.queue),
    "dead": ("most dead", lambda s: (-s.dead, s.queue)),
    "oldest": ("oldest pending", lambda s: (-(s.oldest_pending_age or -1.0), s.queue)),
    "pending": ("most pending", lambda s: (-s.pending, s.queue)),
    "active": ("most active", lambda s: (-s.active, s.queue)),
}
"""How the overview can order the queues: key -> (label, sort key of a Stats)."""
LIVE_PING = 15.0
"""Seconds between keep-alive comments on a quiet /live stream."""
EVENTS_SHOWN = 200
"""Transitions the events page lists (newest first)."""
QUEUE_PICKER = 500
"""Most queues offered in the events page's drop-down (more: type the name)."""
log = logging.getLogger("leaseq.web")


def overview(site: Site, request: Request) -> Response:
    stats, broken = site.source.overview_checked()
    now = site.now(stats)
    params = request.query_params
    needle = params.get("filter", "").strip()
    sort = params.get("sort", "name")
    sort = sort if sort in OVERVIEW_SORTS else "name"
    chosen = [s for s in stats if needle in s.queue] if needle else stats
    chosen = sorted(chosen, key=OVERVIEW_SORTS[sort][1])
    size = int_param(params.get("size"), PAGE_SIZE)
    size = size if size in PAGE_SIZES else PAGE_SIZE
    pages = max(1, math.ceil(len(chosen) / size))
    page = min(max(1, int_param(params.get("page"), 1)), pages)
    shown = chosen[(page - 1) * size : page * size]
    # Workers and charts: of every queue while they fit on one page, else of
    # the queues shown (the page says so): 5,000 queues' histories are
    # seconds of reading, their counts are not.
    paged = len(stats) > size
    only = [s.queue for s in shown] if paged else None
    online = site.source.workers(only)
    rows = [queue_row(s, now) | {"workers": len(online.get(s.queue, []))} for s in shown]
    totals = {st: sum(getattr(s, st) for s in chosen) for st in STATES}
    minutes, tens = charts.sum_histories(site.source.histories(only))
    return site.render(
        request,
        "overview.html",
        rows=rows,
        queues=len(stats),
        matching=len(chosen),
        totals=totals,
        filter=needle,
        sort=sort,
        sorts={k: label for k, (label, _) in OVERVIEW_SORTS.items()},
        page=page,
        pages=pages,
        size=size,
        paged=paged,
        broken=broken,
        now=fmt_time(now, now),
        workers_online=sum(len(ws) for ws in online.values()),
        hour_chart=Markup(charts.chart(minutes, "jobs per minute, last hour", "chart-hour")),
        day_chart=Markup(charts.chart(tens, "jobs per 10 minutes, last day", "chart-day")),
        series=charts.SERIES,
        hour={f: sum(b.get(f) for b in minutes) for f, _, _ in charts.SERIES},
        day={f: sum(b.get(f) for b in tens) for f, _, _ in charts.SERIES},
    )


def workers(site: Site, request: Request) -> Response:
    online = site.source.workers()
    now = site.now([])
    held = site.source.current_jobs([name for name, ws in online.items() if ws])
    rows = [
        {
            "queue": name,
            "serves": w.queue,  # all the queues of a worker of several
            "id": w.id,
            "host": w.host,
            "pid": w.pid,
            "concurrency": w.concurrency,
            "running": w.running,
            "done": w.done,
            # On the clock the registry was read on, as `leaseq workers` measures them.
            "started": fmt_time(w.started, w.listed_at),
            "seen": fmt_time(w.seen, w.listed_at),
            "expires": fmt_time(w.expires, w.listed_at),
            "jobs": [held_job(j, now) for j in held.get(w.id, []) if j.queue == name],
        }
        for name, ws in online.items()
        for w in ws
    ]
    return site.render(request, "workers.html", rows=rows, now=fmt_time(now, now))


def schedules(site: Site, request: Request) -> Response:
    found = site.source.each_queue(lambda t: t._ops.schedules())
    now = site.now([])
    rows = [
        {
            "queue": name,
            "name": s.name,
            "rule": f"cron {s.cron}" + (f" ({s.tz})" if s.tz else "")
            if s.cron
            else f"every {span(s.every or 0)}",
            "kind": s.kind or "",  # what a handler dict picks by; not a payload field
            "next": fmt_time(s.next_due, now),
            "last": fmt_time(s.last_fired, now),
            "fired": s.fired,
            "error": s.error or "",
            "payload": preview(s.payload),
        }
        for name, got in found.items()
        if isinstance(got, list)
        for s in got
    ]
    rows.sort(key=lambda r: (r["next"]["raw"] == "", r["next"]["raw"].zfill(20), r["queue"]))
    return site.render(
        request,
        "schedules.html",
        rows=rows,
        now=fmt_time(now, now),
        here=f"{base_path(request)}/schedules",
    )


def limits(site: Site, request: Request) -> Response:
    found = site.source.each_queue(lambda t: t._ops.limits())
    rows = []
    for name, lim in found.items():
        if isinstance(lim, Exception):
            continue
        if lim.limited or lim.groups_ready or lim.groups_active or lim.groups_held:
            rows.append({"queue": name, "limits": lim})
    chosen = request.query_params.get("queue", "")
    groups = site.source.groups(site.source.queue(chosen)) if chosen else []
    return site.render(request, "limits.html", rows=rows, chosen=chosen, groups=groups)


def events(site: Site, request: Request) -> Response:
    params = request.query_params
    names = sorted(site.source.names())
    # No queue asked for: the one where something happened last, not the
    # alphabetically first (often idle).
    chosen = params.get("queue", "") or site.source.liveliest() or (names[0] if names else "")
    job_id = params.get("job", "").strip()
    state = params.get("state", "")
    state = state if state in STATES or state == "deleted" else ""
    kind = params.get("kind", "").strip()
    events: list[Any] = []
    kinds: dict[str, str] = {}
    enabled = True
    if chosen:
        target = site.source.queue(chosen)
        events = site.source.newest_events(target, EVENTS_SHOWN, job_id, state, kind)
        enabled = all(p.event_settings().enabled for p in site.source.parts(target))
        kinds = site.source.kinds(target, (e.job_id for e in events))
    now = site.now([])
    rows = [
        {
            "at": fmt_time(e.at, now),
            "from": "new" if e.from_state is None else e.from_state.value,
            "to": "deleted" if e.to_state is None else e.to_state.value,
            "attempt": e.attempt,
            "job": e.job_id,
            "kind": kinds.get(e.job_id, ""),
        }
        for e in events
    ]
    return site.render(
        request,
        "events.html",
        names=names if len(names) <= QUEUE_PICKER else [],
        chosen=chosen,
        live_queue=chosen,
        job=job_id,
        state=state,
        kind=kind,
        rows=rows,
        enabled=enabled,
        limit=EVENTS_SHOWN,
    )


def server(site: Site, request: Request) -> Response:
    try:
        facts, refused = server_facts(site.source.server()), ""
    except (LeaseqError, ValueError, TypeError) as exc:  # INFO forbidden (ACL), or odd
        facts, refused = None, _redis.redact(str(exc))
    return site.render(request, "server.html", facts=facts, refused=refused)


def metrics(site: Site, request: Request) -> Response:
    try:
        from leaseq.observe.metrics import CONTENT_TYPE, render
    except ImportError:
        return Response(
            "prometheus-client is missing: pip install 'leaseq[web]'\n",
            status_code=501,
            media_type="text/plain",
        )
    stats, broken = site.source.overview_checked()
    for name, why in broken.items():
        log.warning("queue=%s left out of /metrics: %s", name, why)
    return Response(render(stats), media_type=CONTENT_TYPE)


def scale(site: Site, request: Request) -> Response:
    """``/api/scale/<queue>``: what an autoscaler reads of one queue, as JSON (KEDA's
    ``metrics-api`` scaler, behind the dashboard's auth like every page: a
    TriggerAuthentication gives it the token; docs/deploy.md). It answers while
    no worker runs, so a queue can scale from zero."""
    try:
        target = site.source.queue(request.path_params["name"])
    except InvalidArgument as exc:  # a scaler reads JSON, not the error page
        return JSONResponse({"error": str(exc)}, status_code=404)
    return JSONResponse(scale_doc(site.source.stats(target)))


async def live(site: Site, request: Request) -> Response:
    """Server-Sent Events for one page: ``hello`` once, then ``moved`` (the
    queues with new transitions, as JSON) each time the event stream moves;
    ``poll`` (and the end) when the page's queue records no events."""
    from starlette.concurrency import run_in_threadpool

    queue = request.query_params.get("queue", "")
    if queue:
        target = await run_in_threadpool(site.source.queue, queue)
        parts = site.source.parts(target)
        on = await run_in_threadpool(lambda: all(p.event_settings().enabled for p in parts))
        if not on:
            return Response("event: poll\ndata: events are off\n\n", media_type="text/event-stream")
    token, inbox = site.hub.subscribe(queue)

    async def events() -> AsyncIterator[str]:
        try:
            yield "retry: 3000\nevent: hello\ndata: push\n\n"
            while True:
                try:
                    moved = await asyncio.wait_for(inbox.get(), timeout=LIVE_PING)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield ": ping\n\n"
                    continue
                yield f"event: moved\ndata: {json.dumps(sorted(moved))}\n\n"
        finally:
            site.hub.unsubscribe(token)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
