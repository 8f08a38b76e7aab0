"""Clients from URLs: ``redis://``, ``rediss://``, ``unix://``, ``memory://``,
and a primary found through Sentinel (``redis+sentinel://``, ``rediss+sentinel://``).

One function for the sync and the asyncio client, so both read a URL the
same way and refuse the same bad ones.
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis.exceptions as rex
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelPool
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool

from leaseq.errors import AuthError, InvalidArgument, LeaseqError
from leaseq.transport import client as _redis
from leaseq.transport.memory import async_memory_client, memory_client
from leaseq.transport.urls import SENTINEL_SCHEMES, sentinel_target

__all__ = ["connect", "recheck_primary", "recheck_primary_async", "sentinel_masters"]

SENTINEL_ASK_TIMEOUT = 2.0
"""Seconds ``sentinel_masters`` waits for each Sentinel (to connect, then to answer)."""


def connect(url: str, *, asyncio: bool = False) -> Any:
    """A redis-py client for ``url`` (a ``redis.asyncio`` one with ``asyncio=True``).

    ``memory://<name>`` is the embedded in-process store. The URL is checked
    first (``_redis.check_url``: a bad database number, an empty URL).
    A Sentinel URL gives a client of the service's primary: each new
    connection asks the Sentinels where the primary is, and a connection to a
    primary that was demoted is dropped at its first READONLY reply (redis-py's
    Sentinel pool), so after a failover the next call reaches the new one.
    Raises InvalidArgument.
    """
    url = _redis.check_url(url)
    if url.startswith("memory://"):
        return async_memory_client(url) if asyncio else memory_client(url)
    if url.partition("://")[0] in SENTINEL_SCHEMES:
        return _sentinel_primary(url, asyncio)
    if asyncio:
        import redis.asyncio as client_lib
    else:
        import redis as client_lib  # type: ignore[no-redef]
    try:
        return client_lib.Redis.from_url(url)
    except ValueError as exc:
        raise InvalidArgument(
            f"bad Redis URL {_redis.redact(url)!r}: {_redis.redact(str(exc))}"
        ) from None


def _sentinel_primary(url: str, asyncio: bool) -> Any:
    target = sentinel_target(url)
    kind: Any
    retry: Any
    if asyncio:
        from redis.asyncio.retry import Retry as AsyncRetry

        kind, retry = _AsyncSentinel, AsyncRetry(NoBackoff(), 0)
    else:
        kind, retry = _SyncSentinel, Retry(NoBackoff(), 0)
    # One try per Sentinel per lookup: the lookup moves on to the next
    # Sentinel itself, and the connection to the primary that asked already
    # retries with backoff (a Sentinel that refuses the password would
    # otherwise be retried for ~10 s each, in every lookup).
    sentinel_kwargs = {"retry": retry, **target.sentinel_kwargs}
    sentinel = kind(list(target.sentinels), sentinel_kwargs=sentinel_kwargs, **target.redis_kwargs)
    return sentinel.master_for(target.service)


class _SyncSentinel(Sentinel):
    """redis-py's Sentinel, saying why no primary was found: redis-py 5.0
    hides each Sentinel's error, 8.x prints whole client reprs; a refused
    Sentinel password becomes an AuthError (fatal), not an outage retried
    with backoff forever."""

    def discover_master(self, service_name: str) -> Any:
        try:
            return super().discover_master(service_name)  # type: ignore[no-untyped-call,unused-ignore]
        except MasterNotFoundError:
            found = [_probe(s) for s in self.sentinels]
        raise _no_primary(service_name, self.sentinels, found) from None


class _AsyncSentinel(AsyncSentinel):
    """The same for ``redis.asyncio``."""

    async def discover_master(self, service_name: str) -> Any:
        try:
            return await super().discover_master(service_name)
        except MasterNotFoundError:
            found = [await _async_probe(s) for s in self.sentinels]
        raise _no_primary(service_name, self.sentinels, found) from None


def _probe(sentinel: Any) -> BaseException | None:
    try:
        sentinel.ping()
    except Exception as exc:  # reported, by kind, in the error raised
        return exc
    return None


async def _async_probe(sentinel: Any) -> BaseException | None:
    try:
        await sentinel.ping()
    except Exception as exc:  # reported, by kind, in the error raised
        return exc
    return None


def _no_primary(
    service: str, sentinels: list[Any], errors: list[BaseException | None]
) -> Exception:
    refused = [e for e in errors if e is not None and isinstance(_redis.translate(e), AuthError)]
    if refused:
        return AuthError(
            "a Redis Sentinel refused the Sentinel credentials (give them as "
            "sentinel_username= and sentinel_password= in the URL's query): "
            + _redis.redact(str(refused[0]))
        )
    said = []
    for sentinel, error in zip(sentinels, errors, strict=True):
        kwargs = sentinel.connection_pool.connection_kwargs
        where = f"{kwargs.get('host')}:{kwargs.get('port')}"
        said.append(f"{where} {'is unreachable' if error else 'knows no such primary now'}")
    return MasterNotFoundError(
        f"no Redis Sentinel names a primary for {service!r}: {'; '.join(said)}"
    )


def sentinel_masters(url: str) -> tuple[str, list[tuple[str, dict[str, str] | None]]]:
    """The service a Sentinel URL names, and what each Sentinel it lists says
    of it (``SENTINEL MASTER``: ``quorum``, ``down-after-milliseconds``,
    ``num-other-sentinels``, ... as text) by ``host:port``; None for one that
    does not answer (unreachable, refuses the Sentinel credentials, or does not
    monitor the service). One try each, ``SENTINEL_ASK_TIMEOUT`` at most; for
    ``leaseq doctor``. Raises InvalidArgument for a bad URL."""
    import redis

    target = sentinel_target(url)
    kwargs: dict[str, Any] = {
        "socket_timeout": SENTINEL_ASK_TIMEOUT,
        "socket_connect_timeout": SENTINEL_ASK_TIMEOUT,
        **target.sentinel_kwargs,
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": True,
    }
    found: list[tuple[str, dict[str, str] | None]] = []
    for host, port in target.sentinels:
        client = redis.Redis(host=host, port=port, **kwargs)
        try:
            reply: Any = client.execute_command(  # type: ignore[no-untyped-call]
                "SENTINEL", "MASTER", target.service
            )
        except (rex.RedisError, OSError):  # no answer is the finding itself
            reply = None
        finally:
            client.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        found.append((where, _text_fields(reply)))
    return target.service, found


def _text_fields(reply: Any) -> dict[str, str] | None:
    """A ``SENTINEL MASTER`` reply as ``{field: text}``: redis-py parses it into a
    dict of typed values, or leaves the flat list of pairs."""
    if reply is None:
        return None
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    return {str(k): str(v) for k, v in pairs}


def recheck_primary(client: Any) -> None:
    """After a call on ``client`` failed as unavailable or busy: if it is a
    Sentinel-managed primary's client, ask Sentinel where the primary is now.
    If it moved, redis-py closes the idle connections to the old one and drops
    the busy ones as they come back, so the next call reaches the new one.

    redis-py only asks Sentinel when it opens a connection, and drops one by
    itself only on READONLY; a pooled connection to an old primary that
    answers NOREPLICAS (``min-replicas-to-write``) or MASTERDOWN instead
    would be used again and again until Sentinel demoted that server, ~10 s
    later. An unreachable Sentinel changes nothing here: the call's own error
    is what the caller sees and backs off on.
    """
    pool = getattr(client, "connection_pool", None)
    if isinstance(pool, SentinelConnectionPool) and pool.is_master:
        with contextlib.suppress(rex.RedisError, LeaseqError):
            pool.get_master_address()  # type: ignore[no-untyped-call]


async def recheck_primary_async(client: Any) -> None:
    """:func:`recheck_primary` for a ``redis.asyncio`` client."""
    pool = getattr(client, "connection_pool", None)
    if isinstance(pool, AsyncSentinelPool) and pool.is_master:
        with contextlib.suppress(rex.RedisError, LeaseqError):
            await pool.get_master_address()  # type: ignore[no-untyped-call]
