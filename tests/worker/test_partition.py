"""Network partitions between a worker and Redis, through a TCP proxy on
loopback (``tests/support/proxy.py``), on a real redis-server:

- a worker cut off for longer than its lease: another worker takes the job
  and finishes it; once the link heals, the first worker's heartbeat is
  refused, its handler is told (``current_job().lost``) and its outcome is
  discarded: one completion, under the second token, one effect;
- a stall shorter than the lease: the job completes once, never redelivered;
- replies dropped (the command ran, the reply was lost): the call sent again
  answers sensibly — an enqueue dedups, a complete or fail is refused as
  already done — and nothing moves twice.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import leaseq
from tests.support.proxy import Proxy
from tests.support.servers import RedisServer, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[Proxy]:
    p = Proxy(redis_server.port)
    yield p
    p.close()


@pytest.fixture
def name() -> str:
    return f"part-{uuid.uuid4().hex[:8]}"


def effects_key(queue: str) -> str:
    return f"test:{{{queue}}}:effects"


class CutOff:
    """A ``leaseq.Worker`` (one thread, short lease) whose Redis is behind the proxy."""

    def __init__(self, proxy: Proxy, name: str, ttl: float, wait_for_loss: bool) -> None:
        self.queue = leaseq.Queue.from_url(
            proxy.url("socket_timeout=0.5&socket_connect_timeout=0.5"), name, backoff=0.0
        )
        self.started = threading.Event()
        self.release = threading.Event()
        self.told_lost = threading.Event()
        self.runs = 0
        self.wait_for_loss = wait_for_loss
        self.worker = leaseq.Worker(
            self.queue, self.handle, concurrency=1, ttl=ttl, handle_signals=False
        )
        self.thread = threading.Thread(target=self.worker.run, daemon=True)
        self.thread.start()

    def handle(self, lease: leaseq.Lease) -> str:
        self.runs += 1
        self.started.set()
        ctx = leaseq.current_job()
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up:
            if self.wait_for_loss and ctx.lost.is_set():
                self.told_lost.set()
                break
            if not self.wait_for_loss and self.release.is_set():
                break
            time.sleep(0.01)
        return "from the cut-off worker"

    def stop(self) -> None:
        self.worker.stop(now=True)
        self.thread.join(10)
        self.queue.close()


def test_cut_off_past_its_lease_the_job_goes_to_another_worker_once(
    rr: Any, proxy: Proxy, name: str
) -> None:
    direct = leaseq.Queue(name, redis=rr, backoff=0.0, worker_id="healthy")
    job = direct.enqueue({"n": 1})
    a = CutOff(proxy, name, ttl=1.0, wait_for_loss=True)
    try:
        wait_until(a.started.is_set, 15, what="the first worker to start the job")
        proxy.set("drop")
        # The other worker claims it once the first lease has run out (claim reaps).
        lease = wait_until(lambda: direct.claim(ttl=10.0), 15, every=0.05, what="a redelivery")
        assert lease.id == job and lease.attempt == 2
        direct.complete(lease, result="from the healthy worker",
                        effects=[("HINCRBY", effects_key(name), job, 1)])  # fmt: skip
        proxy.set("pass")
        wait_until(a.told_lost.is_set, 30, what="the cut-off handler to be told it lost")
    finally:
        a.stop()
    row = direct.get(job)
    assert row is not None and row.state is leaseq.State.SUCCEEDED
    assert row.attempts == 2 and row.worker == "healthy"
    assert row.result == "from the healthy worker"  # the cut-off outcome was discarded
    assert rr.hget(effects_key(name), job) == b"1"
    assert direct.stats().succeeded == 1 and a.runs == 1


def test_a_stall_shorter_than_the_lease_changes_nothing(rr: Any, proxy: Proxy, name: str) -> None:
    direct = leaseq.Queue(name, redis=rr, backoff=0.0)
    job = direct.enqueue({"n": 1})
    a = CutOff(proxy, name, ttl=3.0, wait_for_loss=False)
    try:
        wait_until(a.started.is_set, 15, what="the worker to start the job")
        proxy.set("stall")
        time.sleep(0.6)  # the fault itself: a link frozen for 0.6 s of a 3 s lease
        proxy.set("pass")
        a.release.set()
        wait_until(lambda: direct.stats().succeeded == 1, 15, what="the completion")
    finally:
        a.stop()
    row = direct.get(job)
    assert row is not None and row.state is leaseq.State.SUCCEEDED
    assert row.attempts == 1 and a.runs == 1 and not a.told_lost.is_set()
    assert direct.claim(ttl=1.0) is None


def test_replayed_calls_after_lost_replies_never_move_a_job_twice(
    rr: Any, proxy: Proxy, name: str
) -> None:
    direct = leaseq.Queue(name, redis=rr, backoff=0.0)
    warm = leaseq.Queue(f"{name}-warm", redis=rr, backoff=0.0)
    warm.enqueue_many([{"warm": 1}, {"warm": 2}])  # the scripts loaded on the server, so
    warm.complete(warm.claim(ttl=30.0))  # the first call through the proxy runs them
    warm.fail(warm.claim(ttl=30.0), "warm-up", retry_in=60.0)
    q = leaseq.Queue.from_url(proxy.url("socket_timeout=0.3"), name, backoff=0.0)
    q.stats()  # a pooled connection through the proxy, handshake done

    def lost_reply(call: Any) -> None:
        proxy.set("drop_replies")
        dropped = proxy.replies_dropped
        with pytest.raises(leaseq.ServerUnavailable):
            call()
        assert proxy.replies_dropped > dropped  # the server did answer: it ran
        proxy.set("pass")

    lost_reply(lambda: q.enqueue({"n": 1}, id="once"))
    assert direct.stats().pending == 1  # it ran
    assert q.enqueue({"n": 1}, id="once") == "once"  # replayed: dedup
    assert direct.stats().pending == 1

    lease = direct.claim(ttl=30.0)
    assert lease is not None and lease.id == "once"
    effect = [("HINCRBY", effects_key(name), "once", 1)]
    lost_reply(lambda: q.complete(lease, effects=effect))
    assert direct.stats().succeeded == 1  # it ran
    with pytest.raises(leaseq.AlreadyFinished):
        q.complete(lease, effects=effect)  # replayed: refused, not applied again
    assert rr.hget(effects_key(name), "once") == b"1"
    row = direct.get("once")
    assert row is not None and row.state is leaseq.State.SUCCEEDED and row.attempts == 1

    job = direct.enqueue({"n": 2}, id="flaky")
    lease = direct.claim(ttl=30.0)
    assert lease is not None and lease.id == job
    lost_reply(lambda: q.fail(lease, "boom", retry_in=60.0))
    assert direct.stats().scheduled == 1  # it ran
    with pytest.raises(leaseq.AlreadyFinished):
        q.fail(lease, "boom", retry_in=60.0)  # replayed: the row already moved on
    row = direct.get(job)
    assert row is not None and row.state is leaseq.State.SCHEDULED and row.attempts == 1
    assert direct.stats().scheduled == 1
    q.close()
