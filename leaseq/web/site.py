"""What every dashboard page shares: ``Site`` (the source of data, the Jinja
templates, the app's settings) renders a page with its security headers and
cookies, reads the server's clock, turns a view into a Starlette endpoint and
answers errors with a page.
"""

from __future__ import annotations

import inspect
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from leaseq.errors import ServerUnavailable
from leaseq.transport import client as _redis
from leaseq.types import Stats
from leaseq.web._live import Hub
from leaseq.web._security import CSRF_COOKIE, TOKEN_COOKIE, csrf_token
from leaseq.web._source import Source
from leaseq.web.formatting import NAV, STATES, base_path, section

FLASH_COOKIE = "leaseq_flash"


class Site:
    """What every page shares: the source, the templates, the settings, and
    ``render``, which wraps a page in the headers and cookies each needs."""

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
        base = base_path(request)
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
            section=section(request.url.path[len(base) :]),
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

    def now(self, stats: list[Stats]) -> float:
        """The server's clock, in seconds: the newest of ``stats``' readings, else TIME."""
        if stats:
            return max(s.server_time for s in stats)
        with _redis.translate_errors():
            sec, usec = self.source.redis.time()
        return float(sec) + float(usec) / 1e6

    def endpoint(self, view: Any) -> Callable[[Request], Awaitable[Response]]:
        """The Starlette endpoint of ``view(site, request)``: awaited when it is
        a coroutine function, else run off the event loop (it calls Redis)."""
        if inspect.iscoroutinefunction(view):

            async def run(request: Request) -> Response:
                result: Response = await view(self, request)
                return result

            return run

        async def run_threaded(request: Request) -> Response:
            return await threaded(view, self, request)

        return run_threaded

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


async def threaded(fn: Any, *args: Any) -> Response:
    """Run a view that calls Redis synchronously off the event loop."""
    from starlette.concurrency import run_in_threadpool

    result: Response = await run_in_threadpool(fn, *args)
    return result


def flash_redirect(request: Request, back: str, message: str) -> Response:
    """A 303 to ``back`` (a path inside the app) that shows ``message`` there once."""
    response = RedirectResponse(back, status_code=303)
    response.set_cookie(
        FLASH_COOKIE,
        urllib.parse.quote(message[:500]),
        max_age=60,
        samesite="strict",
        path=base_path(request) + "/",
    )
    return response
