"""``create_app``: the dashboard as a Starlette ASGI app, mountable at any path.

Pages are rendered on the server (Jinja2) from the public Queue API: the
overview from ``stats``, a state's list a page at a time through its index
(``ls``: ZRANGE by rank, never a scan of rows), a job from ``get`` and its
stored row. One small script (``static/leaseq.js``) refreshes the live part
of a page by fetching it again with ``?partial=1``. Actions are POSTs that
carry a CSRF token, are refused unless the app was made with
``allow_actions=True``, and answer with a confirmation page first when they
destroy or change many jobs.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
import math
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from leaseq.errors import DamagedKey, InvalidArgument, LeaseqError, ServerUnavailable
from leaseq.observe.humanize import span, utc
from leaseq.observe.state_style import stylesheet
from leaseq.queue import connect
from leaseq.store.events import job_history
from leaseq.store.keys import check_job_id
from leaseq.transport import client as _redis
from leaseq.types import TRANSITIONS, Job, State, Stats
from leaseq.web import charts
from leaseq.web._live import Hub
from leaseq.web._security import CSRF_COOKIE, TOKEN_COOKIE, Gate, csrf_ok, csrf_token, parse_auth
from leaseq.web._source import SCAN_LIMIT, Source, Target

__all__ = ["create_app"]

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50
PAGE_SIZES = (20, 50, 100, 200)
REFRESH_MS = 2000
FLASH_COOKIE = "leaseq_flash"
STATES = [s.value for s in State]
CANCELLABLE = [s.value for s in State if State.CANCELLED in TRANSITIONS[s]]
"""The states whose jobs get a Cancel button (those ``cancel`` moves to cancelled)."""
STATES_CSS = stylesheet()
"""``static/states.css``: each state's colour, from ``leaseq.observe.state_style``."""
TIME_FIELDS = ("enqueued_at", "run_at", "claimed_at", "lease_until", "finished_at")
OVERVIEW_SORTS: dict[str, tuple[str, Any]] = {
    "name": ("name", lambda s: s.queue),
    "dead": ("most dead", lambda s: (-s.dead, s.queue)),
    "oldest": ("oldest pending", lambda s: (-(s.oldest_pending_age or -1.0), s.queue)),
    "pending": ("most pending", lambda s: (-s.pending, s.queue)),
    "active": ("most active", lambda s: (-s.active, s.queue)),
}
"""How the overview can order the queues: key -> (label, sort key of a Stats)."""
NAV = (
    ("/", "Queues"),
    ("/workers", "Workers"),
    ("/schedules", "Schedules"),
    ("/limits", "Limits & groups"),
    ("/events", "Events"),
    ("/server", "Server"),
)
"""The navigation bar of every page: path under the app's root, label."""
LIVE_PING = 15.0
"""Seconds between keep-alive comments on a quiet /live stream."""
EVENTS_SHOWN = 200
"""Transitions the events page lists (newest first)."""
QUEUE_PICKER = 500
"""Most queues offered in the events page's drop-down (more: type the name)."""
EVICTING = (
    "allkeys-lru allkeys-lfu allkeys-random volatile-lru volatile-lfu volatile-random volatile-ttl"
)
"""maxmemory-policy values under which Redis may delete keys: job rows among them
(the volatile ones only keys with a TTL, which leaseq's finished rows can have)."""
log = logging.getLogger("leaseq.web")


def create_app(
    redis: Any,
    *,
    prefix: str = "leaseq",
    allow_actions: bool = False,
    auth: str | None = None,
    title: str | None = None,
    refresh: float = REFRESH_MS / 1000,
    rescan: float = 30.0,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The dashboard for the queues under ``prefix`` on ``redis``.

    ``redis``: a ``redis.Redis`` (or cluster) client, or a URL for one
    (``memory://`` too). ``allow_actions``: False (the default) serves
    read-only pages and refuses every POST with 403. ``auth``:
    ``"user:password"`` for HTTP basic auth, any other text for a bearer
    token (``Authorization: Bearer T``, or open ``?token=T`` once to get a
    cookie); None for no auth. ``title`` is shown in the header (never put a
    password there: the CLI passes the redacted URL). ``refresh``: seconds
    between live updates; ``rescan``: seconds between SCANs for new queues.
    ``allowed_hosts``: the ``Host`` header values (names, without port) the
    app answers; any other gets 400. None (the default) answers any: a mounted
    app is behind its host application's own checks. ``leaseq web`` on a
    loopback address passes the loopback names, so a web page whose name is
    rebound to 127.0.0.1 (DNS rebinding) cannot use the dashboard.

    Mount it anywhere: ``Mount("/jobs", app=create_app(r))`` in Starlette,
    ``app.mount("/jobs", create_app(r))`` in FastAPI.
    """
    client = connect(redis) if isinstance(redis, str) else redis
    source = Source(client, prefix, rescan)
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["n"] = lambda value: f"{int(value):,}"
    # Jinja's own urlencode keeps "/": a job id "a/../../b" then made a link the
    # browser resolved to another page. Every path segment is quoted whole.
    env.filters["urlencode"] = lambda value: _quote(str(value))
    macros = env.get_template("_macros.html").module
    env.globals.update(when=macros.when, action=macros.action, cancellable=CANCELLABLE)  # type: ignore[attr-defined]
    views = _Views(source, env, allow_actions, title or f"prefix {prefix}", refresh)
    routes = [
        Route("/", views.overview, name="overview"),
        Route("/search", views.search, name="search"),
        Route("/workers", views.workers, name="workers"),
        Route("/schedules", views.schedules, name="schedules"),
        Route("/limits", views.limits, name="limits"),
        Route("/events", views.events, name="events"),
        Route("/server", views.server, name="server"),
        Route("/live", views.live, name="live"),
        Route("/metrics", views.metrics, name="metrics"),
        Route("/queues/{name}", views.queue, name="queue"),
        Route("/queues/{name}/jobs/{job_id:path}", views.job, name="job"),
        Route("/queues/{name}/actions", views.action, methods=["POST"], name="action"),
        Route("/static/states.css", lambda _: Response(STATES_CSS, media_type="text/css")),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(Gate, auth=parse_auth(auth))]
    if allowed_hosts is not None:
        # Checked first: with DNS rebinding a hostile page is same-origin with
        # the dashboard, so the CSRF check (Origin against Host) cannot tell.
        hosts = [str(h) for h in allowed_hosts]
        if not hosts:
            raise InvalidArgument("allowed_hosts: give at least one host name, or None")
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={LeaseqError: views.error, 404: views.not_found},
    )


class _Views:
    def __init__(
        self, source: Source, env: Environment, allow: bool, title: str, refresh: float
    ) -> None:
        self.source = source
        self.env = env
        self.allow = allow
        self.title = title
        self.refresh_ms = max(250, round(refresh * 1000))
        self.hub = Hub(source)

    # -- helpers ----------------------------------------------------------------

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        base = _base(request)
        cookies = request.cookies
        token, new = csrf_token(cookies)
        flash = urllib.parse.unquote(cookies.get(FLASH_COOKIE, ""))[:500]
        partial = request.query_params.get("partial", "")
        context.update(
            base=base,
            title=self.title,
            allow=self.allow,
            csrf=token,
            flash=flash,
            partial=partial,
            refresh_ms=self.refresh_ms,
            request_path=request.url.path,
            states=STATES,
            nav=NAV,
            section=_section(request.url.path[len(base) :]),
        )
        context.setdefault("live_queue", "")
        page = self.env.get_template(template)
        if partial in page.blocks:
            # The live part only, for leaseq.js to swap in (no full reload).
            body = "".join(page.blocks[partial](page.new_context(context)))
        else:
            body = page.render(context)
        response = HTMLResponse(body, status_code=status)
        response.headers["cache-control"] = "no-store"
        response.headers["x-frame-options"] = "DENY"
        response.headers["referrer-policy"] = "same-origin"
        response.headers["content-security-policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"
        )
        path = (base or "") + "/"
        if new:
            response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path=path)
        if flash and not partial:
            response.delete_cookie(FLASH_COOKIE, path=path)
        self._token_cookie(request, response, path)
        return response

    @staticmethod
    def _token_cookie(request: Request, response: Response, path: str) -> None:
        # ?token=T was let through by the Gate, so it is the right one: keep it
        # in a cookie, so the browser need not send the header.
        token = request.query_params.get("token")
        if token:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path=path)

    def _now(self, stats: list[Stats]) -> float:
        if stats:
            return max(s.server_time for s in stats)
        with _redis.translate_errors():
            sec, usec = self.source.redis.time()
        return float(sec) + float(usec) / 1e6

    # -- pages ---------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        return await _threaded(self._overview, request)

    def _overview(self, request: Request) -> Response:
        stats, broken = self.source.overview_checked()
        now = self._now(stats)
        params = request.query_params
        needle = params.get("filter", "").strip()
        sort = params.get("sort", "name")
        sort = sort if sort in OVERVIEW_SORTS else "name"
        chosen = [s for s in stats if needle in s.queue] if needle else stats
        chosen = sorted(chosen, key=OVERVIEW_SORTS[sort][1])
        size = _int(params.get("size"), PAGE_SIZE)
        size = size if size in PAGE_SIZES else PAGE_SIZE
        pages = max(1, math.ceil(len(chosen) / size))
        page = min(max(1, _int(params.get("page"), 1)), pages)
        shown = chosen[(page - 1) * size : page * size]
        # Workers and charts: of every queue while they fit on one page, else of
        # the queues shown (the page says so): 5,000 queues' histories are
        # seconds of reading, their counts are not.
        paged = len(stats) > size
        only = [s.queue for s in shown] if paged else None
        online = self.source.workers(only)
        rows = [_queue_row(s, now) | {"workers": len(online.get(s.queue, []))} for s in shown]
        totals = {st: sum(getattr(s, st) for s in chosen) for st in STATES}
        minutes, tens = charts.sum_histories(self.source.histories(only))
        return self.render(
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
            now=_fmt_time(now, now),
            workers_online=sum(len(ws) for ws in online.values()),
            hour_chart=Markup(charts.chart(minutes, "jobs per minute, last hour", "chart-hour")),
            day_chart=Markup(charts.chart(tens, "jobs per 10 minutes, last day", "chart-day")),
            series=charts.SERIES,
            hour={f: sum(b.get(f) for b in minutes) for f, _, _ in charts.SERIES},
            day={f: sum(b.get(f) for b in tens) for f, _, _ in charts.SERIES},
        )

    async def workers(self, request: Request) -> Response:
        return await _threaded(self._workers, request)

    def _workers(self, request: Request) -> Response:
        online = self.source.workers()
        now = self._now([])
        held = self.source.current_jobs([name for name, ws in online.items() if ws])
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
                "started": _fmt_time(w.started, now),
                "seen": _fmt_time(w.seen, now),
                "expires": _fmt_time(w.expires, now),
                "jobs": [_current(j, now) for j in held.get(w.id, []) if j.queue == name],
            }
            for name, ws in online.items()
            for w in ws
        ]
        return self.render(request, "workers.html", rows=rows, now=_fmt_time(now, now))

    async def schedules(self, request: Request) -> Response:
        return await _threaded(self._schedules, request)

    def _schedules(self, request: Request) -> Response:
        found = self.source.each_queue(lambda t: t._ops.schedules())
        now = self._now([])
        rows = [
            {
                "queue": name,
                "name": s.name,
                "rule": f"cron {s.cron}" + (f" ({s.tz})" if s.tz else "")
                if s.cron
                else f"every {span(s.every or 0)}",
                "kind": _kind_of(s.payload),
                "next": _fmt_time(s.next_due, now),
                "last": _fmt_time(s.last_fired, now),
                "fired": s.fired,
                "error": s.error or "",
                "payload": _preview(s.payload),
            }
            for name, got in found.items()
            if isinstance(got, list)
            for s in got
        ]
        rows.sort(key=lambda r: (r["next"]["raw"] == "", r["next"]["raw"].zfill(20), r["queue"]))
        return self.render(
            request,
            "schedules.html",
            rows=rows,
            now=_fmt_time(now, now),
            here=f"{_base(request)}/schedules",
        )

    async def limits(self, request: Request) -> Response:
        return await _threaded(self._limits, request)

    def _limits(self, request: Request) -> Response:
        found = self.source.each_queue(lambda t: t._ops.limits())
        rows = []
        for name, lim in found.items():
            if isinstance(lim, Exception):
                continue
            limited = (lim.concurrency, lim.rate, lim.group_concurrency) != (None, None, None)
            if limited or lim.groups_ready or lim.groups_active or lim.groups_held:
                rows.append({"queue": name, "limits": lim})
        chosen = request.query_params.get("queue", "")
        groups = self.source.groups(self.source.queue(chosen)) if chosen else []
        return self.render(request, "limits.html", rows=rows, chosen=chosen, groups=groups)

    async def events(self, request: Request) -> Response:
        return await _threaded(self._events, request)

    def _events(self, request: Request) -> Response:
        params = request.query_params
        names = sorted(self.source.names())
        chosen = params.get("queue", "") or (names[0] if names else "")
        job_id = params.get("job", "").strip()
        state = params.get("state", "")
        state = state if state in STATES or state == "deleted" else ""
        kind = params.get("kind", "").strip()
        events: list[Any] = []
        kinds: dict[str, str] = {}
        enabled = True
        if chosen:
            target = self.source.queue(chosen)
            events = self.source.newest_events(target, EVENTS_SHOWN, job_id, state, kind)
            enabled = all(p.event_settings().enabled for p in self.source.parts(target))
            kinds = self.source.kinds(target, (e.job_id for e in events))
        now = self._now([])
        rows = [
            {
                "at": _fmt_time(e.at, now),
                "from": "new" if e.from_state is None else e.from_state.value,
                "to": "deleted" if e.to_state is None else e.to_state.value,
                "attempt": e.attempt,
                "job": e.job_id,
                "kind": kinds.get(e.job_id, ""),
            }
            for e in events
        ]
        return self.render(
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

    async def server(self, request: Request) -> Response:
        return await _threaded(self._server, request)

    def _server(self, request: Request) -> Response:
        try:
            facts, refused = _server_facts(self.source.server()), ""
        except (LeaseqError, ValueError, TypeError) as exc:  # INFO forbidden (ACL), or odd
            facts, refused = None, _redis.redact(str(exc))
        return self.render(request, "server.html", facts=facts, refused=refused)

    async def queue(self, request: Request) -> Response:
        return await _threaded(self._queue, request)

    def _queue(self, request: Request) -> Response:
        name = request.path_params["name"]
        target = self.source.queue(name)
        state = request.query_params.get("state", "pending")
        if state not in STATES:
            raise InvalidArgument(f"unknown state {state!r}: use one of {', '.join(STATES)}")
        size = _int(request.query_params.get("size"), PAGE_SIZE)
        size = size if size in PAGE_SIZES else PAGE_SIZE
        stats = self.source.stats(target)
        total = getattr(stats, state)
        pages = max(1, math.ceil(total / size))
        page = min(max(1, _int(request.query_params.get("page"), 1)), pages)
        offset = (page - 1) * size
        damaged: list[Any] = []
        jobs = target.ls(state, offset=offset, limit=size, damaged=damaged)
        now = stats.server_time
        here = f"{_base(request)}/queues/{_quote(name)}?state={state}&page={page}&size={size}"
        row = _queue_row(stats, now)
        groups = _group_limits_text(self.source.limits(target))
        if groups:
            row["limits"] = " · ".join(x for x in (row["limits"], groups) if x)
        return self.render(
            request,
            "queue.html",
            here=here,
            live_queue=name,
            q=row,
            state=state,
            jobs=[_job_row(j, now) for j in jobs],
            has_kind=any(j.kind for j in jobs),
            has_group=any(j.group for j in jobs),
            damaged=[{"id": getattr(d, "job_id", ""), "text": str(d)} for d in damaged],
            page=page,
            pages=pages,
            size=size,
            sizes=PAGE_SIZES,
            first=offset + 1 if jobs else 0,
            last=offset + len(jobs),
            total=total,
        )

    async def job(self, request: Request) -> Response:
        return await _threaded(self._job, request)

    def _job(self, request: Request) -> Response:
        name = request.path_params["name"]
        job_id = request.path_params["job_id"]
        target = self.source.queue(name)
        try:
            raw, job, problem = self.source.row(target, job_id)
        except DamagedKey as exc:
            raw, job, problem = {}, None, str(exc)
        now = self._now([])
        fields = []
        for field in sorted(raw, key=_field_order):
            if field in ("payload", "result"):
                continue
            value = raw[field]
            readable = ""
            if field in TIME_FIELDS and value.lstrip("-").isdigit():
                try:
                    t = _fmt_time(int(value) / 1000, now, lease=field == "lease_until")
                    readable = f"{t['iso']}  ({t['text']})"
                except (OverflowError, ValueError):  # hundreds of digits, set by hand
                    readable = "out of range"
            fields.append({"name": field, "raw": value, "readable": readable})
        try:
            trail = self.source.trail(target, job_id)
        except LeaseqError:  # the row went meanwhile, or the stream will not read
            trail = None
        events = job_history(job, [] if trail is None else trail.events)
        history = [
            {
                "at": _fmt_time(e.at, now),
                "from": "new" if e.from_state is None else e.from_state.value,
                "to": "deleted" if e.to_state is None else e.to_state.value,
                "attempt": e.attempt,
                "source": "stream" if e.stream_id else "row",
            }
            for e in events
        ]
        failures = [
            {
                "attempt": f.attempt,
                "claimed": _fmt_time(f.claimed_at, now),
                "failed": _fmt_time(f.failed_at, now),
                "to": f.to,
                "worker": f.worker or "",
                "error": f.error,
            }
            for f in (job.failures if job else ())
        ]
        payload = _pretty(job.payload) if job else raw.get("payload", "")
        result = _pretty(job.result) if job and job.result is not None else raw.get("result")
        return self.render(
            request,
            "job.html",
            graph=_graph(target, job) if job else None,
            here=f"{_base(request)}/queues/{_quote(name)}/jobs/{_quote(job_id)}",
            name=name,
            live_queue=name,
            job_id=job_id,
            job=_job_row(job, now) if job else None,
            job_state=raw.get("state", ""),
            problem=problem,
            fields=fields,
            payload=payload,
            result=result,
            trail=trail,
            history=history,
            failures=failures,
            traceback=job.traceback if job else None,
        )

    async def search(self, request: Request) -> Response:
        return await _threaded(self._search, request)

    def _search(self, request: Request) -> Response:
        needle = request.query_params.get("q", "").strip()
        only = request.query_params.get("queue", "")
        names = sorted(self.source.names())
        chosen = [only] if only else names
        exact: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        budget = SCAN_LIMIT  # rows read over all the queues searched, not per queue
        for name in chosen if needle else []:
            target = self.source.queue(name)
            try:
                self.source.holder(target, check_job_id(needle))
                exact.append({"queue": name, "id": needle})
            except LeaseqError:
                pass  # not an id, or not this queue's
            found = self.source.search(target, needle, budget)
            budget = max(0, budget - found.scanned)
            now = self._now([])
            results.append(
                {
                    "queue": name,
                    "jobs": [_job_row(j, now) for j in found.jobs],
                    "scanned": found.scanned,
                    "total": found.total,
                    "damaged": found.damaged,
                }
            )
        return self.render(
            request,
            "search.html",
            needle=needle,
            only=only,
            names=names,
            exact=exact,
            results=results,
            limit=SCAN_LIMIT,
        )

    async def metrics(self, request: Request) -> Response:
        return await _threaded(self._metrics, request)

    def _metrics(self, request: Request) -> Response:
        try:
            from leaseq.observe.metrics import CONTENT_TYPE, render
        except ImportError:
            return Response(
                "prometheus-client is missing: pip install 'leaseq[web]'\n",
                status_code=501,
                media_type="text/plain",
            )
        stats, broken = self.source.overview_checked()
        for name, why in broken.items():
            log.warning("queue=%s left out of /metrics: %s", name, why)
        return Response(render(stats), media_type=CONTENT_TYPE)

    async def live(self, request: Request) -> Response:
        """Server-Sent Events for one page: ``hello`` once, then ``moved`` (the
        queues with new transitions, as JSON) each time the event stream moves;
        ``poll`` (and the end) when the page's queue records no events."""
        from starlette.concurrency import run_in_threadpool

        queue = request.query_params.get("queue", "")
        if queue:
            target = await run_in_threadpool(self.source.queue, queue)
            parts = self.source.parts(target)
            on = await run_in_threadpool(lambda: all(p.event_settings().enabled for p in parts))
            if not on:
                return Response(
                    "event: poll\ndata: events are off\n\n", media_type="text/event-stream"
                )
        token, inbox = self.hub.subscribe(queue)

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
                self.hub.unsubscribe(token)

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    # -- actions -------------------------------------------------------------------

    async def action(self, request: Request) -> Response:
        form = await request.form()
        fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        ids = [str(v) for v in form.getlist("id") if isinstance(v, str)]
        return await _threaded(self._action, request, fields, ids)

    def _action(self, request: Request, form: dict[str, str], ids: list[str]) -> Response:
        if not self.allow:
            return self.render(
                request,
                "error.html",
                403,
                message="this dashboard is read-only: start it with  leaseq web --allow-actions",
            )
        host = request.headers.get("host", "")
        if not csrf_ok(request.cookies, form.get("csrf"), request.headers.get("origin"), host):
            return self.render(
                request,
                "error.html",
                403,
                message="the form's CSRF token did not match: reload the page and try again",
            )
        name = request.path_params["name"]
        target = self.source.queue(name)
        verb = form.get("action", "")
        state = form.get("state", "")
        back = _safe_next(form.get("next", ""), request)
        edited, diff = None, None
        if verb == "edit_retry":
            edited, diff = self._edit(target, ids, form.get("payload", ""))
        ask = self._question(target, verb, state, ids)
        if ask and form.get("confirmed") != "yes":
            hidden = [(k, v) for k, v in form.items() if k not in ("csrf", "confirmed", "id")]
            hidden += [("id", i) for i in ids]
            return self.render(
                request,
                "confirm.html",
                name=name,
                question=ask,
                verb=verb,
                hidden=hidden,
                back=back,
                diff=diff,
            )
        message = self._do(target, verb, state, ids, edited)
        log.info("queue=%s action=%s: %s", name, verb, message)
        response = RedirectResponse(back, status_code=303)
        base = _base(request)
        response.set_cookie(
            FLASH_COOKIE,
            urllib.parse.quote(message[:500]),
            max_age=60,
            samesite="strict",
            path=base + "/",
        )
        return response

    def _question(self, target: Target, verb: str, state: str, ids: list[str]) -> str:
        """What an action will do, for the page that asks first ('' = no need to ask)."""
        name = target.name
        count = len(ids)
        jobs = f"{count:,} job{'s' if count != 1 else ''}"
        if verb == "retry_all":
            dead = self.source.stats(target).dead
            return f"Retry all {dead:,} dead jobs of {name}? They become pending again."
        if verb == "purge":
            st = _state(state)
            n = getattr(self.source.stats(target), st)
            if not n:
                return ""  # nothing to ask about: the purge deletes nothing and says so
            return f"Delete all {n:,} {st} jobs of {name}? This cannot be undone."
        if verb == "delete":
            return f"Delete {jobs} of {name} ({_ids(ids)})? This cannot be undone."
        if verb == "cancel":
            return (
                f"Cancel {jobs} of {name} ({_ids(ids)})? They will never run; a running one "
                "loses its lease at once and its worker stops it at its next heartbeat."
            )
        if verb == "edit_retry":
            return (
                f"Retry job {_ids(ids)} of {name} with the edited payload? It becomes pending "
                "again; the old payload is kept in the event stream."
            )
        if verb in ("retry", "run_now") and count > 1:
            return f"Retry {jobs} of {name} ({_ids(ids)})?"
        return ""

    def _edit(self, target: Target, ids: list[str], text: str) -> tuple[Any, list[str]]:
        """The edited payload of an "edit and retry" (parsed from the form's JSON) and
        the diff to confirm, lines of the old and new pretty JSON. Raises
        InvalidArgument for anything but one id and JSON text."""
        if len(ids) != 1:
            raise InvalidArgument("edit and retry takes exactly one job")
        try:
            edited = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"the edited payload is not JSON: {exc}") from None
        _, job, problem = self.source.row(target, ids[0])
        if job is None:
            raise InvalidArgument(problem or f"no job {ids[0]!r}")
        old, new = _pretty(job.payload).splitlines(), _pretty(edited).splitlines()
        diff = list(difflib.unified_diff(old, new, "payload now", "edited payload", lineterm=""))
        return edited, diff or ["(no change)"]

    def _do(self, target: Target, verb: str, state: str, ids: list[str], edited: Any = None) -> str:
        src = self.source
        name = target.name
        if verb == "edit_retry":
            src.holder(target, ids[0]).retry_dead(ids[0], payload=edited)
            return f"retried job {ids[0]} of {name} with the edited payload"
        if verb in ("pause", "resume"):
            changed = src.pause(target, verb == "pause")
            done = "paused" if verb == "pause" else "resumed"
            return f"{name} {done}" if changed else f"{name} was already {done}"
        if verb == "retry_all":
            return f"retried {target.retry_all_dead():,} dead jobs of {name}"
        if verb == "purge":
            st = _state(state)
            return f"purged {target.purge(st):,} {st} jobs of {name}"
        if verb == "fire":  # ids: the schedule's name
            if len(ids) != 1:
                raise InvalidArgument("name one schedule to run now")
            return f"schedule {ids[0]} of {name}: enqueued job {src.fire(target, ids[0])} now"
        acts = {
            "retry": (lambda i: src.retry(target, i), "retried"),
            "cancel": (lambda i: src.cancel(target, i), "cancelled"),
            "run_now": (lambda i: src.run_now(target, i), "moved to pending"),
            "delete": (lambda i: src.delete(target, i), "deleted"),
        }
        if verb not in acts:
            raise InvalidArgument(f"unknown action {verb!r}")
        if not ids:
            raise InvalidArgument("no job selected")
        act, word = acts[verb]
        ok, refused = src.each(ids, act)
        text = f"{word} {ok:,} of {len(ids):,} job{'s' if len(ids) != 1 else ''}"
        if refused:
            text += " — " + "; ".join(refused[:3]) + (" …" if len(refused) > 3 else "")
        return text

    # -- errors ---------------------------------------------------------------------

    async def error(self, request: Request, exc: Exception) -> Response:
        status = 400
        if isinstance(exc, LookupError) or "no queue named" in str(exc):
            status = 404
        elif isinstance(exc, ServerUnavailable):
            status = 503
        return self.render(request, "error.html", status, message=_redis.redact(str(exc)))

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.render(request, "error.html", 404, message="no such page")


async def _threaded(fn: Any, *args: Any) -> Response:
    """Run a view that calls Redis synchronously off the event loop."""
    from starlette.concurrency import run_in_threadpool

    result: Response = await run_in_threadpool(fn, *args)
    return result


# -- formatting ------------------------------------------------------------------------


def _section(path: str) -> str:
    """The navigation entry a path belongs to (a queue and its jobs: Queues)."""
    for href, _ in NAV[1:]:
        if path == href or path.startswith(href + "/"):
            return href
    return "/"


def _base(request: Request) -> str:
    """Where this app is mounted ('' at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _state(text: str) -> str:
    if text not in STATES or text == "active":
        raise InvalidArgument(f"cannot purge state {text!r}")
    return text


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:5])
    return shown + (f" and {len(ids) - 5:,} more" if len(ids) > 5 else "")


def _safe_next(target: str, request: Request) -> str:
    """A redirect target inside this app only (a path under its root)."""
    base = _base(request)
    if target.startswith(base + "/") and not target.startswith("//") and "\\" not in target:
        parsed = urllib.parse.urlsplit(target)
        if not parsed.scheme and not parsed.netloc:
            return target
    return base + "/"


def _fmt_time(t: float | None, now: float, lease: bool = False) -> dict[str, str]:
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


def _queue_row(s: Stats, now: float) -> dict[str, Any]:
    return {
        "name": s.queue,
        "counts": {st: getattr(s, st) for st in STATES},
        "paused": s.paused,
        "paused_at": _fmt_time(s.paused_at, now),
        "expired": s.expired,
        "expiring_soon": s.expiring_soon,
        "oldest": "" if s.oldest_pending_age is None else span(s.oldest_pending_age),
        "oldest_seconds": s.oldest_pending_age,
        "next_due": "" if s.next_due_in is None else f"in {span(s.next_due_in)}",
        "totals": s.totals,
        "limits": _limits_text(s),
    }


def _limits_text(s: Stats) -> str:
    """The global and group limits and how close the queue is to them ('' if none)."""
    parts = []
    if s.concurrency_limit is not None:
        parts.append(f"concurrency {s.active}/{s.concurrency_limit} active")
    if s.rate_limit is not None and s.rate_per is not None:
        parts.append(f"rate {s.recent_claims or 0}/{s.rate_limit} in {s.rate_per:g} s")
    if s.group_concurrency_limit is not None:
        parts.append(
            f"group concurrency {s.group_concurrency_limit}: {s.groups_ready} groups ready, "
            f"{s.groups_held} held at the limit"
        )
    return " · ".join(parts)


def _group_limits_text(limits: Any) -> str:
    """The per-group rate and the groups with limits of their own ('' if none)."""
    if limits is None:
        return ""
    parts = []
    if limits.group_rate is not None:
        parts.append(f"group rate {limits.group_rate} per {limits.group_per:g} s")
    for name, own in limits.groups.items():
        parts.append(f"group {name}: {own.describe()}")
    return " · ".join(parts)


def _preview(value: Any, limit: int = 80) -> str:
    if value is None:
        return ""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def _progress(value: Any) -> dict[str, Any] | None:
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


def _current(job: Job, now: float) -> dict[str, Any]:
    """An active job as the workers page shows it under its worker."""
    return {
        "id": job.id,
        "queue": job.queue,
        "kind": job.kind or "",
        "age": _fmt_time(job.claimed_at, now),
        "progress": _progress(job.progress),
        "progress_json": "" if job.progress is None else _preview(job.progress, 80),
    }


def _kind_of(payload: Any) -> str:
    """A schedule's job kind, when its payload names one."""
    return str(payload.get("kind", "")) if isinstance(payload, dict) else ""


def _server_facts(info: dict[str, Any]) -> dict[str, Any]:
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
        "used": _bytes(used),
        "peak": _bytes(int(info.get("used_memory_peak", 0) or 0)),
        "limit": _bytes(limit) if limit else "no limit (maxmemory 0)",
        "used_pct": round(used / limit * 100, 1) if limit else None,
        "policy": policy,
        "evicts": policy in EVICTING.split(),
        "clients": info.get("connected_clients", "?"),
        "blocked": info.get("blocked_clients", 0),
        "ops": info.get("instantaneous_ops_per_sec", "?"),
        "aof": aof,
        "rdb_changes": info.get("rdb_changes_since_last_save", "?"),
        "rdb_last_save": _fmt_time(float(last_save), float(last_save))["iso"]
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


def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _job_row(job: Job, now: float) -> dict[str, Any]:
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
        "progress": _progress(job.progress),
        "progress_json": "" if job.progress is None else _preview(job.progress, 80),
        "payload": _preview(job.payload),
        "result": _preview(job.result),
        "times": {
            f: _fmt_time(getattr(job, f), now, lease=f == "lease_until") for f in TIME_FIELDS
        },
    }


_ORDER = [
    "state",
    "attempts",
    "max_attempts",
    "priority",
    "group",
    *TIME_FIELDS,
    "worker",
    "last_error",
]


_GRAPH_SHOWN = 50
"""Most parents, and most children, a job page lists (with their states)."""


def _graph(target: Any, job: Job) -> dict[str, Any] | None:
    """A job's place in its workflow, for the job page: its parents and the
    children still waiting for it, each with its state (None: no workflow)."""
    kids = [] if job.state.finished else target.children(job.id)
    if not job.depends_on and not kids:
        return None

    def linked(ids: Sequence[str]) -> list[dict[str, str]]:
        rows = []
        for i in ids[:_GRAPH_SHOWN]:
            try:
                found = target.get(i)
                state = found.state.value if found else "gone"
            except LeaseqError:  # a relative damaged by hand: the page still shows
                state = "damaged"
            rows.append({"id": i, "state": state})
        return rows

    return {
        "parents": linked(job.depends_on),
        "more_parents": max(0, len(job.depends_on) - _GRAPH_SHOWN),
        "children": linked(kids),
        "more_children": max(0, len(kids) - _GRAPH_SHOWN),
        "left": job.parents_left,
        "policy": job.on_parent_failure,
        "pinned": job.children,
    }


def _field_order(name: str) -> tuple[int, str]:
    return (_ORDER.index(name) if name in _ORDER else len(_ORDER), name)
