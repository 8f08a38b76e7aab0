"""The embedded ``memory://`` store: fakeredis with lupa, in this process.

It runs the very same Lua scripts as a real server, so the demo and quick
experiments need no Redis. It comes with the ``memory`` extra
(``pip install 'leaseq[memory]'``): a production install has no fakeredis.
Data lives only as long as the process. Each ``memory://<name>`` is its own
store; plain ``memory://`` is the default one.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

__all__ = ["async_memory_client", "forget", "memory_client"]

_servers: dict[str, Any] = {}
_lock = threading.Lock()


def _server(url: str) -> Any:
    try:
        import fakeredis

        importlib.import_module("lupa")  # fakeredis runs the scripts with it
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"memory:// needs the memory extra ({exc.name} is missing): "
            "pip install 'leaseq[memory]'",
            name=exc.name,
        ) from exc
    name = url[len("memory://") :].strip("/") or "default"
    with _lock:
        server = _servers.get(name)
        if server is None:
            server = _servers[name] = fakeredis.FakeServer()
    return server


def memory_client(url: str) -> Any:
    """A fakeredis client on the in-process server that ``url`` names."""
    server = _server(url)  # first: it says which extra is missing
    import fakeredis

    return fakeredis.FakeRedis(server=server)


def async_memory_client(url: str) -> Any:
    """An asyncio fakeredis client on the same in-process server as ``memory_client``."""
    server = _server(url)
    import fakeredis

    return fakeredis.FakeAsyncRedis(server=server)


def forget(url: str) -> None:
    """Let the in-process store ``url`` names go (``leaseq.testing.memory_queue``):
    its data is freed once no client holds it, and the next client of that URL
    starts a new, empty one."""
    name = url[len("memory://") :].strip("/") or "default"
    with _lock:
        _servers.pop(name, None)
