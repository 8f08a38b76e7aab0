"""Clients from URLs: ``redis://``, ``rediss://``, ``unix://`` and ``memory://``.

One function for the sync and the asyncio client, so both read a URL the
same way and refuse the same bad ones.
"""

from __future__ import annotations

from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.transport import client as _redis
from leaseq.transport.memory import async_memory_client, memory_client

__all__ = ["connect"]


def connect(url: str, *, asyncio: bool = False) -> Any:
    """A redis-py client for ``url`` (a ``redis.asyncio`` one with ``asyncio=True``).

    ``memory://<name>`` is the embedded in-process store. The URL is checked
    first (``_redis.check_url``: a bad database number, an empty URL).
    Raises InvalidArgument.
    """
    url = _redis.check_url(url)
    if url.startswith("memory://"):
        return async_memory_client(url) if asyncio else memory_client(url)
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
