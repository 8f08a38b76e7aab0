"""``leaseq doctor`` on real servers set up badly and well on purpose: one
verdict per setting that matters to a job store, a non-zero exit when jobs
can be lost, lines within 80 columns, no password shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from leaseq.cli.doctor import diagnose
from tests.support.cli import run_leaseq
from tests.support.servers import RedisServer, wait_until


@pytest.fixture
def badly_set() -> Iterator[RedisServer]:
    """allkeys-lru and no persistence at all (RedisServer's --save '' --appendonly no)."""
    server = RedisServer("--maxmemory-policy", "allkeys-lru")
    client = redis.Redis(port=server.port)
    client.config_set("requirepass", "doc-pw-123")  # once up: RedisServer pings without one
    client.close()
    yield server
    server.stop()


@pytest.fixture
def well_set() -> Iterator[tuple[RedisServer, RedisServer]]:
    primary = RedisServer(
        *("--appendonly", "yes", "--appendfsync", "always", "--maxmemory", "256mb"),
        *("--min-replicas-to-write", "1", "--repl-diskless-sync-delay", "0"),
    )
    replica = RedisServer("--replicaof", "127.0.0.1", str(primary.port))
    client = redis.Redis(port=primary.port)
    wait_until(lambda: client.info("replication")["connected_slaves"] == 1, 30, what="a replica")
    client.close()
    yield primary, replica
    replica.stop()
    primary.stop()


def verdicts(out: str) -> dict[str, str]:
    """topic -> level, from the table."""
    found = {}
    for line in out.splitlines()[1:]:
        level, rest = line.split(None, 1)
        topic = "split brain" if rest.startswith("split brain") else rest.split()[0]
        found[topic] = level
    return found


def test_a_badly_set_server_gets_bad_verdicts_and_exit_1(badly_set: RedisServer) -> None:
    url = f"redis://:doc-pw-123@127.0.0.1:{badly_set.port}/0"
    proc = run_leaseq("--url", url, "doctor")
    assert proc.returncode == 1, proc.stderr
    assert "doc-pw-123" not in proc.stdout + proc.stderr
    found = verdicts(proc.stdout)
    assert found["eviction"] == "BAD" and "allkeys-lru" in proc.stdout
    assert found["persistence"] == "BAD" and "appendonly yes" in proc.stdout
    assert found["replicas"] == "WARN" and found["role"] == "OK"
    assert all(len(line) <= 80 for line in proc.stdout.splitlines()[1:]), proc.stdout
    as_json = run_leaseq("--url", url, "doctor", "--json")
    levels = {f["topic"]: f["level"] for f in json.loads(as_json.stdout)}
    assert levels["eviction"] == "bad" and levels["persistence"] == "bad"


def test_a_well_set_primary_passes(well_set: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = well_set
    proc = run_leaseq("--url", primary.url, "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = verdicts(proc.stdout)
    assert set(found.values()) == {"OK"}, proc.stdout
    assert "durable=1..1 can be met" in proc.stdout
    on_replica = run_leaseq("--url", replica.url, "doctor")
    assert on_replica.returncode == 1 and verdicts(on_replica.stdout)["role"] == "BAD"


def test_settings_a_managed_service_hides_are_unknown_not_guessed() -> None:
    info: dict[str, Any] = {"redis_version": "7.1.0", "role": "master", "connected_slaves": 1}
    info["slave0"] = {"ip": "10.0.0.2", "port": 6379, "lag": 3}
    found = {f.topic: f for f in diagnose(info, {})}
    assert found["eviction"].level == "warn" and "unknown" in found["eviction"].text
    assert found["persistence"].level == "warn" and "unknown" in found["persistence"].text
    assert found["replicas"].text.startswith("1, lag up to 3 s")
    assert found["split brain"].level == "warn"
    volatile = {f.topic: f for f in diagnose(info, {"maxmemory-policy": "volatile-lru"})}
    assert volatile["eviction"].level == "warn"


def test_memory_url_has_nothing_to_check() -> None:
    proc = run_leaseq("--url", "memory://doc", "doctor")
    assert proc.returncode == 0 and "nothing to check" in proc.stdout
