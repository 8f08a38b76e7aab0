"""The dashboard's gate: optional basic auth or bearer token, and CSRF tokens.

``Gate`` is plain ASGI middleware (no request body is read here). A
credential is compared in constant time; a wrong one gets 401 and nothing
else. CSRF is the double-submit pattern: a random token in a
``SameSite=Strict`` cookie, repeated in a hidden field of every form, and
checked on every POST together with the Origin header when one is sent.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import urllib.parse
from http.cookies import SimpleCookie
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CSRF_COOKIE", "TOKEN_COOKIE", "Gate", "csrf_ok", "csrf_token", "parse_auth"]

CSRF_COOKIE = "leaseq_csrf"
TOKEN_COOKIE = "leaseq_token"


def parse_auth(auth: str | None) -> tuple[str, str] | None:
    """``("basic", "user:password")``, ``("bearer", token)``, or None for no auth.

    ``USER:PASSWORD`` means HTTP basic auth; anything without a colon is a
    bearer token. An empty value is an error (an accident, not "no auth").
    """
    if auth is None:
        return None
    if not isinstance(auth, str) or not auth.strip():
        raise ValueError("--auth needs USER:PASSWORD or a TOKEN, not an empty value")
    auth = auth.strip()
    return ("basic", auth) if ":" in auth else ("bearer", auth)


def _cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is just no cookie
                continue
    return {k: m.value for k, m in jar.items()}


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


class Gate:
    """Refuse requests without the configured credential (if any)."""

    def __init__(self, app: ASGIApp, auth: tuple[str, str] | None) -> None:
        self.app = app
        self.auth = auth

    def allowed(self, scope: Scope) -> bool:
        if self.auth is None:
            return True
        kind, secret = self.auth
        given = _header(scope, b"authorization") or ""
        scheme, _, value = given.partition(" ")
        if kind == "basic" and scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return False
            return hmac.compare_digest(decoded.encode(), secret.encode())
        if kind == "bearer":
            if scheme.lower() == "bearer" and hmac.compare_digest(
                value.strip().encode(), secret.encode()
            ):
                return True
            # A browser cannot send the header: ?token=T once (the app then sets
            # a cookie), or that cookie.
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
            for given_token in [*query.get("token", []), _cookies(scope).get(TOKEN_COOKIE, "")]:
                if given_token and hmac.compare_digest(given_token.encode(), secret.encode()):
                    return True
            return False
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = [(b"content-type", b"text/plain; charset=utf-8")]
        if self.auth is not None and self.auth[0] == "basic":
            headers.append((b"www-authenticate", b'Basic realm="leaseq", charset="UTF-8"'))
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": b"401: credentials needed\n"})


def csrf_token(cookies: dict[str, str]) -> tuple[str, bool]:
    """The CSRF token of this browser, and whether it is new (then set the cookie)."""
    token = cookies.get(CSRF_COOKIE, "")
    if len(token) == 43 and token.replace("-", "").replace("_", "").isalnum():
        return token, False
    return secrets.token_urlsafe(32), True


def csrf_ok(cookies: dict[str, str], form_token: Any, origin: str | None, host: str) -> bool:
    """True when the form repeats the cookie's token and the Origin (if sent) is ours."""
    cookie = cookies.get(CSRF_COOKIE, "")
    if not cookie or not isinstance(form_token, str):
        return False
    if origin is not None:
        netloc = origin.split("://", 1)[-1].rstrip("/")
        if netloc != host:
            return False
    return hmac.compare_digest(cookie.encode(), form_token.encode())
