"""Running a Call on redis-py, and turning redis-py's errors into leaseq's.

Scripts run by SHA (EVALSHA); on NOSCRIPT — after SCRIPT FLUSH, a restart
or a failover to a fresh replica — the source is loaded and the call is
made again, so the next call just works.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from typing import Any

import redis.exceptions as rex

from ._core import Call, R
from .errors import DamagedKey, LeaseqWarning, ScriptError, ServerUnavailable

__all__ = [
    "arun",
    "await_replicas",
    "check_server_reply",
    "run",
    "translate_errors",
    "wait_replicas",
    "wake_timeout",
]


@contextlib.contextmanager
def translate_errors(script: str = "") -> Iterator[None]:
    """Map redis-py exceptions to leaseq's (the only place this happens).

    ``script`` names the Lua script being run, so an error says where.
    """
    try:
        yield
    except (rex.ConnectionError, rex.TimeoutError) as exc:
        raise ServerUnavailable(f"Redis is unavailable: {redact(str(exc))}") from None
    except rex.ResponseError as exc:
        text = str(exc)
        where = f"{script}.lua: " if script else ""
        if "WRONGTYPE" in text:
            raise DamagedKey(where + text) from None
        if "not an integer" in text:
            # HINCRBY on a counter an operator overwrote (say meta's seq):
            raise DamagedKey(
                f"{where}{text} (a counter in the queue's meta hash, or a count in a "
                "job row, was set to a non-integer by hand)"
            ) from None
        raise ScriptError(f"Redis refused a leaseq call: {where}{text}") from None


def redact(text: str) -> str:
    """Strip anything that looks like a password in a URL from a message."""
    return re.sub(r"(\w+://)([^@/\s]*)@", r"\1***@", text)


_PLAIN = "_leaseq_plain_scripts"
"""Set on a client whose server cannot compile a ``#!lua`` line (before Redis 7,
fakeredis): from then on it gets the scripts' plain twins (see ``scripts``)."""


def _no_shebang(exc: rex.ResponseError) -> bool:
    return "near '#'" in str(exc)


def run(client: Any, call: Call[R]) -> R:
    """Run one script call on a sync client (redis.Redis or RedisCluster)."""
    keys, script = call.keys, call.script
    with translate_errors(script.name):
        for plain in (getattr(client, _PLAIN, False), True):
            sha, source = (script.plain_sha, script.plain) if plain else (script.sha, script.source)
            try:
                try:
                    reply = client.evalsha(sha, len(keys), *keys, *call.args)
                except rex.NoScriptError:
                    client.script_load(source)
                    reply = client.evalsha(sha, len(keys), *keys, *call.args)
                break
            except rex.ResponseError as exc:
                if plain or not _no_shebang(exc):
                    raise
                setattr(client, _PLAIN, True)  # compiled nothing, so ran nothing
    return call.parse(reply)


async def arun(client: Any, call: Call[R]) -> R:
    """Run one script call on an async client (redis.asyncio Redis or RedisCluster).

    The same EVALSHA, NOSCRIPT reload, shebang fallback and error translation
    as :func:`run`.
    """
    keys, script = call.keys, call.script
    with translate_errors(script.name):
        for plain in (getattr(client, _PLAIN, False), True):
            sha, source = (script.plain_sha, script.plain) if plain else (script.sha, script.source)
            try:
                try:
                    reply = await client.evalsha(sha, len(keys), *keys, *call.args)
                except rex.NoScriptError:
                    await client.script_load(source)
                    reply = await client.evalsha(sha, len(keys), *keys, *call.args)
                break
            except rex.ResponseError as exc:
                if plain or not _no_shebang(exc):
                    raise
                setattr(client, _PLAIN, True)  # compiled nothing, so ran nothing
    return call.parse(reply)


def _wait_args(client: Any, key: str) -> dict[str, Any]:
    # WAIT counts the replicas of the connection's own node. A cluster client
    # sends key-less commands to a default node, so aim it at the key's node.
    if hasattr(client, "get_node_from_key"):
        return {"target_nodes": client.get_node_from_key(key)}
    return {}


def wait_replicas(client: Any, key: str, replicas: int, timeout_ms: int) -> int:
    """WAIT on the node that holds ``key``; how many replicas acknowledged."""
    with translate_errors():
        kwargs = _wait_args(client, key)
        return int(client.execute_command("WAIT", replicas, timeout_ms, **kwargs))


async def await_replicas(client: Any, key: str, replicas: int, timeout_ms: int) -> int:
    """:func:`wait_replicas` for redis.asyncio clients."""
    with translate_errors():
        kwargs = _wait_args(client, key)
        return int(await client.execute_command("WAIT", replicas, timeout_ms, **kwargs))


def wake_timeout(client: Any, timeout: float) -> float:
    """How long one BLPOP on the wake list may block: ``timeout``, kept under the
    client's socket timeout (if it has one) so a quiet queue never looks like a
    dead server, and at least 10 ms (BLPOP's 0 would mean forever)."""
    pool = getattr(client, "connection_pool", None)
    limit = getattr(pool, "connection_kwargs", {}).get("socket_timeout")
    if isinstance(limit, (int, float)) and limit > 0:
        timeout = min(timeout, limit * 0.8)
    return max(timeout, 0.01)


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
