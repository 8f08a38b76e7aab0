"""Cancelling a running job (``Queue.cancel`` of an active job) reaches its
worker at the next heartbeat: an ``async def`` handler of ``aio.Worker`` is
cancelled, a thread handler sees ``current_job().cancelled``, and under
``--processes`` the child still running it is stopped and replaced. On a real
server. The script's side (fencing, the row) is tests/store/test_cancel.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import leaseq
import leaseq.aio
from tests.support.backends import run
from tests.support.servers import RedisServer, wait_until
from tests.worker.test_supervisor import Supervised


def test_an_async_handler_is_cancelled_within_a_heartbeat(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    ttl = 3.0
    cancelled = asyncio.Event()
    seen: list[bool] = []

    async def handler(lease: leaseq.Lease) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(leaseq.current_job().cancelled.is_set())
            cancelled.set()
            raise
        return "never"

    async def scenario() -> float:
        await live.enqueue({"n": 1}, id="long")
        worker = leaseq.aio.Worker(live, handler, concurrency=1, ttl=ttl)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).active == 0:
            await asyncio.sleep(0.01)
        began = time.perf_counter()
        assert await live.cancel("long") is True
        await asyncio.wait_for(cancelled.wait(), 5.0)
        took = time.perf_counter() - began
        worker.stop()
        await asyncio.wait_for(task, 5.0)
        return took

    took = run(loop, scenario())
    assert took < ttl * 0.75  # within a heartbeat (ttl / 3), well before the lease would end
    assert seen == [True]
    job = run(loop, live.get("long"))
    assert job is not None and job.state is leaseq.State.CANCELLED and job.result is None
    assert job.last_error == "cancelled while running (attempt 1)"


def test_a_thread_handler_sees_current_job_cancelled(rr: Any, tmp_path: Path) -> None:
    q = leaseq.Queue("jobs", redis=rr)
    flag = tmp_path / "flag"
    started = threading.Event()

    def handler(lease: leaseq.Lease) -> str:
        started.set()
        ctx = leaseq.current_job()
        seen = ctx.cancelled.wait(10.0)
        flag.write_text("cancelled" if seen and ctx.lost.is_set() else "ran out")
        return "stale result"

    job_id = q.enqueue({"n": 1})
    w = leaseq.Worker(q, handler, concurrency=1, ttl=0.6, handle_signals=False)
    t = threading.Thread(target=w.run)
    t.start()
    try:
        assert started.wait(10.0)
        assert q.cancel(job_id) is True
        # The file exists a moment before its text is in it: wait for the text.
        written = lambda: flag.exists() and flag.read_text() != ""  # noqa: E731
        wait_until(written, 10, what="the handler to return")
        assert flag.read_text() == "cancelled"
        wait_until(lambda: w.counts["lost"] == 1, 10, what="the outcome discarded")
    finally:
        w.stop()
        t.join(10.0)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.CANCELLED and job.result is None
    assert w.counts["succeeded"] == 0


def polling(seen: list[bool], started: threading.Event) -> Callable[[leaseq.Lease], str]:
    """A plain handler that polls ``leaseq.current_job()`` as a user's would; at the
    first sign (``lost`` or ``cancelled``) it notes whether ``cancelled`` was set."""

    def handler(lease: leaseq.Lease) -> str:
        started.set()
        give_up = time.monotonic() + 10.0
        while time.monotonic() < give_up:
            job = leaseq.current_job()
            lost = job.lost.is_set()  # read first: it must never be set before cancelled
            if lost or job.cancelled.is_set():
                seen.append(job.cancelled.is_set())
                break
            time.sleep(0.002)
        return "stale result"

    return handler


def test_a_polling_plain_handler_sees_cancelled_on_the_threaded_worker(rr: Any) -> None:
    q = leaseq.Queue("jobs", redis=rr)
    seen: list[bool] = []
    started = threading.Event()
    job_id = q.enqueue({"n": 1})
    w = leaseq.Worker(q, polling(seen, started), concurrency=1, ttl=0.6, handle_signals=False)
    t = threading.Thread(target=w.run)
    t.start()
    try:
        assert started.wait(10.0)
        assert q.cancel(job_id) is True
        wait_until(lambda: seen, 10, what="the handler to notice")
        wait_until(lambda: w.counts["lost"] == 1, 10, what="the outcome discarded")
    finally:
        w.stop()
        t.join(10.0)
    assert seen == [True]
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.CANCELLED and job.result is None


def test_a_polling_plain_handler_sees_cancelled_on_the_aio_worker(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    seen: list[bool] = []
    started = threading.Event()

    async def scenario() -> None:
        job_id = await live.enqueue({"n": 1}, id="polled")
        worker = leaseq.aio.Worker(live, polling(seen, started), concurrency=1, ttl=0.6)
        task = asyncio.ensure_future(worker.run())
        while not started.is_set():
            await asyncio.sleep(0.005)
        assert await live.cancel(job_id) is True
        give_up = time.monotonic() + 10.0
        while not seen and time.monotonic() < give_up:
            await asyncio.sleep(0.005)
        worker.stop()
        await asyncio.wait_for(task, 10.0)

    run(loop, scenario())
    assert seen == [True]
    job = run(loop, live.get("polled"))
    assert job is not None and job.state is leaseq.State.CANCELLED and job.result is None


@pytest.fixture
def sup(redis_server: RedisServer, rr: Any) -> Any:
    s = Supervised(redis_server.url)
    yield s
    s.close()


@pytest.mark.slow
def test_a_process_mode_child_running_a_cancelled_job_is_stopped(rr: Any, sup: Supervised) -> None:
    q = leaseq.Queue("jobs", redis=rr)
    job_id = q.enqueue({"s": 60})
    sup.start(
        "jobs",
        "sleep",
        "--processes",
        "1",
        "--kill-grace",
        "0.3",
        "--ttl",
        "0.6",
        "--concurrency",
        "1",
    )
    first = wait_until(lambda: sup.kids(), 20, what="the child")
    wait_until(lambda: q.stats().active == 1, 20, what="the job to start")
    assert q.cancel(job_id) is True
    wait_until(lambda: "killing it" in sup.log, 20, what="the kill")
    wait_until(lambda: sup.kids() and not (sup.kids() & first), 20, what="a new child")
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.CANCELLED
    fresh = q.enqueue({"s": 0.01})
    wait_until(
        lambda: q.get(fresh).state is leaseq.State.SUCCEEDED,  # type: ignore[union-attr]
        20,
        what="the replacement to serve the queue",
    )
