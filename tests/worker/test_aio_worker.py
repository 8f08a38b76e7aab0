"""What only ``leaseq.aio.Worker`` does, on a real server: a beat that meets a
landed completion, an ``async def`` handler cancelled when its lease is lost,
``run()`` cancelled (at a claim, an outcome, a hand-back), a server that hangs,
its drain past the grace. Everything both workers promise is
tests/worker/test_worker.py, on every driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ConstantBackoff

import leaseq
import leaseq.aio
from leaseq.work import claims
from tests.support.backends import run
from tests.support.servers import RedisServer, wait_until


def test_a_beat_that_meets_a_landed_completion_loses_nothing(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    # The completion lands but its reply is lost (then retried), and a heartbeat
    # falls due meanwhile. The job is the worker's own, not a lost lease: no
    # warning, and the retry's AlreadyFinished counts the job as processed.
    real_complete = live.complete_many

    async def complete_many(*args: Any, **kwargs: Any) -> Any:
        live.complete_many = real_complete  # type: ignore[method-assign]
        await real_complete(*args, **kwargs)
        await asyncio.sleep(0.25)  # past ttl / 3: the lease's beat is due meanwhile
        raise leaseq.ServerUnavailable("connection reset")

    live.complete_many = complete_many  # type: ignore[method-assign]

    async def handler(lease: leaseq.Lease) -> str:
        return "done"

    async def scenario() -> int:
        await live.enqueue({"i": 1}, id="one")
        return await asyncio.wait_for(
            leaseq.aio.Worker(live, handler, concurrency=1, ttl=0.3).run(burst=True), 10.0
        )

    with caplog.at_level(logging.WARNING, logger="leaseq"):
        processed = run(loop, scenario())
    job = run(loop, live.get("one"))
    assert job is not None and job.state is leaseq.State.SUCCEEDED
    assert processed == 1
    assert "lease lost" not in caplog.text


def test_worker_cancels_a_handler_whose_lease_is_lost(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    cancelled = asyncio.Event()

    async def handler(lease: leaseq.Lease) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def scenario() -> None:
        await live.enqueue({"n": 1}, id="taken")
        worker = leaseq.aio.Worker(live, handler, concurrency=1, ttl=0.3)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).active == 0:
            await asyncio.sleep(0.01)
        # An operator (or a reaper after a stall) takes the job away:
        await live.redis.hset(live.keys.job("taken"), "attempts", 7)
        await asyncio.wait_for(cancelled.wait(), 5.0)
        worker.stop()
        await asyncio.wait_for(task, 5.0)

    run(loop, scenario())
    job = run(loop, live.get("taken"))
    assert job is not None and job.state is leaseq.State.ACTIVE and job.attempts == 7


def test_cancelling_run_hands_prefetched_leases_back_too(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    # run() cancelled (asyncio.run on Ctrl-C, a TaskGroup, a timeout) releases its
    # running job; its prefetched leases must not sit active until they expire.
    started = asyncio.Event()

    async def handler(lease: leaseq.Lease) -> None:
        started.set()
        await asyncio.sleep(30)

    async def scenario() -> list[Any]:
        ids = await live.enqueue_many([{"i": i} for i in range(5)])
        worker = leaseq.aio.Worker(live, handler, concurrency=1, prefetch=4, ttl=30.0)
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 5.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5.0)
        return [await live.get(job_id) for job_id in ids]

    jobs = run(loop, scenario())
    assert [(j.state, j.max_attempts - j.attempts) for j in jobs] == [(leaseq.State.PENDING, 2)] * 5


@pytest.mark.parametrize("cancels", [1, 2])
def test_cancelling_run_during_a_claim_hands_that_claims_leases_back(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, cancels: int
) -> None:
    # run() cancelled while a claim's reply is on its way: the script has run, so
    # its leases are this worker's, and they must not sit active until they expire.
    # Cancelled again while it cleans up (a second Ctrl-C, a wait_for around the
    # task): they must still go back.
    claimed, reply = asyncio.Event(), asyncio.Event()
    real = live.claim_now

    async def slow_claim(*args: Any, **kwargs: Any) -> Any:
        got = await real(*args, **kwargs)
        claimed.set()
        await reply.wait()  # the reply, still on its way
        return got

    live.claim_now = slow_claim  # type: ignore[method-assign]

    async def handler(lease: leaseq.Lease) -> None:
        await asyncio.sleep(30)

    async def scenario() -> list[Any]:
        ids = await live.enqueue_many([{"i": i} for i in range(3)])
        worker = leaseq.aio.Worker(live, handler, concurrency=2, prefetch=1, ttl=30.0)
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(claimed.wait(), 5.0)
        assert (await live.stats()).active == 3
        task.cancel()
        if cancels == 2:
            for _ in range(3):  # into the cleanup, which waits for the claim's reply
                await asyncio.sleep(0)
            task.cancel()
        reply.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5.0)
        return [await live.get(job_id) for job_id in ids]

    jobs = run(loop, scenario())
    assert [(j.state, j.max_attempts - j.attempts) for j in jobs] == [(leaseq.State.PENDING, 2)] * 3


def _ends_while_the_server_hangs(
    loop: asyncio.AbstractEventLoop,
    handler: Any,
    jobs: int,
    end: Callable[[leaseq.aio.Worker, asyncio.Future[Any]], None],
    **options: Any,
) -> bool:
    """Start a worker on a server of its own; once a handler runs (and, with
    ``prefetch``, a spare waits), stop the server answering (SIGSTOP: no refusal,
    no reset) and ``end`` the run: True if run() returned within 10 s."""
    server = RedisServer()
    client = aioredis.Redis(port=server.port)
    queue = leaseq.aio.Queue("jobs", redis=client, backoff=0.0, max_attempts=2)

    async def scenario() -> bool:
        await queue.enqueue_many([{"i": i} for i in range(jobs)])
        worker = leaseq.aio.Worker(queue, handler, concurrency=1, ttl=30.0, **options)
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(handler.running.wait(), 5.0)
        while options.get("prefetch") and (await queue.stats()).active < 1 + options["prefetch"]:
            await asyncio.sleep(0.01)
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)
        end(worker, task)
        await asyncio.wait({task}, timeout=10.0)  # the bounded waits, and then some
        done = task.done()
        os.kill(server.proc.pid, signal.SIGCONT)
        await asyncio.wait({task}, timeout=10.0)
        return done

    try:
        return bool(run(loop, scenario()))
    finally:
        run(loop, client.aclose())
        server.stop()


class _Blocking:
    """An async handler that says it runs and then waits, or (``stubborn``)
    swallows every cancel."""

    def __init__(self, stubborn: bool = False) -> None:
        self.running = asyncio.Event()
        self.stubborn = stubborn

    async def __call__(self, lease: leaseq.Lease) -> None:
        self.running.set()
        while True:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if not self.stubborn:
                    raise


def test_a_cancelled_run_returns_while_the_server_hangs(loop: asyncio.AbstractEventLoop) -> None:
    # The server stops answering with a lease prefetched. Cancelling run() must
    # end it in bounded time; what cannot be handed back expires, unspent.
    ended = _ends_while_the_server_hangs(
        loop, _Blocking(), 4, lambda worker, task: task.cancel(), prefetch=2
    )
    assert ended, "run() still cleaning up 10 s after its cancel"


async def _marked(client: Any, queue: leaseq.aio.Queue) -> int:
    """How many active rows carry a spare's mark (``prefetched``)."""
    ids = [job.id for job in await queue.ls("active", limit=1000)]
    marks = [await client.hget(queue.keys.job(i), "prefetched") for i in ids]
    return sum(m is not None for m in marks)


def test_a_stop_in_an_outage_leaves_prefetched_leases_to_expire_unspent(
    loop: asyncio.AbstractEventLoop,
) -> None:
    # The server dies with 100 leases prefetched; stop() must not spend a failing
    # release on each (here 5 retries 50 ms apart per call: minutes for them all).
    # They expire instead, and reaping refunds them: no attempt spent.
    server = RedisServer("--appendonly", "yes", "--appendfsync", "always")
    client = aioredis.Redis(port=server.port, retry=AsyncRetry(ConstantBackoff(0.05), 5))
    queue = leaseq.aio.Queue("jobs", redis=client, backoff=0.0, max_attempts=2)
    started = asyncio.Event()

    async def handler(lease: leaseq.Lease) -> None:
        started.set()
        await asyncio.sleep(30)

    async def scenario() -> float:
        await queue.enqueue_many([{"i": i} for i in range(101)])
        worker = leaseq.aio.Worker(queue, handler, concurrency=1, prefetch=100, ttl=1.0, grace=0.1)
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 5.0)
        while (await queue.stats()).active < 101:
            await asyncio.sleep(0.01)
        # The spares are marked by the first heartbeat (ttl / 3) that finds them waiting.
        while await _marked(client, queue) < 100:
            await asyncio.sleep(0.01)
        server.kill()
        began = time.monotonic()
        worker.stop()
        await asyncio.wait_for(task, 60.0)
        return time.monotonic() - began

    try:
        took = run(loop, scenario())
        assert took < 15.0, f"run() took {took:.1f}s to return"
        server.start()
        sync = redis.Redis(port=server.port)
        q = leaseq.Queue("jobs", redis=sync)
        rows = q.ls("active", limit=200)
        assert len(rows) == 101  # the running one and the 100 prefetched
        wait_until(lambda: q.reap() and not q.stats().active, 10, 0.05, "the leases to expire")
        jobs = [q.get(row.id) for row in rows]
        spent = sorted(j.max_attempts - j.attempts for j in jobs if j is not None)
        # Only the job that ran spent its attempt.
        assert spent == [1] + [2] * 100
        sync.close()
    finally:
        run(loop, client.aclose())
        server.stop()


def test_a_stop_while_completions_are_in_flight_outlives_none_of_its_calls(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first complete_many hangs (a stalled server): past the grace, and the
    # bounded waits for returned handlers' writes after it and in the cleanup (made
    # short here), run() cancels it and returns only once it has ended; its jobs
    # stay active for a reaper, the others pending: none is lost, none counted done.
    monkeypatch.setattr(leaseq.aio.worker, "_CLEANUP_WAIT", 0.5)
    in_flight = 0
    real = live.complete_many

    async def hanging(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight
        in_flight += 1
        try:
            await asyncio.Event().wait()
            return await real(*args, **kwargs)
        finally:
            in_flight -= 1

    live.complete_many = hanging  # type: ignore[method-assign]

    async def handler(lease: leaseq.Lease) -> int:
        return int(lease.payload["i"])

    async def scenario() -> int:
        await live.enqueue_many([{"i": i} for i in range(50)])
        worker = leaseq.aio.Worker(live, handler, concurrency=10, ttl=5.0, grace=0.2)
        task = asyncio.ensure_future(worker.run())

        async def hung() -> None:
            while not in_flight:
                await asyncio.sleep(0.005)

        await asyncio.wait_for(hung(), 5.0)
        worker.stop()
        processed = await asyncio.wait_for(task, 5.0)
        assert in_flight == 0  # no call of this run outlives it
        return processed

    assert run(loop, scenario()) == 0
    stats = run(loop, live.stats())
    assert (stats.succeeded, stats.active + stats.pending) == (0, 50)


def test_a_wake_wait_that_fails_unwatched_is_not_reported_unretrieved(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    # The worker's wait for a wake-up fails (a connection reset) while a claim is
    # in flight, and the next pass starts a new wait: the failed one's error must
    # be read, not left for asyncio to log as an ERROR with a traceback.
    unread: list[str] = []
    loop.set_exception_handler(lambda _, context: unread.append(str(context.get("message"))))
    real_claim = live.claim_now
    waits = 0

    async def failing_wait(timeout: float) -> bool:
        nonlocal waits
        waits += 1
        await asyncio.sleep(0.03)
        raise leaseq.ServerUnavailable("connection reset")

    async def slow_claim(*args: Any, **kwargs: Any) -> Any:
        got = await real_claim(*args, **kwargs)
        await asyncio.sleep(0.05)  # the wait fails meanwhile
        return got

    live.wait_for_wake = failing_wait  # type: ignore[method-assign]
    live.claim_now = slow_claim  # type: ignore[method-assign]

    async def handler(lease: leaseq.Lease) -> None:
        await asyncio.sleep(0.01)

    async def scenario() -> None:
        await live.enqueue_many([{"i": i} for i in range(3)])
        worker = leaseq.aio.Worker(live, handler, concurrency=2, ttl=2.0)
        task = asyncio.ensure_future(worker.run())
        while waits < 20:
            await asyncio.sleep(0.01)
        worker.stop()
        await asyncio.wait_for(task, 5.0)
        gc.collect()  # an unread task error is reported when the task is collected
        await asyncio.sleep(0)

    run(loop, scenario())
    assert unread == []


def test_a_completion_in_flight_as_the_grace_runs_out_is_written_not_cut_off(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    # "quick" returned before the stop; its completion is on the wire when the
    # grace runs out, and lands only after the stop. The worker waits for it
    # rather than cutting it off (which would leave the job active, to run again
    # once its lease expired); "stuck", still running, is cancelled and released.
    real = live.complete_many
    writing, let_write, cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        writing.set()
        await let_write.wait()
        return await real(*args, **kwargs)

    live.complete_many = held  # type: ignore[method-assign]

    async def handler(lease: leaseq.Lease) -> str:
        if lease.id == "quick":
            return "done"
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def scenario() -> int:
        await live.enqueue({}, id="stuck")
        await live.enqueue({}, id="quick")
        worker = leaseq.aio.Worker(live, handler, concurrency=2, prefetch=0, ttl=5.0, grace=0.0)
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(writing.wait(), 5.0)
        worker.stop()
        let_write.set()  # the grace (none) is over: the write lands from here
        return await asyncio.wait_for(task, 5.0)

    assert run(loop, scenario()) == 1
    assert cancelled.is_set()
    quick, stuck = run(loop, live.get("quick")), run(loop, live.get("stuck"))
    assert quick is not None and (quick.state, quick.result) == (leaseq.State.SUCCEEDED, "done")
    assert stuck is not None and stuck.state is leaseq.State.PENDING
    assert stuck.max_attempts - stuck.attempts == 2  # released: the attempt given back


def test_cancelling_run_while_overdue_spares_go_back_still_hands_them_all_back(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The heartbeat hands overdue spares back one release at a time (a slow server:
    # each release takes a while). run() cancelled meanwhile must still release
    # the spares not handed back yet, not leave them active with nobody holding them
    # until they expire (each then spending one of the job's crash refunds).
    monkeypatch.setattr(claims, "SPARE_WAIT_FLOOR", 0.0)
    hung = asyncio.Event()

    async def handler(lease: leaseq.Lease) -> None:
        hung.set()
        await asyncio.sleep(60)

    async def scenario() -> leaseq.Stats:
        await live.enqueue_many([{} for _ in range(21)], max_attempts=1)
        worker = leaseq.aio.Worker(live, handler, concurrency=1, prefetch=20, ttl=0.6)
        real = live.release
        releases = [0]
        task = asyncio.ensure_future(worker.run())

        async def slow_release(lease: leaseq.Lease, **how: Any) -> None:
            releases[0] += 1
            if releases[0] == 3:  # the third overdue spare on its way back
                task.cancel()
            await asyncio.sleep(0.02)
            await real(lease, **how)

        monkeypatch.setattr(live, "release", slow_release)
        await asyncio.wait_for(hung.wait(), 10)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 20)
        return await live.stats()

    stats = run(loop, scenario())
    assert (stats.active, stats.pending) == (0, 21)


def test_a_stop_past_grace_returns_while_the_server_hangs_and_a_handler_ignores_its_cancel(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the grace the drain cancels the handler (it swallows the cancel) and,
    # after _WRITE_WAIT, the job task, which then releases the job: on a server that
    # stopped answering that release never returns. run() must still end in
    # bounded time; the job's lease simply expires.
    monkeypatch.setattr(leaseq.aio.worker, "_CLEANUP_WAIT", 1.0)
    ended = _ends_while_the_server_hangs(
        loop, _Blocking(stubborn=True), 1, lambda worker, task: worker.stop(), grace=0.2
    )
    assert ended, "run() still draining 10 s after a stop past its grace"


def test_a_cancel_the_redis_client_swallows_still_ends_run(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    # redis-py 8 loses a cancel that lands while a command is in flight (measured:
    # most of 200 cancels of a task looping on SET were lost): the call returns as if
    # nothing happened, the task's cancelling() count still up. A cancel of run()
    # that lands in one of its own calls (here the reap) must still end the run.
    if not hasattr(asyncio.Task, "cancelling"):
        pytest.skip("Task.cancelling() is Python 3.11+")
    real = live.reap
    calls = [0]

    async def reap() -> Any:
        calls[0] += 1
        result = await real()
        if calls[0] == 3:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # as redis-py does
                await asyncio.sleep(0.01)
        return result

    monkeypatch.setattr(live, "reap", reap)
    worker = leaseq.aio.Worker(live, lambda lease: None, concurrency=1, reap_interval=0.01)

    async def scenario() -> bool:
        nonlocal task
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait({task}, timeout=10.0)
        return task.done() and task.cancelled()

    task: asyncio.Task[int]
    assert run(loop, scenario()), "run() went on after its cancel was swallowed"


def _fails(lease: leaseq.Lease) -> None:
    raise ValueError("boom")


@pytest.mark.parametrize(
    ("call", "handler", "state"),
    [
        ("complete_many", lambda lease: "done", leaseq.State.SUCCEEDED),
        ("fail", _fails, leaseq.State.DEAD),
    ],
    ids=["completion", "failure"],
)
def test_cancelling_run_while_an_outcome_is_on_the_wire_still_writes_it(
    live: leaseq.aio.Queue,
    loop: asyncio.AbstractEventLoop,
    monkeypatch: pytest.MonkeyPatch,
    call: str,
    handler: Any,
    state: leaseq.State,
) -> None:
    real = getattr(live, call)
    writing = asyncio.Event()

    async def slow(*args: Any, **kwargs: Any) -> Any:
        writing.set()
        await asyncio.sleep(0.2)  # a slow server: the cancel lands here
        return await real(*args, **kwargs)

    monkeypatch.setattr(live, call, slow)

    async def scenario() -> leaseq.Job | None:
        job_id = await live.enqueue({}, max_attempts=1)
        worker = leaseq.aio.Worker(live, handler, concurrency=1, ttl=30.0)
        task = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(writing.wait(), 5.0)
        task.cancel()
        await asyncio.wait({task}, timeout=10.0)
        return await live.get(job_id)

    job = run(loop, scenario())
    # Its handler ran: the outcome on the wire is written before run() ends, not
    # left active for the reaper to hand out again (and refund if it was a spare).
    assert job is not None and job.state is state, job and job.state
    assert job.attempts == 1
    if state is leaseq.State.SUCCEEDED:
        assert job.result == "done"
    else:
        assert job.last_error is not None and "boom" in job.last_error


@pytest.mark.parametrize(
    ("fails", "state"), [(False, leaseq.State.SUCCEEDED), (True, leaseq.State.DEAD)]
)
def test_cancelling_run_as_a_handler_returns_writes_its_outcome(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, fails: bool, state: leaseq.State
) -> None:
    # The cancel lands after the handler has returned (or raised) and before its
    # job task resumed: the handler has run, so its outcome is written, not the
    # job released (refunded, it would run again).
    runs = 0
    task: asyncio.Task[int]

    async def handler(lease: leaseq.Lease) -> str:
        nonlocal runs
        runs += 1
        asyncio.get_running_loop().call_soon(task.cancel)  # runs before the task resumes
        if fails:
            raise ValueError("boom")
        return "done"

    async def scenario() -> leaseq.Job | None:
        nonlocal task
        job_id = await live.enqueue({}, max_attempts=1)
        task = asyncio.ensure_future(leaseq.aio.Worker(live, handler, concurrency=1).run())
        await asyncio.wait({task}, timeout=10.0)
        assert task.done()
        return await live.get(job_id)

    job = run(loop, scenario())
    assert runs == 1
    assert job is not None and job.state is state, job and (job.state, job.max_attempts)
    assert job.attempts == 1 and job.max_attempts == 1


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_counts_after_a_cancelled_run_match_the_rows(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop, kind: str
) -> None:
    # run() cancelled mid-drain: the completions that were waiting still go out
    # (their handlers ran), though their job tasks are cancelled. Each is counted
    # where it lands, so counts says what the rows say.
    async def async_noop(lease: leaseq.Lease) -> None:
        return None

    def plain_noop(lease: leaseq.Lease) -> None:
        return None

    async def scenario() -> tuple[dict[str, int], leaseq.Stats]:
        await live.enqueue_many([{} for _ in range(3000)])
        handler = async_noop if kind == "async" else plain_noop
        worker = leaseq.aio.Worker(live, handler, concurrency=8)
        task = asyncio.ensure_future(worker.run())
        while (await live.stats()).succeeded < 300:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10.0)
        return dict(worker.counts), await live.stats()

    counts, stats = run(loop, scenario())
    assert stats.active == 0
    assert counts["succeeded"] == stats.succeeded > 0
    assert stats.pending == 3000 - stats.succeeded
    assert counts["lost"] == 0


def test_an_async_handler_that_swallows_its_timeout_keeps_its_slot(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    # A coroutine that catches its cancellation at the timeout and runs on still
    # holds its handler slot (as a thread past its timeout does): concurrency holds.
    running = peak = 0
    stuck: list[int] = []

    async def handler(lease: leaseq.Lease) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # swallowed: it runs on past its timeout
        finally:
            running -= 1

    async def scenario() -> leaseq.Stats:
        await live.enqueue_many([{} for _ in range(6)], max_attempts=1)
        worker = leaseq.aio.Worker(live, handler, concurrency=2, timeout=0.1, on_stuck=stuck.append)
        await asyncio.wait_for(worker.run(burst=True), 20.0)
        return await live.stats()

    stats = run(loop, scenario())
    assert peak == 2, peak
    assert stats.dead == 6 and stats.active == 0
    assert max(stuck) <= 2 and stuck[-1] == 0


def test_a_worker_run_on_a_second_event_loop_says_why_it_cannot(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    # Its aio queue's client belongs to the loop of its first run: a second loop
    # (a second asyncio.run, say) would lose claims' replies on that client.
    async def handler(lease: leaseq.Lease) -> None:
        return None

    worker = run(loop, _made_on_loop(live, handler))
    run(loop, live.enqueue({}))
    assert run(loop, worker.run(burst=True)) == 1
    other = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="another event loop"):
            other.run_until_complete(worker.run(burst=True))
    finally:
        other.close()
    assert run(loop, live.stats()).active == 0


async def _made_on_loop(queue: leaseq.aio.Queue, handler: Any) -> leaseq.aio.Worker:
    return leaseq.aio.Worker(queue, handler)
