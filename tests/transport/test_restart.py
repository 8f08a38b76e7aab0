"""Server crash and restart: SIGKILL redis-server mid-run, restart it from its AOF.

With ``appendonly yes`` and ``appendfsync always`` Redis writes every
command to the AOF and fsyncs it before replying, so whatever the client saw
acknowledged survives a SIGKILL: every enqueue and every completion. The
workers (bench/chaos.py) reconnect by themselves and the run ends with
zero lost. docs/reliability.md says what weaker settings can lose.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

import leaseq
import leaseq.aio
from bench import chaos
from leaseq.store.settings import DEFAULT_ENQUEUE_RETRY
from tests.support.proxy import Proxy
from tests.support.servers import RedisServer, free_port


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer("--appendonly", "yes", "--appendfsync", "always")
    yield s
    s.stop()


def aof_restart(server: RedisServer) -> None:
    server.kill()  # SIGKILL: no shutdown save, only what the AOF already holds
    server.start()  # same port, same --dir: loads the AOF


@pytest.mark.slow
def test_sigkill_the_server_mid_run_loses_nothing_acknowledged(
    server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis(port=server.port)
    producer = leaseq.Queue(chaos.QUEUE, redis=client, max_attempts=chaos.MAX_ATTEMPTS)
    acked_enqueues: list[str] = []
    crashes: list[float] = []

    def during(elapsed: float) -> bool:
        # Keep enqueueing while the run goes on, across the crash; record only
        # the enqueues the server acknowledged. The run goes on until both
        # crashes and the late enqueues are done, however fast the workers are.
        if elapsed < 3.0:
            job_id = f"late{len(acked_enqueues)}-{len(crashes)}"
            try:
                producer.enqueue({"i": -1, "late": True}, id=job_id)
                acked_enqueues.append(job_id)
            except leaseq.ServerUnavailable:
                pass
        if len(crashes) < 2 and elapsed > 1.0 + 1.0 * len(crashes):
            crashes.append(elapsed)
            aof_restart(server)
        return elapsed < 3.0 or len(crashes) < 2

    report = chaos.drive(
        server.url,
        jobs=200,
        workers=3,
        kill_every=0.4,
        mode="effects",
        ttl=0.4,
        timeout=60.0,
        during=during,
        acks=str(tmp_path),
    )
    print(report, crashes)
    assert len(crashes) == 2, "the server must have been killed mid-run"
    assert report["lost"] == 0 and report["unfinished"] == {}, report
    assert report["effects_double"] == 0 and report["effects_missing"] == 0, report
    assert report["over_max_attempts"] == 0 and report["active_after_reap"] == 0

    acked_completions = {
        line for f in tmp_path.glob("*.acks") for line in f.read_text().split() if line
    }
    assert len(acked_completions) > 50
    states: dict[str, Any] = {}
    for job_id in acked_completions:
        job = producer.get(job_id)
        states[job_id] = None if job is None else job.state
    assert all(s is leaseq.State.SUCCEEDED for s in states.values()), states

    assert len(acked_enqueues) > 10
    for job_id in acked_enqueues:
        job = producer.get(job_id)
        assert job is not None, f"acknowledged enqueue {job_id} is gone after the restart"
        assert job.state is leaseq.State.SUCCEEDED
    client.close()


# -- producers ride out an outage (enqueue_retry) ---------------------------------------


def _restart_soon(server: RedisServer, after: float = 0.5) -> threading.Thread:
    """SIGKILL the server now and start it again (from its AOF) ``after`` s later."""
    server.kill()
    thread = threading.Timer(after, server.start)
    thread.start()
    return thread


def test_an_enqueue_rides_out_a_server_restart(server: RedisServer) -> None:
    q = leaseq.Queue("ride", redis=redis.Redis(port=server.port))
    q.enqueue({"n": 0}, id="before")  # the client has reached the server
    restart = _restart_soon(server)
    assert q.enqueue({"n": 1}, id="during") == "during"  # no ServerUnavailable
    restart.join()
    restart = _restart_soon(server)
    ids = q.enqueue_many([{"n": i} for i in range(10_000)])
    restart.join()
    stats = q.stats()
    assert stats.pending == 10_002 and stats.totals["enqueued"] == 10_002
    assert len(set(ids)) == 10_000
    q.redis.close()


def test_an_aio_enqueue_rides_out_a_server_restart(server: RedisServer) -> None:
    async def scenario() -> int:
        async with leaseq.aio.Queue("ride", redis=aioredis.Redis(port=server.port)) as q:
            await q.enqueue({"n": 0})
            restart = _restart_soon(server)
            # redis-py's asyncio pool before 5.1 hands out a pooled connection to
            # the dead server unchecked: the call sent on it may have run (its
            # reply is lost), so it raises rather than be sent again. Dropped
            # here, so the next call meets the refused connect of the restart.
            await q.redis.connection_pool.disconnect()
            await q.enqueue_many([{"n": i} for i in range(100)])
            restart.join()
            return (await q.stats()).pending

    assert asyncio.run(scenario()) == 101


def test_an_enqueue_whose_reply_was_lost_is_not_sent_again(server: RedisServer) -> None:
    # It may have run: its job may be finished and deleted (keep_succeeded=0)
    # by the time a replay came, which would make it again. So it raises.
    proxy = Proxy(server.port)
    client = redis.Redis(port=proxy.port, socket_timeout=0.5, retry=Retry(NoBackoff(), 0))
    q = leaseq.Queue("lost-reply", redis=client, keep_succeeded=0)
    q.enqueue({"n": 0}, id="before")
    proxy.set("drop_replies")  # the call runs; its reply never comes back
    started = time.monotonic()
    with pytest.raises(leaseq.ServerUnavailable) as info:
        q.enqueue({"n": 1}, id="once")
    assert not info.value.not_run and time.monotonic() - started < 5.0
    proxy.set("pass")
    assert proxy.replies_dropped > 0
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.id == "before"
    q.complete(lease)
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.id == "once"  # it ran: created once
    q.complete(lease)  # finished and deleted at once
    assert q.stats().totals["enqueued"] == 2 and q.claim(ttl=5.0) is None
    proxy.close()
    q.redis.close()


def _no_retry(port: int) -> redis.Redis:
    """A client without redis-py's own retries (8.x retries a refused
    connection for ~4 s a command): only leaseq's are timed."""
    return redis.Redis(port=port, retry=Retry(NoBackoff(), 0))


def test_what_an_enqueue_does_not_ride_out(server: RedisServer) -> None:
    # A server never reached (a wrong port, a server not started): at once.
    never = leaseq.Queue("never", redis=_no_retry(free_port()))
    started = time.monotonic()
    with pytest.raises(leaseq.ServerUnavailable):
        never.enqueue({"n": 1})
    assert time.monotonic() - started < DEFAULT_ENQUEUE_RETRY / 3
    # enqueue_retry=0: at once, even on a client that reached the server.
    q = leaseq.Queue("off", redis=_no_retry(server.port), enqueue_retry=0)
    q.enqueue({"n": 0})
    server.kill()
    started = time.monotonic()
    with pytest.raises(leaseq.ServerUnavailable):
        q.enqueue({"n": 1})
    assert time.monotonic() - started < DEFAULT_ENQUEUE_RETRY / 3
    # A window that runs out raises the outage it met.
    q = leaseq.Queue("short", redis=q.redis, enqueue_retry=0.3)
    started = time.monotonic()
    with pytest.raises(leaseq.ServerUnavailable):
        q.enqueue({"n": 2})
    assert 0.1 < time.monotonic() - started < DEFAULT_ENQUEUE_RETRY / 3
    for bad in (-1, float("nan"), float("inf"), "5", True):
        with pytest.raises(leaseq.InvalidArgument, match="enqueue_retry"):
            leaseq.Queue("bad", redis=q.redis, enqueue_retry=bad)  # type: ignore[arg-type]
    q.redis.close()
