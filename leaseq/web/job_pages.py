"""The dashboard's pages of jobs: a queue's jobs in one state a page at a time (read
through the state's index, never a scan of rows), one job with its stored row,
history, failures and workflow, and the search across queues.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from leaseq.errors import DamagedKey, InvalidArgument, LeaseqError
from leaseq.queue import Queue
from leaseq.store import ready
from leaseq.store.events import Event, job_history
from leaseq.store.keys import check_job_id
from leaseq.types import Job, State, TimedOut
from leaseq.web import filtered
from leaseq.web._source import SCAN_LIMIT
from leaseq.web.formatting import (
    PAGE_SIZE,
    PAGE_SIZES,
    STATES,
    TIME_FIELDS,
    base_path,
    field_order,
    fmt_time,
    graph,
    group_limits_text,
    int_param,
    job_row,
    pretty,
    preview,
    queue_row,
    quote,
)
from leaseq.web.site import Site


def queue(site: Site, request: Request) -> Response:
    name = request.path_params["name"]
    target = site.source.queue(name)
    params = request.query_params
    state = params.get("state", "pending")
    if state not in STATES:
        raise InvalidArgument(f"unknown state {state!r}: use one of {', '.join(STATES)}")
    size = int_param(params.get("size"), PAGE_SIZE)
    size = size if size in PAGE_SIZES else PAGE_SIZE
    flt, raw = filtered.read_filter(params, state)
    stats = site.source.stats(target)
    now = stats.server_time
    total = getattr(stats, state)
    url = f"{base_path(request)}/queues/{quote(name)}?state={state}&size={size}"
    if flt.on:
        listed = filtered.page(
            site, params, target, state, flt, size, now, url + filtered.query(raw)
        )
    else:
        span = total
        if state == "pending" and isinstance(target, Queue):
            # Pages count the ready list's entries, stale ones too (a page may be short).
            span = max(total, target._drive(ready.entries_count(target._core.keys)))
        listed = _paged(target, state, size, span, int_param(params.get("page"), 1), now)
        listed["here"] = f"{url}&page={listed['page']}"
    row = queue_row(stats, now)
    groups = group_limits_text(site.source.limits(target))
    if groups:
        row["limits"] = " · ".join(x for x in (row["limits"], groups) if x)
    jobs = listed["jobs"]
    return site.render(
        request,
        "queue.html",
        live_queue=name,
        q=row,
        state=state,
        filtered=flt.on,
        filter=raw,
        described=filtered.describe(flt, state) if flt.on else "",
        tab_query=filtered.tab_queries(raw),
        ages=filtered.ages(state),
        kinds=sorted({j["kind"] for j in jobs if j["kind"]}),
        has_kind=any(j["kind"] for j in jobs),
        has_group=any(j["group"] for j in jobs),
        size=size,
        sizes=PAGE_SIZES,
        total=total,
        **listed,
    )


def _paged(target: Any, state: str, size: int, total: int, page: int, now: float) -> dict[str, Any]:
    """The unfiltered list: page ``page`` of the state's index, by rank."""
    pages = max(1, math.ceil(total / size))
    page = min(max(1, page), pages)
    offset = (page - 1) * size
    damaged: list[Any] = []
    jobs = target.ls(state, offset=offset, limit=size, damaged=damaged)
    return {
        "jobs": [job_row(j, now) for j in jobs],
        "damaged": [{"id": getattr(d, "job_id", ""), "text": str(d)} for d in damaged],
        "page": page,
        "pages": pages,
        "first": offset + 1 if jobs else 0,
        "last": offset + len(jobs),
    }


def job(site: Site, request: Request) -> Response:
    name = request.path_params["name"]
    job_id = request.path_params["job_id"]
    target = site.source.queue(name)
    try:
        raw, job, problem = site.source.row(target, job_id)
    except DamagedKey as exc:
        raw, job, problem = {}, None, str(exc)
    now = site.now([])
    fields = _fields(raw, now)
    try:
        trail = site.source.trail(target, job_id)
    except LeaseqError:  # the row went meanwhile, or the stream will not read
        trail = None
    events = job_history(job, [] if trail is None else trail.events)
    history = _history(events, now)
    failures = [] if job is None else _failures(job, now)
    payload = pretty(job.payload) if job else raw.get("payload", "")
    result = pretty(job.result) if job and job.result is not None else raw.get("result")
    return site.render(
        request,
        "job.html",
        graph=graph(target, job) if job else None,
        here=f"{base_path(request)}/queues/{quote(name)}/jobs/{quote(job_id)}",
        name=name,
        live_queue=name,
        job_id=job_id,
        job=job_row(job, now) if job else None,
        job_state=raw.get("state", ""),
        problem=problem,
        fields=fields,
        payload=payload,
        result=result,
        trail=trail,
        history=history,
        failures=failures,
        traceback=job.traceback if job else None,
        steps=_steps(job, raw, now) if job else [],
    )


def _steps(job: Job, raw: dict[str, str], now: float) -> list[dict[str, str]]:
    """A durable job's steps in the order its row holds them (the order recorded,
    while the row is small enough to keep it), then one line for where it is
    now: asleep, waiting for a signal, running. Empty for a job with no steps
    and no wait."""
    order = [f[5:] for f in raw if f.startswith("step:")]
    steps = []
    for name in order:
        value = job.steps.get(name)
        if isinstance(value, TimedOut):
            steps.append({"name": name, "kind": "timed out", "value": "no signal came"})
        else:
            steps.append({"name": name, "kind": "done", "value": preview(value, 120)})
    if job.wait_key is not None:
        until = fmt_time(job.run_at, now)["text"]
        what = f"signal {job.wait_key}" + (f", or {until} (timeout)" if until else "")
        steps.append({"name": job.wait_step or "", "kind": "waiting", "value": what})
    elif job.state is State.SUSPENDED:
        steps.append({"name": "", "kind": "asleep", "value": fmt_time(job.run_at, now)["text"]})
    elif steps and job.state is State.ACTIVE:
        steps.append({"name": "", "kind": "running", "value": f"attempt {job.attempts}"})
    return steps


def _fields(raw: dict[str, str], now: float) -> list[dict[str, str]]:
    """A row's stored fields but payload and result, in reading order; times also
    as people read them."""
    fields = []
    for field in sorted(raw, key=field_order):
        if field in ("payload", "result"):
            continue
        value = raw[field]
        readable = ""
        if field in TIME_FIELDS and value.lstrip("-").isdigit():
            try:
                t = fmt_time(int(value) / 1000, now, lease=field == "lease_until")
                readable = f"{t['iso']}  ({t['text']})"
            except (OverflowError, ValueError):  # hundreds of digits, set by hand
                readable = "out of range"
        fields.append({"name": field, "raw": value, "readable": readable})
    return fields


def _history(events: list[Event], now: float) -> list[dict[str, Any]]:
    """A job's transitions, from the event stream and from its row."""
    return [
        {
            "at": fmt_time(e.at, now),
            "from": "new" if e.from_state is None else e.from_state.value,
            "to": "deleted" if e.to_state is None else e.to_state.value,
            "attempt": e.attempt,
            "source": "stream" if e.stream_id else "row",
        }
        for e in events
    ]


def _failures(job: Job, now: float) -> list[dict[str, Any]]:
    """A job's failed attempts, as its row keeps them."""
    return [
        {
            "attempt": f.attempt,
            "claimed": fmt_time(f.claimed_at, now),
            "failed": fmt_time(f.failed_at, now),
            "to": f.to,
            "worker": f.worker or "",
            "error": f.error,
        }
        for f in job.failures
    ]


def search(site: Site, request: Request) -> Response:
    needle = request.query_params.get("q", "").strip()
    only = request.query_params.get("queue", "")
    names = sorted(site.source.names())
    chosen = [only] if only else names
    exact: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    budget = SCAN_LIMIT  # rows read over all the queues searched, not per queue
    for name in chosen if needle else []:
        target = site.source.queue(name)
        try:
            site.source.holder(target, check_job_id(needle))
            exact.append({"queue": name, "id": needle})
        except LeaseqError:
            pass  # not an id, or not this queue's
        found = site.source.search(target, needle, budget)
        budget = max(0, budget - found.scanned)
        now = site.now([])
        results.append(
            {
                "queue": name,
                "jobs": [job_row(j, now) for j in found.jobs],
                "scanned": found.scanned,
                "total": found.total,
                "damaged": found.damaged,
            }
        )
    return site.render(
        request,
        "search.html",
        needle=needle,
        only=only,
        names=names,
        exact=exact,
        results=results,
        limit=SCAN_LIMIT,
    )
