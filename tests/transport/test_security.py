"""Security: a least-privilege ACL user runs everything, TLS works, and
passwords never leak from errors or URLs (redacted wherever a URL carries
one). No password in the CLI's output: tests/cli/test_secrets.py.

Each server test starts its own redis-server (loopback, free port) with
what it needs: an ACL user limited to ``~leaseq:*`` and an explicit command
list, or a TLS port with a self-signed certificate made here with ``openssl``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from leaseq.transport.client import redact
from tests.support.security import PASSWORD, _leaks, self_signed
from tests.support.servers import RedisServer, free_port, wait_until


def test_acl_user_limited_to_leaseq_keys_runs_everything(acl_server: RedisServer) -> None:
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "emails", keep_succeeded=60.0)
    client = q.redis
    # The ACL bites: nothing outside leaseq:* and the list above.
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("other-app:key", "x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.flushall()

    a, b, c, d = q.enqueue_many([{"n": i} for i in range(4)], ids=["a", "b", "c", "d"])
    assert q.enqueue({"n": 9}, id="later", delay=60.0) == "later"
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == a
    lease = q.extend(lease, ttl=30.0)
    assert q.once(lease, "charge") is True
    q.complete(lease, result={"ok": True})
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == b
    assert q.fail(lease, "boom", dead=True) is leaseq.State.DEAD
    assert q.retry_dead(b) >= 2
    lease = q.claim(ttl=30.0)
    assert lease is not None
    q.release(lease)
    assert q.cancel("later") is True
    assert q.reap() == (0, 0)
    stats = q.stats()
    assert (stats.succeeded, stats.cancelled) == (1, 1)
    assert [job.id for job in q.ls("succeeded")] == [a]
    job = q.get(a)
    assert job is not None and job.result == {"ok": True}
    assert leaseq.Queue.queues(client) == ["emails"]

    # A blocking claim wakes up for an enqueue made while it waits.
    while (held := q.claim(ttl=30.0)) is not None:
        q.complete(held)
    got: list[leaseq.Lease | None] = []
    waiter = threading.Thread(target=lambda: got.append(q.claim(ttl=30.0, block=5.0)))
    waiter.start()
    q.enqueue({"n": 10}, id="woken")
    waiter.join(10)
    assert got and got[0] is not None and got[0].id == "woken"
    q.complete(got[0])
    done = q.stats().succeeded
    assert done == 5  # a, b, c, d and woken
    assert {c, d} <= {j.id for j in q.ls("succeeded")}
    assert q.purge("succeeded") == done
    assert q.stats().succeeded == 0


def test_acl_user_reloads_scripts_after_script_flush(acl_server: RedisServer) -> None:
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "emails")
    q.enqueue(1, id="x")
    redis.Redis(port=acl_server.port).script_flush()
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == "x"


def test_acl_user_runs_schedules_and_durable_jobs_with_three_more_commands(
    acl_server: RedisServer,
) -> None:
    # docs/reliability.md: schedules and durable jobs need two more commands.
    url = f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0"
    q = leaseq.Queue.from_url(url, "nightly")
    with pytest.raises(leaseq.AuthError, match="grant the user"):  # without them: refused
        q.schedule("every", {"x": 1}, every=0.05)
    admin = redis.Redis(port=acl_server.port)
    admin.execute_command("ACL", "SETUSER", "leaseq", "+type", "+zrangebylex", "+zscore")
    admin.close()
    q.schedule("every", {"x": 1}, every=0.05)
    wait_until(lambda: q.tick() > 0, what="a schedule to fall due")
    q.unschedule("every")
    while (lease := q.claim()) is not None:
        q.complete(lease)

    def durable(lease: leaseq.Lease) -> None:
        if lease.payload == "nap":
            leaseq.current_job().sleep("nap", 60)
        else:
            leaseq.current_job().wait_for("w", "key-1", timeout=60)

    napper, waiter = q.enqueue("nap"), q.enqueue("wait")
    leaseq.Worker(q, durable, handle_signals=False).run(burst=True)
    assert q.stats().suspended == 2
    q.run_now(napper)
    assert q.signal("key-1", {"ok": 1}) == 1
    assert {job.id for job in q.ls("pending")} == {napper, waiter}


# -- TLS -----------------------------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisServer, int, Path]]:
    cert, key = self_signed(tmp_path)
    tls_port = free_port()
    server = RedisServer(
        "--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
    )  # fmt: skip
    yield server, tls_port, cert
    server.stop()


def test_tls_rediss_url_runs_a_job(tls_server: tuple[RedisServer, int, Path]) -> None:
    _, port, cert = tls_server
    client = redis.Redis.from_url(f"rediss://127.0.0.1:{port}/0", ssl_ca_certs=str(cert))
    q = leaseq.Queue("secure", redis=client)
    job_id = q.enqueue({"to": "a@b.c"})
    lease = q.claim(ttl=30.0, block=1.0)
    assert lease is not None and lease.id == job_id
    q.complete(lease, "sent")
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.result == "sent"
    client.close()


def test_tls_with_an_untrusted_certificate_is_refused(
    tls_server: tuple[RedisServer, int, Path],
) -> None:
    _, port, _ = tls_server
    q = leaseq.Queue.from_url(f"rediss://127.0.0.1:{port}/0", "secure")  # system CAs only
    with pytest.raises(leaseq.ServerUnavailable):
        q.enqueue(1)


@pytest.mark.parametrize(
    "make_url",
    [
        lambda port: f"redis://leaseq:{PASSWORD}@127.0.0.1:{free_port()}/0",  # nobody listens
        lambda port: f"redis://leaseq:{PASSWORD}x@127.0.0.1:{port}/0",  # wrong password
        lambda port: f"redis://nobody:{PASSWORD}@127.0.0.1:{port}/0",  # unknown user
    ],
)
def test_password_never_appears_in_errors(acl_server: RedisServer, make_url: Any) -> None:
    url = make_url(acl_server.port)
    with pytest.raises(leaseq.LeaseqError) as info:
        leaseq.Queue.from_url(url, "emails").enqueue(1)
    err = info.value
    for text in (str(err), repr(err), str(err.__cause__), str(err.__context__)):
        assert not _leaks(text), text


@pytest.mark.parametrize(
    "url",
    [
        f"redis://u:{PASSWORD}@127.0.0.1:notaport/0",
        f"redis://u:{PASSWORD}@127.0.0.1:6379/notadb",
        f"foo://u:{PASSWORD}@127.0.0.1/0",
    ],
)
def test_password_never_appears_in_bad_url_errors(url: str) -> None:
    with pytest.raises(leaseq.LeaseqError) as info:
        leaseq.Queue.from_url(url, "emails").enqueue(1)
    assert not _leaks(str(info.value)) and not _leaks(repr(info.value))


def test_redact() -> None:
    assert redact(f"redis://u:{PASSWORD}@h:1/0 and rediss://:{PASSWORD}@h/0") == (
        "redis://***@h:1/0 and rediss://***@h/0"
    )
    assert redact("redis://h:1/0") == "redis://h:1/0"


def test_redact_covers_every_place_a_url_carries_a_password() -> None:
    from leaseq.observe.redact import redact, remember_secrets

    assert redact("redis://u:pa/ss@h:1/0") == "redis://***@h:1/0"
    assert redact("redis://h/0?password=abc&db=1") == "redis://h/0?password=***&db=1"
    assert redact("rediss://:p%40ss@h/0 and redis://h") == "rediss://***@h/0 and redis://h"
    assert "a@b" not in redact("redis://h/0?password=a@b")
    remember_secrets("redis://:Fragment%2Fpass@h/0")
    assert redact("Port could not be cast: 'Fragment/pass'") == "Port could not be cast: '***'"


def test_a_password_with_at_in_the_query_is_not_taken_for_userinfo() -> None:
    from leaseq.transport.urls import check_url

    assert check_url("redis://h/0?password=a@b/c") == "redis://h/0?password=a@b/c"
    with pytest.raises(leaseq.InvalidArgument, match="percent-encode"):
        check_url("redis://u:pa/ss@h/0")
