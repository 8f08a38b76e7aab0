"""The dashboard's one POST: an action on a queue or on jobs (retry, cancel, delete,
run now, purge, pause, edit and retry, fire a schedule). Refused unless the app
allows actions and the form carries the CSRF token; asks first, on a page of its
own, when it destroys or changes many jobs; answers with a redirect and a flash.
"""

from __future__ import annotations

import difflib
import json
import logging
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from leaseq.errors import InvalidArgument
from leaseq.web import bulk
from leaseq.web._security import csrf_ok
from leaseq.web._source import Target
from leaseq.web.formatting import STATES, base_path, pretty
from leaseq.web.site import Site, flash_redirect, threaded

log = logging.getLogger("leaseq.web")


async def action(site: Site, request: Request) -> Response:
    form = await request.form()
    fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
    ids = [str(v) for v in form.getlist("id") if isinstance(v, str)]
    return await threaded(act, site, request, fields, ids)


def act(site: Site, request: Request, form: dict[str, str], ids: list[str]) -> Response:
    if not site.allow:
        return site.render(
            request,
            "error.html",
            403,
            message="this dashboard is read-only: start it with  leaseq web --allow-actions",
        )
    host = request.headers.get("host", "")
    if not csrf_ok(request.cookies, form.get("csrf"), request.headers.get("origin"), host):
        return site.render(
            request,
            "error.html",
            403,
            message="the form's CSRF token did not match: reload the page and try again",
        )
    name = request.path_params["name"]
    target = site.source.queue(name)
    verb = form.get("action", "")
    state = form.get("state", "")
    back = safe_next(form.get("next", ""), request)
    if form.get("scope") == "matches":
        return bulk.over_matches(site, request, target, form, back)
    edited, diff = None, None
    if verb == "edit_retry":
        edited, diff = edit(site, target, ids, form.get("payload", ""))
    ask = question(site, target, verb, state, ids)
    if ask and form.get("confirmed") != "yes":
        hidden = [(k, v) for k, v in form.items() if k not in ("csrf", "confirmed", "id")]
        hidden += [("id", i) for i in ids]
        return site.render(
            request,
            "confirm.html",
            name=name,
            question=ask,
            verb=verb,
            hidden=hidden,
            back=back,
            diff=diff,
        )
    message = do(site, target, verb, state, ids, edited)
    log.info("queue=%s action=%s: %s", name, verb, message)
    return flash_redirect(request, back, message)


def question(site: Site, target: Target, verb: str, state: str, ids: list[str]) -> str:
    """What an action will do, for the page that asks first ('' = no need to ask)."""
    name = target.name
    count = len(ids)
    jobs = f"{count:,} job{'s' if count != 1 else ''}"
    if verb == "retry_all":
        dead = site.source.stats(target).dead
        return f"Retry all {dead:,} dead jobs of {name}? They become pending again."
    if verb == "purge":
        st = purgeable(state)
        n = getattr(site.source.stats(target), st)
        if not n:
            return ""  # nothing to ask about: the purge deletes nothing and says so
        return f"Delete all {n:,} {st} jobs of {name}? This cannot be undone."
    if verb == "delete":
        return f"Delete {jobs} of {name} ({ids_text(ids)})? This cannot be undone."
    if verb == "cancel":
        return (
            f"Cancel {jobs} of {name} ({ids_text(ids)})? They will never run; a running one "
            "loses its lease at once and its worker stops it at its next heartbeat."
        )
    if verb == "edit_retry":
        return (
            f"Retry job {ids_text(ids)} of {name} with the edited payload? It becomes pending "
            "again; the old payload is kept in the event stream."
        )
    if verb in ("retry", "run_now") and count > 1:
        return f"Retry {jobs} of {name} ({ids_text(ids)})?"
    return ""


def edit(site: Site, target: Target, ids: list[str], text: str) -> tuple[Any, list[str]]:
    """The edited payload of an "edit and retry" (parsed from the form's JSON) and
    the diff to confirm, lines of the old and new pretty JSON. Raises
    InvalidArgument for anything but one id and JSON text."""
    if len(ids) != 1:
        raise InvalidArgument("edit and retry takes exactly one job")
    try:
        edited = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"the edited payload is not JSON: {exc}") from None
    _, job, problem = site.source.row(target, ids[0])
    if job is None:
        raise InvalidArgument(problem or f"no job {ids[0]!r}")
    old, new = pretty(job.payload).splitlines(), pretty(edited).splitlines()
    diff = list(difflib.unified_diff(old, new, "payload now", "edited payload", lineterm=""))
    return edited, diff or ["(no change)"]


def do(
    site: Site, target: Target, verb: str, state: str, ids: list[str], edited: Any = None
) -> str:
    src = site.source
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
        st = purgeable(state)
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


def ids_text(ids: list[str]) -> str:
    shown = ", ".join(ids[:5])
    return shown + (f" and {len(ids) - 5:,} more" if len(ids) > 5 else "")


def purgeable(text: str) -> str:
    if text not in STATES or text == "active":
        raise InvalidArgument(f"cannot purge state {text!r}")
    return text


def safe_next(target: str, request: Request) -> str:
    """A redirect target inside this app only (a path under its root)."""
    base = base_path(request)
    if target.startswith(base + "/") and not target.startswith("//") and "\\" not in target:
        parsed = urllib.parse.urlsplit(target)
        if not parsed.scheme and not parsed.netloc:
            return target
    return base + "/"
