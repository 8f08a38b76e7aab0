"""Running a Call on redis-py, and turning redis-py's errors into leaseq's.

Scripts run by SHA (EVALSHA); on NOSCRIPT — after SCRIPT FLUSH, a restart
or a failover to a fresh replica — the source is loaded and the call is
made again, so the next call just works.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import warnings
from collections.abc import Iterator
from typing import Any

import redis as redis_lib
import redis.exceptions as rex
from redis.asyncio.sentinel import MasterNotFoundError as AsyncNoPrimary
from redis.sentinel import MasterNotFoundError

from leaseq.errors import (
    AuthError,
    DamagedKey,
    InvalidArgument,
    LeaseqError,
    LeaseqWarning,
    ScriptError,
    ServerBusy,
    ServerFull,
    ServerUnavailable,
)
from leaseq.observe.redact import redact
from leaseq.transport.urls import check_url

__all__ = [
    "auth_error",
    "check_server_reply",
    "check_url",
    "read_timeout",
    "redact",
    "translate",
    "translate_errors",
    "wake_timeout",
]


# Server error codes (the first word of an error reply, or a word inside a
# script's wrapped error on older servers) that mean "the server cannot do
# this now": transient states that workers retry with backoff.
_BUSY_CODES = frozenset(
    (
        "READONLY",
        "BUSY",
        "LOADING",
        "TRYAGAIN",
        "CLUSTERDOWN",
        "MASTERDOWN",
        "MISCONF",
        "NOREPLICAS",
        "UNBLOCKED",
        "ASK",
        "MOVED",
    )
)
_AUTH_CODES = frozenset(("WRONGPASS", "NOAUTH", "NOPERM"))
_CODE = re.compile(
    r"(?<![A-Za-z])(OOM|WRONGPASS|NOAUTH|NOPERM|" + "|".join(sorted(_BUSY_CODES)) + r")(?= )"
)
_AUTH_HINT = "give them in the URL, as USER:PASSWORD@ before the host, or in $LEASEQ_URL"


def _rex(name: str) -> Any:
    """A redis-py exception class by name, or an empty tuple where this
    redis-py version has none (the supported range is 5.0 .. 8.x)."""
    return getattr(rex, name, ())


# The code of each error class redis-py's parser picks by it (for versions
# that keep no status_code on the exception).
_CLASS_CODES = {
    "OutOfMemoryError": "OOM",
    "ReadOnlyError": "READONLY",
    "NoPermissionError": "NOPERM",
    "BusyLoadingError": "LOADING",
    "TryAgainError": "TRYAGAIN",
    "MasterDownError": "MASTERDOWN",
    "ClusterDownError": "CLUSTERDOWN",
    "MovedError": "MOVED",
    "AskError": "ASK",
    "ClusterCrossSlotError": "CROSSSLOT",
    "ExecAbortError": "EXECABORT",
    "NoScriptError": "NOSCRIPT",
}


_KNOWN_CODES = frozenset(_CLASS_CODES.values()) | _AUTH_CODES | _BUSY_CODES | {"OOM"}


def _code(exc: BaseException, text: str) -> str:
    # redis-py strips the code of the errors it knows (WRONGPASS, OOM, ...)
    # from the message and keeps it in status_code (redis-py >= 6); a wrapped
    # script error ("ERR Error running script ...: OOM command not allowed")
    # carries it inside.
    # redis-py 8.2 keeps any first word there ("ACL failure in script: ..."
    # gives "ACL"): only a code leaseq knows counts; the text decides the rest.
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code in _KNOWN_CODES:
        return code
    for klass in type(exc).__mro__:
        if klass.__name__ in _CLASS_CODES:
            return _CLASS_CODES[klass.__name__]
    head = text.split(" ", 1)[0]
    if head in _BUSY_CODES or head in _AUTH_CODES or head == "OOM":
        return head
    found = _CODE.search(text)
    if found:
        return found.group(1)
    # Redis 7.0 refuses a command a script runs for a user without it as a
    # plain ERR, with no NOPERM code ("The user executing the script can't
    # run this command"); Valkey 8 as "ACL failure in script: User x has no
    # permissions to run the 'hset' command". It is the same missing permission.
    refused = ("user executing the script can't run", "has no permissions to run")
    return "NOPERM" if any(words in text for words in refused) else ""


def auth_error(exc: BaseException) -> AuthError:
    """The AuthError for a refused login or a missing permission, with a hint."""
    text = redact(str(exc))
    code = _code(exc, text)
    low = text.lower()
    if code == "NOPERM" or isinstance(exc, _rex("NoPermissionError")):
        return AuthError(
            f"Redis user lacks a permission leaseq needs (NOPERM: {text}); grant the user "
            "the commands and the prefix's keys it needs (docs/reliability.md, 'Security')"
        )
    if "without any password configured" in low or "no password is set" in low:
        return AuthError(
            f"the URL gives a password but this Redis has none set ({text}); "
            "drop the password from the URL"
        )
    if code == "NOAUTH" or any(
        needle in low
        for needle in ("hello must be called", "authentication required", "unauthenticated")
    ):
        return AuthError(f"Redis needs a password and none was given (NOAUTH): {_AUTH_HINT}")
    return AuthError(
        f"Redis refused the user name or password (WRONGPASS: {text}); check the "
        f"credentials: {_AUTH_HINT}"
    )


@contextlib.contextmanager
def translate_errors(script: str = "") -> Iterator[None]:
    """Map redis-py exceptions to leaseq's (the only place this happens).

    Every redis-py exception becomes a leaseq one, by class first and then by
    the server's error code:

    - refused credentials or a missing ACL permission: ``AuthError`` (fatal);
    - a full server (OOM): ``ServerFull``;
    - a server that cannot serve the call now (READONLY, BUSY, LOADING,
      TRYAGAIN, CLUSTERDOWN, MASTERDOWN, MISCONF, NOREPLICAS, ASK/MOVED left
      over after redis-py's own redirects): ``ServerBusy`` (transient);
    - no connection, a timeout, an unreadable reply, no node for a slot, a
      cluster that cannot be reached: ``ServerUnavailable``;
    - a key of the wrong type, a counter that is not an integer: ``DamagedKey``;
    - an argument redis-py cannot send (``DataError``): ``InvalidArgument``;
    - anything else the server refused: ``ScriptError``.

    ``script`` names the Lua script being run, so an error says where.
    """
    try:
        yield
    except Exception as exc:
        translated = translate(exc, script)
        if translated is None:
            raise
        raise translated from None


def translate(exc: BaseException, script: str = "") -> LeaseqError | None:
    """The leaseq error for a redis-py exception; None for anything else."""
    if isinstance(exc, LeaseqError):
        return None
    where = f"{script}.lua: " if script else ""
    text = redact(str(exc))
    name = type(exc).__name__
    found = _connection_error(exc, text)
    if found is not None:
        return found
    if isinstance(exc, _rex("DataError")):
        return InvalidArgument(f"redis-py cannot send this argument: {text}")
    if isinstance(exc, rex.ResponseError):
        return _response_error(exc, text, where)
    if isinstance(exc, _rex("ClusterError")):
        return ServerBusy(f"Redis Cluster error: {text or name}")
    if isinstance(exc, _rex("RedisClusterException")):
        return ServerUnavailable(f"Redis Cluster is unavailable: {text or name}")
    if isinstance(exc, rex.RedisError):
        return ScriptError(f"redis-py failed a leaseq call: {where}{name}: {text}")
    return None


_UNSENT = (
    "connecting to",
    "Timeout connecting",
    "while writing to socket",
    "Timeout writing",
    "Connection has data",
    "Connection not ready",
)
"""What redis-py says when a command never reached the server whole: it failed
to connect, or to write (a server gets a command whole before running it). A
failed read says nothing: the call may have run, its reply lost. (No Sentinel
naming a primary, ``MasterNotFoundError``, is a failed connect too.)"""
_NO_PRIMARY = (MasterNotFoundError, AsyncNoPrimary)


def _connection_error(exc: BaseException, text: str) -> LeaseqError | None:
    """The leaseq error for a refused login, a server not ready, a full pool, a lost
    connection or an unreadable reply; None for any other error."""
    auth = (
        _rex("AuthenticationError"),
        _rex("AuthorizationError"),
        _rex("AuthenticationWrongNumberOfArgsError"),
        _rex("NoPermissionError"),
        _rex("ExternalAuthProviderError"),
    )
    if isinstance(exc, auth):
        return auth_error(exc)
    if isinstance(exc, _rex("BusyLoadingError")):
        return ServerBusy(f"Redis is loading its data set (LOADING), try again: {text}")
    if isinstance(exc, _rex("SlotNotCoveredError")):
        return ServerBusy(f"no Redis Cluster node serves this slot now: {text}")
    if isinstance(exc, _rex("MaxConnectionsError")):
        error = ServerUnavailable(f"the client's connection pool is exhausted: {text}")
        error.not_run = True
        return error
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError)):
        error = ServerUnavailable(f"Redis is unavailable: {text}")
        error.not_run = isinstance(exc, _NO_PRIMARY) or any(m in text for m in _UNSENT)
        return error
    if isinstance(exc, _rex("InvalidResponse")):
        return ServerUnavailable(
            f"Redis sent a reply that cannot be read ({text}): is this a Redis server, "
            "and does the URL's scheme (redis:// or rediss://) match its TLS setting?"
        )
    return None


def _response_error(exc: BaseException, text: str, where: str) -> LeaseqError:
    code = _code(exc, text)
    if code == "OOM" or isinstance(exc, _rex("OutOfMemoryError")):
        return ServerFull(
            f"Redis is full and refused the write (OOM, over maxmemory): {where}{text}; "
            "drain or purge jobs, or raise maxmemory"
        )
    if code in _AUTH_CODES or "unauthenticated" in text:
        # "Protocol error: unauthenticated multibulk length": a server with a
        # password cuts a long command from a client that never logged in.
        return auth_error(exc)
    if code in _BUSY_CODES or isinstance(
        exc, (_rex("ReadOnlyError"), _rex("TryAgainError"), _rex("AskError"))
    ):
        return ServerBusy(f"Redis cannot serve this call now ({code}): {where}{text}")
    if "WRONGTYPE" in text:
        return DamagedKey(where + text)
    if "not an integer" in text:
        # HINCRBY on a counter an operator overwrote (say meta's seq):
        return DamagedKey(
            f"{where}{text} (a counter in the queue's meta hash, or a count in a "
            "job row, was set to a non-integer by hand)"
        )
    if code and not text.startswith(code):
        text = f"{code} {text}"  # redis-py strips the codes it knows
    return ScriptError(f"Redis refused a leaseq call: {where}{text}")


def wake_timeout(client: Any, timeout: float) -> float:
    """How long one BLPOP on the wake list may block: ``timeout``, kept under the
    client's real read timeout (:func:`read_timeout`) so a quiet queue never
    looks like a dead server, and at least 10 ms (BLPOP's 0 would mean forever)."""
    limit = read_timeout(client)
    if limit is not None:
        # Room for the round trip and for the server's own lateness: Redis
        # ends a BLPOP on its cron tick (hz 10), up to ~100 ms after the
        # timeout, and a loaded client host adds its own. A fifth of the limit,
        # at least 250 ms (150 ms left a 0.4 s limit 50 ms to spare, and a
        # busy CI box overran it), at most a second.
        timeout = min(timeout, limit - max(min(limit * 0.2, 1.0), 0.25))
    return max(timeout, 0.01)


def read_timeout(client: Any) -> float | None:
    """The socket (read) timeout, in seconds, that a command on ``client`` really
    gets; None when reads wait forever. The shortest one when a cluster's
    nodes differ.

    redis-py keeps it in different places across versions: 5.x puts
    ``socket_timeout`` (default None) in the pool's ``connection_kwargs``;
    8.x leaves it out of them when the client comes from ``from_url`` and the
    connection class supplies its own default of 5 s (keeping a copy as
    ``orig_socket_timeout``). So an explicit ``socket_timeout`` wins, else the
    connection class's own default, else ``orig_socket_timeout``. Covers
    ``redis.Redis``, ``redis.asyncio.Redis`` and both ``RedisCluster``s.
    """
    limits = [_limit(kwargs, cls) for kwargs, cls in _connection_settings(client)]
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def _connection_settings(client: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if isinstance(kwargs, dict):  # redis.Redis, redis.asyncio.Redis
        yield kwargs, getattr(pool, "connection_class", None)
    nodes: list[Any] = []
    manager = getattr(client, "nodes_manager", None)
    if manager is not None:  # both RedisClusters: the nodes known so far
        nodes += list(getattr(manager, "nodes_cache", {}).values())
        nodes += list(getattr(manager, "startup_nodes", {}).values())
        kwargs = getattr(manager, "connection_kwargs", None)
        if isinstance(kwargs, dict):  # what a node not yet met will get
            yield kwargs, kwargs.get("connection_class") or _default_connection_class(client)
    for node in nodes:
        inner = getattr(node, "redis_connection", None)  # sync cluster: a Redis per node
        if inner is not None:
            yield from _connection_settings(inner)
        kwargs = getattr(node, "connection_kwargs", None)  # async cluster node
        if isinstance(kwargs, dict):
            yield kwargs, getattr(node, "connection_class", None)


def _default_connection_class(client: Any) -> Any:
    if type(client).__module__.startswith("redis.asyncio"):
        import redis.asyncio.connection as aconn

        return aconn.Connection
    return redis_lib.connection.Connection


def _limit(kwargs: dict[str, Any], cls: Any) -> float | None:
    if "socket_timeout" in kwargs:
        value = kwargs["socket_timeout"]
    else:
        value = _class_default(cls)
        if value is _UNKNOWN:
            value = kwargs.get("orig_socket_timeout")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


_UNKNOWN = object()


def _class_default(cls: Any) -> Any:
    """The default ``socket_timeout`` of a connection class's constructor
    (looked up along its bases, as subclasses pass ``**kwargs`` on)."""
    for klass in getattr(cls, "__mro__", ()):
        init = vars(klass).get("__init__")
        if init is None:
            continue
        try:
            param = inspect.signature(init).parameters.get("socket_timeout")
        except (TypeError, ValueError):
            continue
        if param is not None and param.default is not inspect.Parameter.empty:
            return param.default
    return _UNKNOWN


def check_server_reply(policy: Any) -> None:
    """Warn when the server may evict keys: an evicting Redis drops jobs silently."""
    if isinstance(policy, dict):
        value = policy.get("maxmemory-policy") or policy.get(b"maxmemory-policy")
    else:
        value = policy
    if isinstance(value, bytes):
        value = value.decode()
    if value and value != "noeviction":
        warnings.warn(
            f"Redis maxmemory-policy is {value!r}: under memory pressure the server "
            "may evict job rows and lose jobs; set it to 'noeviction'",
            LeaseqWarning,
            stacklevel=4,
        )
