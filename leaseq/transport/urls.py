"""Redis URLs: checking them, connecting, and hiding the passwords they carry.

``redact`` is the one redaction function: every line leaseq prints or logs
that may hold a URL or a server's message goes through it.
"""

from __future__ import annotations

import re
import threading
import urllib.parse

from leaseq.errors import InvalidArgument

__all__ = ["check_url", "redact", "remember_secrets"]

# Everything between "scheme://" and the last "@" of the same word is
# userinfo: greedy, so a password with "@", "/" or ":" in it is covered whole.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)\S*@")
_QUERY_SECRET = re.compile(r"(?i)\b(password|passwd|pwd|pass|auth|token|secret)=[^&\s'\"),;]*")
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
MIN_SECRET = 3
"""Shorter passwords are not searched for in free text: they would blank out
ordinary words, and say next to nothing about the password anyway."""


def redact(text: str) -> str:
    """``text`` with every password hidden: a URL's userinfo, a ``password=``
    query value, and every password of a URL given to :func:`connect` in this
    process, as typed and percent-decoded. The one redaction function: every
    line leaseq prints or logs that may hold a URL or a server's message goes
    through it."""
    text = _USERINFO.sub(r"\1***@", str(text))
    text = _QUERY_SECRET.sub(r"\1=***", text)
    with _secrets_lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, "***")
    return text


def remember_secrets(url: str) -> None:
    """Note the passwords that ``url`` carries so :func:`redact` hides them
    wherever they turn up (say, a fragment echoed in a parser's error)."""
    found: list[str] = []
    userinfo = _userinfo(url)
    if userinfo is not None:
        found += [userinfo, userinfo.partition(":")[2]]
    query = urllib.parse.urlsplit(url).query if "?" in url else ""
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if key.lower() in ("password", "passwd", "pwd", "pass", "auth", "token", "secret"):
            found.append(value)
    with _secrets_lock:
        for secret in found:
            for form in (secret, urllib.parse.unquote(secret)):
                if len(form) >= MIN_SECRET:
                    _secrets.add(form)


def _userinfo(url: str) -> str | None:
    """The user:password part of ``url`` as a person meant it: everything up to
    the last ``@`` (a password may hold ``@``, ``/`` or ``:``), unless that
    ``@`` sits in the query (``?password=a@b``)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    words = rest.split()
    before = words[0].rsplit("@", 1)[0] if words and "@" in words[0] else None
    if before is not None and "?" in before and "=" in before[before.index("?") :]:
        head = before[: before.index("?")]
        before = head.rsplit("@", 1)[0] if "@" in head else None
    return before


def check_url(url: object) -> str:
    """``url`` as a Redis URL leaseq will connect to, or InvalidArgument naming
    what is wrong (the URL shown redacted). Refuses what redis-py would
    silently misread: an empty URL, a password with an unencoded ``/ ? #``
    (redis-py would take part of it for the host or db), a db that is not a
    number (``redis://host/abc`` would be db 0)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument(f"a Redis URL is needed, not {url!r}")
    remember_secrets(url)
    shown = redact(url)
    scheme, sep, _rest = url.partition("://")
    if not sep:
        raise InvalidArgument(f"bad Redis URL {shown!r}: it needs a scheme, e.g. redis://host")
    if scheme == "memory":
        return url
    if scheme not in ("redis", "rediss", "unix"):
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: the scheme must be redis://, rediss://, unix:// or memory://"
        )
    userinfo = _userinfo(url)
    if userinfo is not None and any(c in userinfo for c in "/?#"):
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: its user or password holds '/', '?' or '#'; "
            "percent-encode them (%2F, %3F, %23)"
        )
    if scheme != "unix":
        path = urllib.parse.urlsplit(url).path
        if path not in ("", "/") and not re.fullmatch(r"/\d+", urllib.parse.unquote(path)):
            raise InvalidArgument(
                f"bad Redis URL {shown!r}: the path must be a db number, "
                f"like /0, not {redact(path)!r}"
            )
    return url
