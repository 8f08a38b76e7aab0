"""``leaseq doctor`` on real servers set up badly and well on purpose: one
verdict per setting that matters to a job store, a non-zero exit when jobs
can be lost, lines within 80 columns, no password shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from leaseq.cli.doctor import diagnose, diagnose_sentinels
from tests.support.cli import run_leaseq
from tests.support.sentinel import DATA_PASSWORD, SENTINEL_PASSWORD, SERVICE, Sentinels
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


@pytest.mark.slow
def test_a_sentinel_url_gets_the_sentinels_count_quorum_and_down_after() -> None:
    # Three Sentinels, quorum 2, down-after 1000 ms (short, for tests); AOF, so
    # that no BAD verdict of the data nodes sets the exit code.
    ha = Sentinels("--appendonly", "yes")
    try:
        proc = run_leaseq("--url", ha.url(), "doctor")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        found = verdicts(proc.stdout)
        assert found["sentinels"] == "OK" and f"3 of 3 answer for '{SERVICE}'" in proc.stdout
        assert found["quorum"] == "OK" and "quorum 2 of 3" in proc.stdout, proc.stdout
        assert found["down-after"] == "WARN" and "1000 ms" in proc.stdout, proc.stdout
        assert all(len(line) <= 80 for line in proc.stdout.splitlines()[1:]), proc.stdout
        assert DATA_PASSWORD not in proc.stdout + proc.stderr
        assert SENTINEL_PASSWORD not in proc.stdout + proc.stderr
        for i in range(3):
            s = ha.sentinel(i)
            s.execute_command("SENTINEL", "SET", SERVICE, "quorum", "1")
            s.execute_command("SENTINEL", "SET", SERVICE, "down-after-milliseconds", "6000")
            s.close()
        one = (  # a URL that names one of the three
            f"redis+sentinel://:{DATA_PASSWORD}@127.0.0.1:{ha.ports[0]}/{SERVICE}/0"
            f"?sentinel_password={SENTINEL_PASSWORD}"
        )
        as_json = run_leaseq("--url", one, "doctor", "--json")
        assert as_json.returncode == 0, as_json.stderr
        got = {f["topic"]: f for f in json.loads(as_json.stdout)}
        assert got["sentinels"]["level"] == "warn" and "1 of 3" in got["sentinels"]["text"]
        assert got["quorum"]["level"] == "warn", got["quorum"]
        assert got["down-after"]["level"] == "ok" and "6000 ms" in got["down-after"]["text"]
        ha.procs[2].kill()
        ha.procs[2].wait()
        proc = run_leaseq("--url", ha.url(), "doctor")
        assert verdicts(proc.stdout)["sentinels"] == "WARN", proc.stdout
        assert "2 of 3 answer" in proc.stdout, proc.stdout
    finally:
        ha.stop()


def test_one_sentinel_and_a_quorum_of_one_are_warned_about() -> None:
    alone = {"quorum": "1", "down-after-milliseconds": "30000", "num-other-sentinels": "0"}
    found = {f.topic: f for f in diagnose_sentinels("jobs", [("10.0.0.1:26379", alone)])}
    assert found["sentinels"].level == "warn" and "one Sentinel" in found["sentinels"].text
    assert found["quorum"].level == "warn" and found["down-after"].level == "ok"
    three = {"quorum": "2", "down-after-milliseconds": "5000", "num-other-sentinels": "2"}
    answers = [("a:1", three), ("b:1", three), ("c:1", three)]
    assert {f.level for f in diagnose_sentinels("jobs", answers)} == {"ok"}
    found = {f.topic: f for f in diagnose_sentinels("jobs", [("a:1", None), ("b:1", None)])}
    assert found["sentinels"].level == "bad" and set(found) == {"sentinels"}


def test_memory_url_has_nothing_to_check() -> None:
    proc = run_leaseq("--url", "memory://doc", "doctor")
    assert proc.returncode == 0 and "nothing to check" in proc.stdout
