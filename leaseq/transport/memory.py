"""The embedded ``memory://`` store: fakeredis with lupa, in this process.

It runs the very same Lua scripts as a real server, so the demo and quick
experiments need no Redis. Data lives only as long as the process. Each
``memory://<name>`` is its own store; plain ``memory://`` is the default one.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["async_memory_client", "memory_client"]

_servers: dict[str, Any] = {}
_lock = threading.Lock()


def _server(url: str) -> Any:
    try:
        import fakeredis
    except ImportError as exc:  # pragma: no cover - fakeredis is a dependency
        raise RuntimeError("memory:// needs fakeredis[lua]: pip install 'fakeredis[lua]'") from exc
    name = url[len("memory://") :].strip("/") or "default"
    with _lock:
        server = _servers.get(name)
        if server is None:
            server = _servers[name] = fakeredis.FakeServer()
    return server


def memory_client(url: str) -> Any:
    """A fakeredis client on the in-process server that ``url`` names."""
    import fakeredis

    return fakeredis.FakeRedis(server=_server(url))


def async_memory_client(url: str) -> Any:
    """An asyncio fakeredis client on the same in-process server as ``memory_client``."""
    import fakeredis

    return fakeredis.FakeAsyncRedis(server=_server(url))
