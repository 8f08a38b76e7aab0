"""What only the threaded ``leaseq.Worker`` does: its claimer thread, its
reporter's hand-back past the grace (one step of its own, held here), its
release calls in an outage.
Everything both workers promise is tests/worker/test_worker.py, on every driver.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry as RedisRetry

import leaseq
from tests.support import handlers
from tests.support.servers import RedisServer, wait_until


def _worker(q: leaseq.Queue, fn: Any, **kw: Any) -> leaseq.Worker:
    kw.setdefault("handle_signals", False)
    return leaseq.Worker(q, fn, **kw)


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


def _in_thread(w: leaseq.Worker, burst: bool = False) -> threading.Thread:
    t = threading.Thread(target=w.run, kwargs={"burst": burst}, daemon=True)
    t.start()
    return t


def test_an_outcome_set_as_the_grace_runs_out_is_written_not_released(
    q: leaseq.Queue,
) -> None:
    """Past its grace, the worker hands back only the handlers still running: one
    that returned first has its outcome written, even while that outcome is still
    on its way to the reporter (set on the task, not yet in the done queue)."""
    go, entered, decided, let_go = (threading.Event() for _ in range(4))
    runs: list[str] = []

    def handler(lease: leaseq.Lease) -> str:
        runs.append(lease.id)
        entered.set()
        go.wait(10)
        return "done"

    job_id = q.enqueue({})
    w = _worker(q, handler, grace=0.0, concurrency=1, prefetch=0)
    returned = w._timeouts.returned

    def held_returned(task: Any, outcome: Any) -> bool:
        written = returned(task, outcome)
        decided.set()  # the outcome is set; the task is not in the done queue yet
        let_go.wait(10)
        return written

    w._timeouts.returned = held_returned  # type: ignore[method-assign]
    t = _in_thread(w)
    assert entered.wait(10)
    go.set()
    assert decided.wait(10)
    w.stop()  # grace 0: the reporter's next step is past it
    t.join(10)
    let_go.set()
    assert not t.is_alive()
    job = _job(q, job_id)
    assert (job.state, job.result, job.attempts) == (leaseq.State.SUCCEEDED, "done", 1)
    assert runs == [job_id]
    assert (w.counts["succeeded"], w.counts["released"], w.counts["lost"]) == (1, 0, 0)


def test_run_returns_only_after_its_claimer_stopped(q: leaseq.Queue) -> None:
    # An idle claimer blocks on the wake list; once run() returns, no thread of
    # that run may still use the client (the caller is free to close it).
    def claimers() -> int:
        return sum(th.name == "leaseq-claimer" and th.is_alive() for th in threading.enumerate())

    others = claimers()
    w = _worker(q, handlers.noop)
    t = _in_thread(w)
    wait_until(lambda: claimers() == others + 1, what="the claimer to start")
    before = time.monotonic()
    w.stop()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - before < 4.0
    assert claimers() == others


def test_a_stop_past_grace_in_an_outage_spends_one_failing_call_not_one_per_job() -> None:
    """Past the grace the running jobs are released one call each; on a server that
    stopped answering (SIGSTOP) each call fails only after the client's timeouts
    (with redis-py's defaults, a minute and more). After the first such failure
    the rest are left to expire, as the async worker does, or run() would take
    that long for every running job."""
    server = RedisServer()
    client = redis.Redis(
        port=server.port,
        socket_timeout=0.3,
        socket_connect_timeout=0.3,
        retry=RedisRetry(NoBackoff(), 0),
    )
    q = leaseq.Queue("jobs", redis=client, backoff=0.0)
    q.enqueue_many([{} for _ in range(6)])
    running, let_go = threading.Semaphore(0), threading.Event()

    def handler(lease: leaseq.Lease) -> None:
        running.release()
        let_go.wait(60)

    w = _worker(q, handler, concurrency=6, prefetch=0, grace=0.0)
    releases = [0]
    real = q.release

    def counted(lease: leaseq.Lease, **how: Any) -> None:
        releases[0] += 1
        real(lease, **how)

    q.release = counted  # type: ignore[method-assign]
    t = _in_thread(w)
    try:
        for _ in range(6):
            assert running.acquire(timeout=10)
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)
        w.stop()
        t.join(30)
        assert not t.is_alive()
        assert releases[0] == 1
    finally:
        let_go.set()
        if server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)
        t.join(10)
        client.close()
        server.stop()


def test_async_handlers_that_raise_reuse_their_threads_loop(q: leaseq.Queue) -> None:
    # Each handler thread keeps one event loop for its async handlers, whether they
    # return or raise: a loop made anew for each failing job would leak its sockets.
    import asyncio
    import gc
    import warnings

    made = 0
    real = asyncio.new_event_loop

    def counted() -> asyncio.AbstractEventLoop:
        nonlocal made
        made += 1
        return real()

    async def fails(lease: leaseq.Lease) -> None:
        raise ValueError("x")

    q.enqueue_many([{} for _ in range(40)], max_attempts=1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        asyncio.new_event_loop = counted  # type: ignore[assignment]
        try:
            _worker(q, fails, concurrency=2).run(burst=True)
        finally:
            asyncio.new_event_loop = real  # type: ignore[assignment]
        gc.collect()
    assert q.stats().dead == 40
    assert made <= 2, f"{made} event loops for 40 jobs on 2 threads"
    assert not [w for w in seen if "unclosed event loop" in str(w.message)]
