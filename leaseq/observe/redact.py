"""Hiding passwords: ``redact`` is the one redaction function.

Every line leaseq prints or logs that may hold a URL or a server's message
goes through it; ``remember_secrets`` notes the passwords of each URL given
to leaseq so that they are hidden wherever they turn up.
"""

from __future__ import annotations

import re
import threading
import urllib.parse

__all__ = ["redact", "remember_secrets", "userinfo"]

# Everything between "scheme://" and the last "@" of the same word is
# userinfo: greedy, so a password with "@", "/" or ":" in it is covered whole.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)\S*@")
_SECRET_NAMES = ("password", "passwd", "pwd", "pass", "auth", "token", "secret")
_QUERY_SECRET = re.compile(
    r"(?i)\b((?:sentinel_)?(?:" + "|".join(_SECRET_NAMES) + r"))=[^&\s'\"),;]*"
)
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
    user = userinfo(url)
    if user is not None:
        found += [user, user.partition(":")[2]]
    query = urllib.parse.urlsplit(url).query if "?" in url else ""
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if key.lower().removeprefix("sentinel_") in _SECRET_NAMES:
            found.append(value)
    with _secrets_lock:
        for secret in found:
            for form in (secret, urllib.parse.unquote(secret)):
                if len(form) >= MIN_SECRET:
                    _secrets.add(form)


def userinfo(url: str) -> str | None:
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
