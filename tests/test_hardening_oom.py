"""Issue 9, defect 9: a full Redis (maxmemory + noeviction) keeps draining.

Claims, extensions, markers, completions, failures, releases, reaps, stats
and purges declare ``#!lua flags=allow-oom`` (Redis 7), so a full server
still runs them -- they are what frees memory. Enqueue (and retry) declare
no flag: Redis refuses them whole, before they write anything, and leaseq
raises a typed error that says the server is full.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

import leaseq
from leaseq import _redis
from leaseq.scripts import SCRIPTS
from tests.conftest import RedisServer


@pytest.fixture
def full() -> Iterator[Any]:
    server = RedisServer("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    client = redis.Redis(port=server.port)
    yield client
    client.close()
    server.stop()


def _fill(q: leaseq.Queue) -> int:
    """Enqueue 1 kB jobs until the server refuses; how many went in."""
    n = 0
    while True:
        try:
            q.enqueue_many(["x" * 1000] * 50)
        except leaseq.LeaseqError as exc:
            assert "OOM" in str(exc) or "memory" in str(exc).lower(), exc
            if hasattr(leaseq, "ServerFull"):  # helper "cli" maps OOM to it
                assert isinstance(exc, leaseq.ServerFull)
            return n
        n += 50
        assert n < 100_000, "maxmemory never reached"


def test_a_full_server_refuses_enqueue_whole_and_keeps_draining(full: Any) -> None:
    q = leaseq.Queue("full", redis=full, keep_succeeded=0, max_attempts=2, backoff=0.0)
    queued = _fill(q)
    assert queued > 100
    before = q.stats()
    meta = full.hgetall(q.keys.meta)
    # A refused enqueue wrote nothing at all: no row, no counter, no clock.
    with pytest.raises(leaseq.LeaseqError):
        q.enqueue("one more", id="refused")
    assert full.exists(q.keys.job("refused")) == 0
    assert full.hgetall(q.keys.meta) == meta
    assert q.stats().pending == before.pending == queued
    # Everything that drains still runs on the full server.
    leases = q.claim_many(20, ttl=30.0)
    assert len(leases) == 20
    leases = [q.extend(lease, ttl=30.0) for lease in leases]
    assert q.once(leases[0], "marker") is True
    q.complete(leases[0], "done")
    assert q.complete_many(leases[1:5]) == []
    assert q.fail(leases[5], "boom") is leaseq.State.PENDING
    assert q.fail(leases[6], "boom", dead=True) is leaseq.State.DEAD
    q.release(leases[7])
    assert q.reap() == (0, 0)
    assert q.purge("dead") == 1
    head = full.zrange(q.keys.pending, 0, 0)[0].decode()
    assert q.cancel(head) is True
    # Draining frees memory: completions with keep_succeeded=0 delete rows.
    while True:
        got = q.claim_many(1000, ttl=30.0)
        if not got:
            break
        assert q.complete_many(got) == []
    assert q.stats().pending == 0
    q.enqueue("room again", id="later")
    assert q.get("later") is not None


def test_stats_runs_on_a_full_server(full: Any) -> None:
    q = leaseq.Queue("full", redis=full)
    _fill(q)
    assert q.stats().pending > 0


def test_scripts_carry_their_flags_and_a_plain_twin() -> None:
    drain = {"claim", "extend", "complete", "fail", "release", "reap", "once", "cancel", "purge"}
    for name, script in SCRIPTS.items():
        first = script.source.splitlines()[0]
        assert first.startswith("#!lua"), name
        assert ("allow-oom" in first) == (name in drain | {"reset_clock"}), name
        assert script.plain == script.source.split("\n", 1)[1]
        assert not script.plain.startswith("#!")
    assert "flags=no-writes" in SCRIPTS["stats"].source.splitlines()[0]


def test_a_server_without_shebangs_gets_the_plain_twins() -> None:
    import fakeredis

    client = fakeredis.FakeRedis()  # its Lua cannot compile '#!lua', like Redis 6.2's
    q = leaseq.Queue("old", redis=client)
    q.enqueue("x", id="x")
    assert getattr(client, _redis._PLAIN) is True
    lease = q.claim()
    assert lease is not None
    q.complete(lease)
