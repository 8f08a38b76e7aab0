"""The embedded ``memory://`` store: fakeredis with lupa, in this process.

It runs the very same Lua scripts as a real server, so the demo and quick
experiments need no Redis. Data lives only as long as the process. Each
``memory://<name>`` is its own store; plain ``memory://`` is the default one.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["memory_client"]

_servers: dict[str, Any] = {}
_lock = threading.Lock()


def memory_client(url: str) -> Any:
    """A fakeredis client on the in-process server that ``url`` names."""
    try:
        import fakeredis
    except ImportError as exc:  # pragma: no cover - fakeredis is a dependency
        raise RuntimeError("memory:// needs fakeredis[lua]: pip install 'fakeredis[lua]'") from exc
    name = url[len("memory://") :].strip("/") or "default"
    with _lock:
        server = _servers.get(name)
        if server is None:
            server = _servers[name] = fakeredis.FakeServer()
    return fakeredis.FakeRedis(server=server)
