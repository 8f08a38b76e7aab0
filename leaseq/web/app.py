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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from leaseq.errors import InvalidArgument, LeaseqError
from leaseq.observe.state_style import stylesheet
from leaseq.queue import connect
from leaseq.types import TRANSITIONS, State
from leaseq.web import actions, job_pages, pages
from leaseq.web._security import Gate, parse_auth
from leaseq.web._source import Source
from leaseq.web.formatting import MountedAt, quote
from leaseq.web.site import Site

__all__ = ["create_app"]

HERE = Path(__file__).resolve().parent
REFRESH_MS = 2000
CANCELLABLE = [s.value for s in State if State.CANCELLED in TRANSITIONS[s]]
"""The states whose jobs get a Cancel button (those ``cancel`` moves to cancelled)."""
STATES_CSS = stylesheet()
"""``static/states.css``: each state's colour, from ``leaseq.observe.state_style``."""


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
    tasks: Mapping[str, Mapping[str, Any]] | None = None,
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
    rebound to 127.0.0.1 (DNS rebinding) cannot use the dashboard. ``tasks``:
    typed tasks by queue name, then name (``leaseq.work.tasks.tasks_by_queue``):
    Edit and retry checks a payload of their kind against their signature.

    Mount it anywhere: ``Mount("/jobs", app=create_app(r))`` in Starlette,
    ``app.mount("/jobs", create_app(r))`` in FastAPI.
    """
    client = connect(redis) if isinstance(redis, str) else redis
    source = Source(client, prefix, rescan, tasks)
    site = Site(source, _templates(), allow_actions, title or f"prefix {prefix}", refresh)
    return Starlette(
        routes=_routes(site),
        middleware=_middleware(auth, allowed_hosts),
        exception_handlers={LeaseqError: site.error, 404: site.not_found},
    )


def _templates() -> Environment:
    """The Jinja environment of the pages, with the filters and macros they use."""
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["n"] = lambda value: f"{int(value):,}"
    # Jinja's own urlencode keeps "/": a job id "a/../../b" then made a link the
    # browser resolved to another page. Every path segment is quoted whole.
    env.filters["urlencode"] = lambda value: quote(str(value))
    macros: Any = env.get_template("_macros.html").module
    env.globals.update(
        when=macros.when, action=macros.action, every=macros.every, cancellable=CANCELLABLE
    )
    return env


def _routes(site: Site) -> list[BaseRoute]:
    """Every URL of the app: path under its root, view, name."""
    page = site.endpoint
    return [
        Route("/", page(pages.overview), name="overview"),
        Route("/search", page(job_pages.search), name="search"),
        Route("/workers", page(pages.workers), name="workers"),
        Route("/schedules", page(pages.schedules), name="schedules"),
        Route("/limits", page(pages.limits), name="limits"),
        Route("/events", page(pages.events), name="events"),
        Route("/server", page(pages.server), name="server"),
        Route("/live", page(pages.live), name="live"),
        Route("/metrics", page(pages.metrics), name="metrics"),
        Route("/api/scale/{name}", page(pages.scale), name="scale"),
        Route("/queues/{name}", page(job_pages.queue), name="queue"),
        Route("/queues/{name}/jobs/{job_id:path}", page(job_pages.job), name="job"),
        Route("/queues/{name}/actions", page(actions.action), methods=["POST"], name="action"),
        Route("/static/states.css", lambda _: Response(STATES_CSS, media_type="text/css")),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _middleware(auth: str | None, allowed_hosts: Sequence[str] | None) -> list[Middleware]:
    middleware = [Middleware(MountedAt), Middleware(Gate, auth=parse_auth(auth))]
    if allowed_hosts is not None:
        # Checked first: with DNS rebinding a hostile page is same-origin with
        # the dashboard, so the CSRF check (Origin against Host) cannot tell.
        hosts = [str(h) for h in allowed_hosts]
        if not hosts:
            raise InvalidArgument("allowed_hosts: give at least one host name, or None")
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    return middleware
