"""Workers register themselves (lua/register.lua, lua/workers.lua, leaseq.store.registry):
rows with a TTL, an index trimmed on read, both workers (on every driver), a SIGKILLed process,
and ``leaseq workers``. On fakeredis and a real server, sync and async.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from typing import Any

import pytest

import leaseq
import leaseq.aio
from leaseq.cli.main import main
from leaseq.store.registry import REGISTRY_TTL, refresh_every
from tests.support.backends import Clock
from tests.support.drivers import Driver
from tests.support.servers import RedisServer, wait_until
from tests.support.workers import Workers

# -- the behaviour, written once (re-run on leaseq.aio.Queue at the bottom) ------


def test_a_registered_worker_is_listed_with_its_fields(q: leaseq.Queue, clock: Clock) -> None:
    before = clock.server_now()
    q.register_worker("w-1", ttl=5.0, concurrency=4, done=7, running=2)
    (w,) = q.workers()
    assert (w.id, w.queue, w.concurrency, w.done, w.running) == ("w-1", "emails", 4, 7, 2)
    assert (w.host, w.pid) == (socket.gethostname(), os.getpid())
    assert before - 1 <= w.started <= w.seen <= clock.server_now() + 1
    assert w.expires == pytest.approx(w.seen + 5.0)


def test_a_refresh_keeps_started_and_updates_the_counts(q: leaseq.Queue, clock: Clock) -> None:
    q.register_worker("w-1", ttl=5.0, concurrency=4, done=0, running=0)
    (first,) = q.workers()
    clock.advance(0.02)
    q.register_worker("w-1", ttl=5.0, concurrency=4, done=3, running=1)
    (again,) = q.workers()
    assert again.started == first.started and again.seen > first.seen
    assert (again.done, again.running) == (3, 1)


def test_a_listing_measures_ages_on_the_server_clock(q: leaseq.Queue, clock: Clock) -> None:
    # Against the clock the listing was read on, not the newest heartbeat in
    # it: a lone worker that stopped refreshing must show how long it has been.
    q.register_worker("quiet", ttl=60.0)
    waited = clock.lease(40.0, 0.3)
    clock.advance(waited)
    (w,) = q.workers()
    assert w.since_seen >= waited - 0.01 and w.up >= w.since_seen
    assert w.listed_at == pytest.approx(w.seen + w.since_seen)
    assert w.listed_at <= clock.server_now() + 0.01


def test_a_worker_drops_off_once_its_ttl_passes(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    q.register_worker("gone", ttl=clock.lease(2.0, 0.3))
    q.register_worker("alive", ttl=60.0)
    assert sorted(w.id for w in q.workers()) == ["alive", "gone"]
    clock.advance(clock.lease(2.0, 0.3) + 0.05)
    assert [w.id for w in q.workers()] == ["alive"]
    # The index was trimmed on read: no stale entry is left behind.
    assert r.zrange(q.keys.workers, 0, -1) == [b"alive"]


def test_unregister_removes_the_row_and_the_index_entry(q: leaseq.Queue, r: Any) -> None:
    q.register_worker("w-1", ttl=5.0)
    q.unregister_worker("w-1")
    q.unregister_worker("w-1")  # a replay changes nothing
    assert q.workers() == []
    assert not r.exists(q.keys.worker("w-1"), q.keys.workers)


def test_an_index_entry_without_its_row_is_dropped(q: leaseq.Queue, r: Any) -> None:
    q.register_worker("w-1", ttl=5.0)
    q.register_worker("w-2", ttl=5.0)
    r.delete(q.keys.worker("w-1"))  # as if the row expired on a clock a little ahead
    assert [w.id for w in q.workers()] == ["w-2"]
    assert r.zrange(q.keys.workers, 0, -1) == [b"w-2"]


def test_a_damaged_worker_row_is_skipped(q: leaseq.Queue, r: Any) -> None:
    q.register_worker("w-1", ttl=5.0)
    q.register_worker("w-2", ttl=5.0)
    r.hset(q.keys.worker("w-1"), "seen", "abc")
    assert [w.id for w in q.workers()] == ["w-2"]


@pytest.mark.parametrize(
    ("worker", "settings"),
    [
        ("has space", {"ttl": 5.0}),
        ("w", {"ttl": 0.0}),
        ("w", {"ttl": float("nan")}),
        ("w", {"ttl": 5.0, "concurrency": -1}),
        ("w", {"ttl": 5.0, "done": "x"}),
    ],
)
def test_bad_registrations_are_refused_and_write_nothing(
    q: leaseq.Queue, r: Any, worker: str, settings: dict[str, Any]
) -> None:
    with pytest.raises(leaseq.LeaseqError):
        q.register_worker(worker, **settings)
    assert r.keys("*") == []


def test_a_sharded_queue_registers_once(r: Any) -> None:
    sq = leaseq.ShardedQueue("emails", shards=3, redis=r)
    sq.register_worker("w-1", ttl=5.0, concurrency=2)
    assert [w.id for w in sq.workers()] == ["w-1"]
    assert [w.queue for w in sq.workers()] == ["emails"]
    sq.unregister_worker("w-1")
    assert sq.workers() == []


def test_refresh_interval_is_the_heartbeat_bounded_by_the_registry_ttl() -> None:
    assert refresh_every(3.0) == 1.0
    assert refresh_every(3600.0) == REGISTRY_TTL / 3


# -- the workers register while they run --------------------------------------------


def test_a_worker_registers_while_it_runs_and_leaves_at_stop(driver: Driver) -> None:
    q = driver.q
    gate = threading.Event()
    q.enqueue({"n": 1})
    w = driver.worker(lambda lease: gate.wait(10), concurrency=3, ttl=3.0)
    w.start()
    try:
        wait_until(lambda: len(q.workers()) == 1, 10, what="the worker's row")
        (row,) = q.workers()
        assert (row.id, row.concurrency, row.pid) == (w.worker.queue.worker_id, 3, os.getpid())
        gate.set()
        # The next refresh (every ttl / 3 = 1 s) carries the count.
        wait_until(lambda: q.workers()[0].done == 1, 10, what="the done count")
        assert q.workers()[0].running == 0
    finally:
        gate.set()
        w.stop()
        w.join(10)
    assert w.processed == 1
    assert q.workers() == []


@pytest.mark.slow
def test_a_sigkilled_worker_process_drops_off_within_its_ttl(
    rr: Any,
    workers: Workers,
) -> None:
    q = leaseq.Queue("jobs", redis=rr)
    q.enqueue({"s": 30})
    proc = workers.start("jobs", "sleep", "--ttl", "1.5")
    wait_until(lambda: [w.running for w in q.workers()] == [1], 10, what="the worker's row")
    (w,) = q.workers()
    assert w.pid == proc.pid
    ttl = w.expires - w.seen
    assert ttl == pytest.approx(1.5)  # three refreshes of ttl / 3
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = w.expires  # it refreshes no more: gone by its last expiry at the latest
    wait_until(lambda: q.workers() == [], ttl + 5, what="the dead worker to drop off")
    sec, usec = rr.time()
    assert float(sec) + usec / 1e6 <= killed + ttl + 5


def test_cli_workers_lists_every_queue_in_80_columns(
    rr: Any,
    redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        try:
            main(["--url", redis_server.url, *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    leaseq.Queue("emails", redis=rr).enqueue({"n": 1})
    leaseq.Queue("emails", redis=rr).register_worker(
        "host-a.example.com:1234:abcdef", ttl=30.0, concurrency=8, done=12345, running=3
    )
    big = leaseq.ShardedQueue("big", shards=2, redis=rr)
    big.enqueue_many([{"n": i} for i in range(10)])
    big.register_worker("w-2", ttl=30.0)
    code, out, err = run("workers")
    assert code == 0, err
    assert "host-a.example.com:1234:abcdef" in out and "w-2" in out
    assert "12345" in out and "big" in out and "emails" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, err = run("workers", "emails", "--json")
    assert code == 0, err
    (one,) = json.loads(out)["emails"]
    assert one["id"] == "host-a.example.com:1234:abcdef"
    assert (one["done"], one["running"], one["concurrency"]) == (12345, 3, 8)
    code, out, err = run("workers", "nosuch")
    assert code == 1 and "no queue named 'nosuch'" in err


# The async re-run of these cases is tests/transport/test_aio.py's (SUITE_MODULES).
