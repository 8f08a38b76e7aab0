"""``leaseq doctor``: the server settings that matter to a job store, one
verdict each (eviction, persistence, replicas, split-brain writes, memory,
script time limit, cluster mode).

``diagnose`` is pure: it reads what ``gather`` fetched (INFO, and CONFIG GET
where the server allows it — managed services often refuse it, and then the
verdict says "unknown"). docs/reliability.md explains what each setting buys.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from leaseq.errors import AuthError, ScriptError
from leaseq.transport import client as _redis

__all__ = ["Finding", "diagnose", "doctor", "gather"]

LEVELS = ("ok", "note", "warn", "bad")
CONFIG_KEYS = (
    "maxmemory-policy",
    "maxmemory",
    "appendonly",
    "appendfsync",
    "save",
    "min-replicas-to-write",
    "min-replicas-max-lag",
    "busy-reply-threshold",
    "lua-time-limit",
)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One setting's verdict: ``level`` is ok, note, warn or bad."""

    level: str
    topic: str
    text: str


def gather(client: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """INFO (all sections) and the CONFIG values of ``CONFIG_KEYS`` that the
    server lets us read (a key it refuses or lacks is left out)."""
    with _redis.translate_errors():
        info = dict(client.info("everything"))
    config: dict[str, str] = {}
    for key in CONFIG_KEYS:
        try:
            with _redis.translate_errors():
                got = client.config_get(key)
        except (ScriptError, AuthError):  # CONFIG refused (managed, ACL)
            continue
        for name, value in got.items():
            name = name.decode() if isinstance(name, bytes) else str(name)
            config[name] = value.decode() if isinstance(value, bytes) else str(value)
    return info, config


def diagnose(info: dict[str, Any], config: dict[str, str]) -> list[Finding]:
    """The verdicts, most important first."""

    def setting(key: str, info_key: str | None = None) -> str | None:
        if key in config:
            return config[key]
        value = info.get(info_key or key.replace("-", "_"))
        return None if value is None else str(value)

    found = [_role(info)]
    found.append(_eviction(setting("maxmemory-policy")))
    found.append(
        _persistence(setting("appendonly", "aof_enabled"), setting("appendfsync"), info, config)
    )
    found.extend(_replicas(info, setting("min-replicas-to-write")))
    found.append(_memory(info, setting("maxmemory")))
    found.append(_script_limit(setting("busy-reply-threshold") or setting("lua-time-limit")))
    found.append(_cluster(info))
    return found


def _role(info: dict[str, Any]) -> Finding:
    name = "Valkey" if "valkey_version" in info else "Redis"
    version = info.get("valkey_version") or info.get("redis_version", "?")
    if info.get("role") == "slave":
        return Finding("bad", "role", f"{name} {version}, a replica: writes fail; use the primary")
    return Finding("ok", "role", f"{name} {version}, a primary")


def _eviction(policy: str | None) -> Finding:
    if policy is None:
        return Finding("warn", "eviction", "maxmemory-policy unknown; it must be noeviction")
    if policy == "noeviction":
        return Finding("ok", "eviction", "noeviction: a full server refuses writes")
    if policy.startswith("volatile"):
        return Finding("warn", "eviction", f"{policy}: rows with a TTL may go; use noeviction")
    return Finding("bad", "eviction", f"{policy}: a full server deletes jobs; use noeviction")


def _persistence(
    aof: str | None, fsync: str | None, info: dict[str, Any], config: dict[str, str]
) -> Finding:
    save = config.get("save")
    if aof in ("yes", "1"):
        text = {
            "always": "AOF always: a restart keeps every acknowledged write",
            "everysec": "AOF everysec: a crash loses up to ~1 s of writes",
            "no": "AOF, fsync no: a crash loses up to ~30 s of writes",
        }.get(fsync or "", "AOF on, fsync policy unknown")
        return Finding("ok" if fsync == "always" else "note", "persistence", text)
    if save is None and aof is None:
        return Finding("warn", "persistence", "unknown (CONFIG refused): ask what a restart keeps")
    if save:
        return Finding("warn", "persistence", "RDB only: a restart loses writes since the dump")
    return Finding("bad", "persistence", "none: a restart loses every job; set appendonly yes")


def _replicas(info: dict[str, Any], min_replicas: str | None) -> list[Finding]:
    if info.get("role") == "slave":
        return []
    n = int(info.get("connected_slaves", 0) or 0)
    if n == 0:
        return [Finding("warn", "replicas", "none: durable=N fails; a lost server loses its jobs")]
    lags = [
        int(v.get("lag", 0))
        for k, v in info.items()
        if k.startswith("slave") and k[5:].isdigit() and isinstance(v, dict)
    ]
    lag = f", lag up to {max(lags)} s" if lags else ""
    found = [Finding("ok", "replicas", f"{n}{lag}: durable=1..{n} can be met")]
    if min_replicas in (None, "0"):
        text = "min-replicas-to-write 0: a cut-off primary loses writes"
        found.append(Finding("warn", "split brain", text))
    else:
        text = f"min-replicas-to-write {min_replicas}: a cut-off primary refuses"
        found.append(Finding("ok", "split brain", text))
    return found


def _memory(info: dict[str, Any], maxmemory: str | None) -> Finding:
    used = int(info.get("used_memory", 0) or 0)
    limit = int(maxmemory or 0)
    if limit == 0:
        return Finding("note", "memory", f"{_mb(used)} used, no maxmemory: the OS may kill Redis")
    share = used / limit
    level = "ok" if share < 0.8 else "warn"
    return Finding(level, "memory", f"{_mb(used)} of {_mb(limit)} ({share:.0%}) used")


def _script_limit(ms: str | None) -> Finding:
    if ms is None:
        return Finding("note", "scripts", "busy-reply-threshold unknown")
    if int(ms) < 1000:
        return Finding("warn", "scripts", f"busy-reply-threshold {ms} ms: batches may get BUSY")
    return Finding("ok", "scripts", f"busy-reply-threshold {ms} ms")


def _cluster(info: dict[str, Any]) -> Finding:
    if str(info.get("cluster_enabled", "0")) == "1":
        return Finding("note", "cluster", "on: give leaseq a RedisCluster, not a URL")
    return Finding("ok", "cluster", "off (one primary)")


def _mb(n: int) -> str:
    return f"{n / 1_048_576:.1f} MB"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per verdict.")
@click.pass_obj
def doctor(c: Any, as_json: bool) -> None:
    """Check the server's settings that matter to a job store.

    Exits 1 when a verdict is 'bad' (jobs can be lost), else 0.
    """
    if c.url.startswith("memory://"):
        click.echo("memory:// is the embedded in-process store: nothing to check")
        return
    info, config = gather(c.redis)
    found = diagnose(info, config)
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(f) for f in found]))
    else:
        click.echo(f"leaseq doctor: {_redis.redact(c.url)}")
        for f in found:
            click.echo(f"  {f.level.upper():<5} {f.topic:<12} {f.text}")
    if any(f.level == "bad" for f in found):
        raise SystemExit(1)
