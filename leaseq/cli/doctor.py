"""``leaseq doctor``: the server settings that matter to a job store, one
verdict each (eviction, persistence, replicas, split-brain writes, memory,
script time limit, cluster mode), and on a Sentinel URL the Sentinels' own
(how many answer, the quorum, ``down-after-milliseconds``).

``diagnose`` and ``diagnose_sentinels`` are pure: they read what ``gather``
fetched (INFO, and CONFIG GET where the server allows it — managed services
often refuse it, and then the verdict says "unknown") and what each Sentinel
said (``leaseq.transport.connect.sentinel_masters``). docs/reliability.md and
docs/high-availability.md explain what each setting buys.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from leaseq.errors import AuthError, ScriptError
from leaseq.transport import client as _redis
from leaseq.transport.connect import sentinel_masters
from leaseq.transport.urls import SENTINEL_SCHEMES

__all__ = ["Finding", "diagnose", "diagnose_sentinels", "doctor", "gather"]

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


SAFE_DOWN_AFTER_MS = 5000
"""Below this ``down-after-milliseconds``, a primary that stalls for a moment
(a fork for a replica's full sync on a loaded machine) can be failed over while
healthy, and each failover opens the split-brain window
(docs/high-availability.md)."""


def diagnose_sentinels(
    service: str, answers: list[tuple[str, dict[str, str] | None]]
) -> list[Finding]:
    """The Sentinels' verdicts from what each listed one said of ``service``
    (``SENTINEL MASTER`` fields as text, None for no answer): how many answer,
    the quorum, ``down-after-milliseconds``."""
    said = [fields for _, fields in answers if fields is not None]
    found = [_sentinel_count(service, len(answers), said)]
    if said:
        known = max(_field(f, "num-other-sentinels") + 1 for f in said)
        found.append(_quorum([_field(f, "quorum") for f in said], known))
        found.append(_down_after([_field(f, "down-after-milliseconds") for f in said]))
    return found


def _field(fields: dict[str, str], name: str) -> int:
    text = fields.get(name, "")
    return int(text) if text.isdigit() else 0


def _sentinel_count(service: str, listed: int, said: list[dict[str, str]]) -> Finding:
    if not said:
        return Finding("bad", "sentinels", f"none of {listed} answer for {service!r}: no failover")
    known = max(_field(f, "num-other-sentinels") + 1 for f in said)
    text = f"{len(said)} of {listed} answer for {service!r}"
    if known == 1:
        return Finding("warn", "sentinels", f"{text}; one Sentinel: no failover if it dies")
    if listed == 1:
        return Finding("warn", "sentinels", f"the URL names 1 of {known}: list them all")
    if len(said) < listed:
        return Finding("warn", "sentinels", f"{text}; ask why the others do not")
    return Finding("ok", "sentinels", f"{text}; {known} watch it")


def _quorum(quorums: list[int], known: int) -> Finding:
    low, high = min(quorums), max(quorums)
    shown = str(low) if low == high else f"{low}-{high}"
    if low <= 1:
        text = f"quorum {shown}: one Sentinel alone can call the primary down"
        return Finding("warn", "quorum", text)
    if high > known:
        return Finding("warn", "quorum", f"quorum {shown} of {known}: never met, no failover")
    return Finding("ok", "quorum", f"quorum {shown} of {known} Sentinels")


def _down_after(values: list[int]) -> Finding:
    low = min(values)
    if low < SAFE_DOWN_AFTER_MS:
        text = f"{low} ms: a brief stall fails a healthy primary over"
        return Finding("warn", "down-after", text)
    return Finding("ok", "down-after", f"{low} ms")


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
    sentinels = None
    if c.url.partition("://")[0] in SENTINEL_SCHEMES:
        sentinels = diagnose_sentinels(*sentinel_masters(c.url))
    info, config = gather(c.redis)
    found = diagnose(info, config) + (sentinels or [])
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(f) for f in found]))
    else:
        click.echo(f"leaseq doctor: {_redis.redact(c.url)}")
        for f in found:
            click.echo(f"  {f.level.upper():<5} {f.topic:<12} {f.text}")
    if any(f.level == "bad" for f in found):
        raise SystemExit(1)
