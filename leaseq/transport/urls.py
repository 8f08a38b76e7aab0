"""Redis URLs: checking one before leaseq connects to it (passwords shown redacted),
and reading a Sentinel URL into the parts a Sentinel client is made of."""

from __future__ import annotations

import dataclasses
import math
import re
import urllib.parse
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.observe.redact import redact, remember_secrets, userinfo

__all__ = ["SENTINEL_SCHEMES", "SentinelTarget", "check_url", "sentinel_target"]

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
"""A primary found through Redis Sentinel; ``rediss+`` speaks TLS to the
Sentinels and to the data nodes alike."""
SENTINEL_PORT = 26379
_SENTINEL_AUTH = ("sentinel_username", "sentinel_password")


_SECONDS = frozenset({"socket_timeout", "socket_connect_timeout", "health_check_interval"})
"""URL options redis-py reads as seconds."""


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
    if scheme not in ("redis", "rediss", "unix", *SENTINEL_SCHEMES):
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: the scheme must be redis://, rediss://, unix://, "
            "redis+sentinel://, rediss+sentinel:// or memory://"
        )
    user = userinfo(url)
    if user is not None and any(c in user for c in "/?#"):
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: its user or password holds '/', '?' or '#'; "
            "percent-encode them (%2F, %3F, %23)"
        )
    _check_timeouts(url, shown)
    if scheme in SENTINEL_SCHEMES:
        sentinel_target(url)
    elif scheme != "unix":
        path = urllib.parse.urlsplit(url).path
        if path not in ("", "/") and not re.fullmatch(r"/\d+", urllib.parse.unquote(path)):
            raise InvalidArgument(
                f"bad Redis URL {shown!r}: the path must be a db number, "
                f"like /0, not {redact(path)!r}"
            )
    return url


def _check_timeouts(url: str, shown: str) -> None:
    """Refuse a timeout option of ``url`` that is not a finite number of seconds."""
    for name, values in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items():
        # redis-py reads these as floats and only fails at the first call (or
        # never: nan): a timeout must be a finite number of seconds > 0.
        if name not in _SECONDS:
            continue
        least = 0.0 if name == "health_check_interval" else None  # 0: no checks
        for value in values:
            try:
                seconds = float(value)
            except ValueError:
                seconds = math.nan
            if not math.isfinite(seconds) or seconds < 0 or (least is None and seconds == 0):
                raise InvalidArgument(
                    f"bad Redis URL {shown!r}: {name} must be a finite number of "
                    f"seconds > 0, not {value!r}"
                )


@dataclasses.dataclass(frozen=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names: the Sentinels to ask, the
    service (the primary's name in Sentinel), and the keyword arguments of the
    connections to the data nodes (``redis_kwargs``, with the URL's user,
    password, db and options) and to the Sentinels (``sentinel_kwargs``: their
    own user and password, the socket options, TLS)."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    redis_kwargs: dict[str, Any]
    sentinel_kwargs: dict[str, Any]


def sentinel_target(url: str) -> SentinelTarget:
    """Read ``redis+sentinel://[user:password@]host1[:port1][,host2[:port2]...]/service[/db][?options]``.

    The user and password before the hosts are the data nodes' (the primary's
    and replicas' ``requirepass``/ACL user); the Sentinels' own are the
    options ``sentinel_username`` and ``sentinel_password``. A port defaults
    to 26379, the db to 0. Every other option is one redis-py reads from a
    ``redis://`` URL (``socket_timeout``, ``ssl_cert_reqs``, ...); the
    ``socket_*`` ones apply to the Sentinels too, and so does TLS with
    ``rediss+sentinel://``. Raises InvalidArgument (URL shown redacted).
    """
    from redis.connection import parse_url

    remember_secrets(url)
    shown = redact(url)
    scheme, _, rest = url.partition("://")
    user = userinfo(url)
    if user is not None:
        rest = rest[len(user) + 1 :]
    hosts, _, tail = rest.partition("/")
    tail, _, query = tail.partition("?")
    if "?" in hosts:
        hosts, _, query = hosts.partition("?")
    sentinels = tuple(_host_port(part, shown) for part in hosts.split(","))
    service, _, db = urllib.parse.unquote(tail).partition("/")
    if not service:
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: name the Sentinel service after the hosts, "
            "like redis+sentinel://host:26379/mymaster/0"
        )
    if db and not re.fullmatch(r"\d+", db):
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: after the service comes the db number, "
            f"like /mymaster/0, not {redact(db)!r}"
        )
    options = urllib.parse.parse_qsl(query, keep_blank_values=True)
    sentinel_auth = {k[len("sentinel_") :]: v for k, v in options if k in _SENTINEL_AUTH}
    rest_query = urllib.parse.urlencode([(k, v) for k, v in options if k not in _SENTINEL_AUTH])
    tls = scheme == "rediss+sentinel"
    plain = f"{'rediss' if tls else 'redis'}://{user + '@' if user is not None else ''}"
    plain += f"localhost/{db or 0}" + (f"?{rest_query}" if rest_query else "")
    try:
        redis_kwargs: dict[str, Any] = parse_url(plain)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise InvalidArgument(f"bad Redis URL {shown!r}: {redact(str(exc))}") from None
    for key in ("host", "port", "path", "connection_class"):
        redis_kwargs.pop(key, None)
    sentinel_kwargs = {k: v for k, v in redis_kwargs.items() if k.startswith(("socket_", "ssl_"))}
    sentinel_kwargs.update(sentinel_auth)
    if tls:
        redis_kwargs["ssl"] = sentinel_kwargs["ssl"] = True
    return SentinelTarget(sentinels, service, redis_kwargs, sentinel_kwargs)


def _host_port(part: str, shown: str) -> tuple[str, int]:
    host, port = part, ""
    if part.startswith("["):  # an IPv6 address: [::1]:26379
        host, _, after = part[1:].partition("]")
        port = after[1:] if after.startswith(":") else after
    elif ":" in part:
        host, _, port = part.rpartition(":")
    if not host or (port and not port.isdigit()) or (port and not 0 < int(port) < 65536):
        raise InvalidArgument(
            f"bad Redis URL {shown!r}: {part!r} is not a Sentinel's host[:port] "
            "(the hosts are separated by commas)"
        )
    return host, int(port) if port else SENTINEL_PORT
