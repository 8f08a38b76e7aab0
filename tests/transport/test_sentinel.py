"""Sentinel URLs: ``redis+sentinel://`` in every entry point, against a real
primary, replica and three ``redis-server --sentinel`` processes, with the
data nodes' password and the Sentinels' own kept apart; and a queue that finds
the new primary by itself after a failover (a SIGKILLed primary; an old
primary left up after ``SENTINEL FAILOVER`` that refuses writes). Workers
through a whole failover, the old primary demoted to a replica answering
READONLY among it: tests/worker/test_failover.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from leaseq.observe.redact import redact
from leaseq.transport.urls import sentinel_target
from tests.support import LEASEQ, ROOT
from tests.support.security import self_signed
from tests.support.sentinel import DATA_PASSWORD, SENTINEL_PASSWORD, SERVICE, Sentinels
from tests.support.servers import RedisServer, free_port, server_exe, wait_until

pytestmark = pytest.mark.slow

SECRETS = (DATA_PASSWORD, SENTINEL_PASSWORD)
WORKER_OPTS = ("--burst", "--processes", "2", "--concurrency", "1")


@pytest.fixture(scope="module")
def ha() -> Iterator[Sentinels]:
    cluster = Sentinels()
    yield cluster
    cluster.stop()


@pytest.fixture
def fresh() -> Iterator[Sentinels]:
    """A cluster of its own, for a test that fails it over."""
    cluster = Sentinels()
    yield cluster
    cluster.stop()


def primary_rows(ha: Sentinels, queue: str) -> int:
    """The pending count as the primary itself holds it (not through Sentinel)."""
    port = ha.primary_port()
    assert port is not None
    client = ha.node(ha.server(port))
    try:
        keys = leaseq.Queue(queue, redis=client).keys
        return int(client.zcard(keys.pending)) + int(client.llen(keys.ready))
    finally:
        client.close()


# -- the URL ------------------------------------------------------------------------


def test_url_names_sentinels_service_db_and_two_sets_of_credentials() -> None:
    t = sentinel_target(
        "rediss+sentinel://app:p%40ss@h1,h2:26380,[::1]:5000/svc/3"
        "?sentinel_username=watch&sentinel_password=s3cret&socket_timeout=2"
    )
    assert t.sentinels == (("h1", 26379), ("h2", 26380), ("::1", 5000))
    assert t.service == "svc"
    assert t.redis_kwargs["db"] == 3 and t.redis_kwargs["ssl"] is True
    assert (t.redis_kwargs["username"], t.redis_kwargs["password"]) == ("app", "p@ss")
    assert t.redis_kwargs["socket_timeout"] == 2.0
    assert "sentinel_password" not in str(t.redis_kwargs)
    assert t.sentinel_kwargs == {
        "username": "watch",
        "password": "s3cret",
        "socket_timeout": 2.0,
        "ssl": True,
    }
    plain = sentinel_target("redis+sentinel://h1/svc")
    assert plain.redis_kwargs == {"db": 0} and plain.sentinel_kwargs == {}
    shown = redact("redis+sentinel://app:pw-one@h1/svc?sentinel_password=pw-two&x=1")
    assert "pw-one" not in shown and "pw-two" not in shown and "x=1" in shown


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://:pw-abc@h1:26379", "name the Sentinel service"),
        ("redis+sentinel://:pw-abc@h1:26379/", "name the Sentinel service"),
        ("redis+sentinel://:pw-abc@h1/svc/x", "db number"),
        ("redis+sentinel://:pw-abc@h1:port/svc", "host[:port]"),
        ("redis+sentinel://:pw-abc@h1,,h2/svc", "host[:port]"),
        ("redis+sentinel://:pw-abc@h1:99999/svc", "host[:port]"),
        ("redis+sentinel://h1/svc?sentinel_password=pw-abc&socket_timeout=x", "socket_timeout"),
        ("sentinel://:pw-abc@h1/svc", "redis+sentinel://"),
    ],
)
def test_a_bad_sentinel_url_is_refused_before_connecting(url: str, says: str) -> None:
    with pytest.raises(leaseq.InvalidArgument) as info:
        leaseq.Queue.from_url(url, "q")
    assert says in str(info.value) and "pw-abc" not in str(info.value)


# -- every entry point ----------------------------------------------------------------


def test_queue_from_url_reaches_the_primary(ha: Sentinels) -> None:
    with leaseq.Queue.from_url(ha.url(), "s-sync", backoff=0.0) as q:
        job = q.enqueue({"n": 1})
        assert primary_rows(ha, "s-sync") == 1
        lease = q.claim(ttl=5.0)
        assert lease is not None and lease.id == job
        q.complete(lease)
        assert q.stats().succeeded == 1


def test_sharded_queue_from_url(ha: Sentinels) -> None:
    with leaseq.ShardedQueue.from_url(ha.url(), "s-sharded", shards=3) as sq:
        sq.enqueue_many([{"i": i} for i in range(30)])
        assert sq.stats().pending == 30


def test_aio_queue_from_url(ha: Sentinels) -> None:
    async def scenario() -> int:
        async with leaseq.aio.Queue.from_url(ha.url(), "s-aio") as q:
            await q.enqueue({"n": 1})
            lease = await q.claim(ttl=5.0)
            assert lease is not None
            await q.complete(lease)
        async with leaseq.aio.ShardedQueue.from_url(ha.url(), "s-aio-sh", shards=2) as sq:
            await sq.enqueue_many([{"i": i} for i in range(4)])
            return (await sq.stats()).pending

    assert asyncio.run(scenario()) == 4


def test_cli_and_its_worker_processes(ha: Sentinels) -> None:
    url = ha.url()
    with leaseq.Queue.from_url(url, "s-cli") as q:
        q.enqueue_many([{"n": i} for i in range(6)])
    common: dict[str, Any] = {"capture_output": True, "text": True, "cwd": ROOT, "timeout": 120}
    work = subprocess.run(
        [LEASEQ, "--url", url, "worker", "s-cli", "tests.support.handlers:echo", *WORKER_OPTS],
        **common,
    )
    assert work.returncode == 0, work.stderr
    stats = subprocess.run([LEASEQ, "--url", url, "stats", "s-cli", "--json"], **common)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["s-cli"]["succeeded"] == 6
    for secret in SECRETS:
        assert secret not in work.stdout + work.stderr + stats.stdout + stats.stderr


def test_web_dashboard_from_a_sentinel_url(ha: Sentinels) -> None:
    starlette = pytest.importorskip("starlette.testclient")
    from leaseq.web import create_app

    with leaseq.Queue.from_url(ha.url(), "s-web") as q:
        q.enqueue({"n": 1})
    page = starlette.TestClient(create_app(ha.url(), title="ha")).get("/")
    assert page.status_code == 200 and "s-web" in page.text
    assert not any(secret in page.text for secret in SECRETS)


# -- credentials: each goes to its own place ------------------------------------------


def test_sentinel_password_and_data_password_are_not_interchangeable(ha: Sentinels) -> None:
    hosts = ",".join(f"127.0.0.1:{p}" for p in ha.ports)
    swapped = (
        f"redis+sentinel://:{SENTINEL_PASSWORD}@{hosts}/{SERVICE}/0"
        f"?sentinel_password={DATA_PASSWORD}"
    )
    no_sentinel_pw = f"redis+sentinel://:{DATA_PASSWORD}@{hosts}/{SERVICE}/0"
    wrong_service = ha.url().replace(f"/{SERVICE}/", "/nosuch/")
    for url, error, says in (
        (swapped, leaseq.AuthError, "Sentinel credentials"),
        (no_sentinel_pw, leaseq.AuthError, "Sentinel credentials"),
        (wrong_service, leaseq.ServerUnavailable, "no such primary"),
    ):
        with pytest.raises(error) as info:
            leaseq.Queue.from_url(url, "s-auth").stats()
        assert says in str(info.value) and len(str(info.value)) < 400, info.value
        assert not any(secret in str(info.value) for secret in SECRETS), info.value
    proc = subprocess.run(
        [LEASEQ, "--url", swapped, "stats"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert not any(secret in proc.stderr for secret in SECRETS), proc.stderr


# -- failover -------------------------------------------------------------------------


def _until_served(call: Any, timeout: float = 30.0, retry_lost: bool = False) -> Any:
    """``call()`` retried while the service fails over (the errors a worker
    backs off on; with ``retry_lost``, NotReplicated too)."""
    result: list[Any] = []
    transient: tuple[type[Exception], ...] = (leaseq.ServerUnavailable, leaseq.ServerBusy)
    if retry_lost:
        transient += (leaseq.NotReplicated,)

    def attempt() -> bool:
        try:
            result.append(call())
        except transient:
            return False
        return True

    wait_until(attempt, timeout, every=0.05, what="the service to answer after failover")
    return result[0]


def test_a_queue_finds_the_new_primary_after_the_old_is_killed(fresh: Sentinels) -> None:
    q = leaseq.Queue.from_url(fresh.url(), "s-fail", backoff=0.0)
    # durable=1: on the replica before it is acknowledged, so it survives the kill
    before = leaseq.Queue("s-fail", redis=q.redis, durable=1).enqueue({"n": 1})
    old = fresh.primary.port
    fresh.primary.kill()
    # At once, while Sentinel has yet to see the primary down: the enqueue
    # rides out the promotion by itself (enqueue_retry), no retry loop here.
    after = q.enqueue({"n": 2})
    assert fresh.wait_promoted(old) == fresh.replica.port
    ids = set()
    while (lease := q.claim(ttl=5.0)) is not None:
        ids.add(lease.id)
        q.complete(lease)
    assert ids == {before, after}
    q.close()


class _LeastRecent(redis.ConnectionPool):
    """Hands each call the connection idle longest: a thread's next call lands on
    another connection, as it may whenever threads share one client."""

    def release(self, connection: Any) -> None:
        super().release(connection)
        with self._lock:
            idle = self._available_connections
            if idle and idle[-1] is connection:
                idle.insert(0, idle.pop())


def test_a_durable_enqueue_waits_for_its_own_write(fresh: Sentinels) -> None:
    # WAIT counts only its own connection's writes. Sent as a call of its own it
    # could run on another pooled connection, one that wrote nothing, and
    # acknowledge at once a job no replica has: it rides with the script.
    port = fresh.primary_port()
    assert port == fresh.primary.port
    pool = _LeastRecent(port=port, password=DATA_PASSWORD, socket_timeout=5)
    pool._available_connections.extend(pool.make_connection() for _ in range(2))
    client = redis.Redis(connection_pool=pool)
    q = leaseq.Queue("own-write", redis=client, durable=1, durable_timeout=0.5)
    # The replica follows: acknowledged (given longer: on a loaded box a replica
    # took more than 0.5 s in a cluster test of the same shape).
    leaseq.Queue("own-write", redis=client, durable=1, durable_timeout=10.0).enqueue("seen")
    replica = fresh.replica.proc
    assert replica is not None
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        with pytest.raises(leaseq.NotReplicated):
            q.enqueue("unseen")
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    pool.disconnect()


def test_aio_queue_finds_the_new_primary_after_failover(fresh: Sentinels) -> None:
    async def scenario() -> set[str]:
        async with leaseq.aio.Queue.from_url(fresh.url(), "s-afail") as q:
            first = await leaseq.aio.Queue("s-afail", redis=q.redis, durable=1).enqueue({"n": 1})
            fresh.primary.kill()
            second = await q.enqueue({"n": 2})  # rides out the promotion (enqueue_retry)
            fresh.wait_promoted(fresh.primary.port)
            ids = set()
            while (lease := await q.claim(ttl=5.0)) is not None:
                ids.add(lease.id)
                await q.complete(lease)
            assert {first, second} <= ids
            return ids

    assert len(asyncio.run(scenario())) == 2


def test_a_refusing_old_primary_sends_the_queue_to_sentinel_at_once(fresh: Sentinels) -> None:
    """The old primary, still up and not yet demoted (Sentinel does that at its
    next INFO, ~10 s on), refuses writes with NOREPLICAS (min-replicas-to-write):
    the queue asks Sentinel again after that error and reaches the new primary
    long before the demotion, instead of retrying the old one until then."""
    q = leaseq.Queue.from_url(fresh.url(), "s-norep")
    q.enqueue({"n": 0})
    old = fresh.primary.port
    fresh.sentinel().execute_command("SENTINEL", "FAILOVER", SERVICE)
    new = fresh.wait_promoted(old)
    demoted = fresh.node(fresh.primary)
    demoted.config_set("min-replicas-to-write", 1)  # its replica is gone: it refuses writes
    job = _until_served(lambda: q.enqueue({"n": 1}), timeout=5.0)
    assert demoted.info("replication")["role"] == "master", "demoted already: proves nothing"
    assert fresh.node(fresh.server(new)).exists(q.keys.job(job))
    q.close()


def test_tls_rediss_sentinel_url_speaks_tls_to_sentinel_and_primary(tmp_path: Path) -> None:
    """``rediss+sentinel://``: a Sentinel and a primary that listen on TLS only
    (the primary's plain port is the fixture's); the CA comes as ssl_ca_certs."""
    cert, key = self_signed(tmp_path)
    tls = (
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(cert),
    )
    data_port, sentinel_port = free_port(), free_port()
    primary = RedisServer("--tls-port", str(data_port), *tls, "--tls-auth-clients", "no")
    conf = tmp_path / "sentinel.conf"
    conf.write_text(
        f"port 0\ntls-port {sentinel_port}\nbind 127.0.0.1\ntls-auth-clients no\n"
        f"tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {cert}\n"
        f"tls-replication yes\nsentinel monitor {SERVICE} 127.0.0.1 {data_port} 1\n"
    )
    sentinel = subprocess.Popen(
        [server_exe(), str(conf), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"rediss+sentinel://127.0.0.1:{sentinel_port}/{SERVICE}/0?ssl_ca_certs={cert}"
        with leaseq.Queue.from_url(url, "s-tls") as q:
            job = _until_served(lambda: q.enqueue({"n": 1}))  # once the Sentinel listens
            lease = q.claim(ttl=5.0)
            assert lease is not None and lease.id == job
        plain = f"redis+sentinel://127.0.0.1:{sentinel_port}/{SERVICE}/0"
        with pytest.raises(leaseq.ServerUnavailable):
            leaseq.Queue.from_url(plain, "s-tls").stats()  # a TLS Sentinel, spoken to in clear
    finally:
        sentinel.kill()
        sentinel.wait()
        primary.stop()
