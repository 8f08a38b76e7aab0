"""Redis URLs: checking one before leaseq connects to it (passwords shown redacted)."""

from __future__ import annotations

import re
import urllib.parse

from leaseq.errors import InvalidArgument
from leaseq.observe.redact import redact, remember_secrets, userinfo

__all__ = ["check_url"]


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
    user = userinfo(url)
    if user is not None and any(c in user for c in "/?#"):
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
