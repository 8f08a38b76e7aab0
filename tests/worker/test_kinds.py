"""Kinds: kind= on enqueue, Lease.kind / Job.kind, and handler dicts that
dispatch by kind in both workers.

The cases that store a kind run again on leaseq.aio
(tests/transport/test_aio.py); the handler-dict cases drive the threaded
worker, and their aio twin runs here with the aio Worker on a real server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import leaseq
import leaseq.aio

# -- the kind of a job -----------------------------------------------------------------


def test_kind_is_stored_and_handed_out(q: leaseq.Queue) -> None:
    q.enqueue({"to": "a@b.c"}, id="mail", kind="send_email")
    q.enqueue_many([{"w": 1}, {"w": 2}], ids=["r1", "r2"], kind="resize")
    q.enqueue({}, id="plain")
    kinds = {lease.id: lease.kind for lease in q.claim_many(10)}
    assert kinds == {"mail": "send_email", "r1": "resize", "r2": "resize", "plain": None}
    job = q.get("mail")
    assert job is not None and job.kind == "send_email"
    plain = q.get("plain")
    assert plain is not None and plain.kind is None


def test_a_bad_kind_is_refused_and_writes_nothing(q: leaseq.Queue) -> None:
    for bad in ("", "has space", "{x}", "x" * 300):
        with pytest.raises(leaseq.InvalidName):
            q.enqueue({}, id="a", kind=bad)
        with pytest.raises(leaseq.InvalidName):
            q.enqueue_many([{}], ids=["b"], kind=bad)
    assert q.get("a") is None and q.get("b") is None


# -- handler dicts ---------------------------------------------------------------------


def _served(calls: list[str]) -> dict[str, Any]:
    def mail(lease: leaseq.Lease) -> str:
        calls.append(f"mail:{lease.id}")
        return "sent"

    def resize(lease: leaseq.Lease) -> int:
        calls.append(f"resize:{lease.id}")
        return 2

    return {"send_email": mail, "resize": resize}


def test_a_handler_dict_dispatches_by_kind(q: leaseq.Queue) -> None:
    q.enqueue({}, id="m", kind="send_email")
    q.enqueue({}, id="r", kind="resize")
    calls: list[str] = []
    leaseq.Worker(q, _served(calls), handle_signals=False).run(burst=True)
    assert sorted(calls) == ["mail:m", "resize:r"]
    m, r = q.get("m"), q.get("r")
    assert m is not None and m.result == "sent" and r is not None and r.result == 2


def test_an_unknown_kind_is_not_run_and_is_retried(q: leaseq.Queue) -> None:
    q.enqueue({}, id="u", kind="transcode", max_attempts=2)
    q.enqueue({}, id="none", max_attempts=1)
    calls: list[str] = []
    leaseq.Worker(q, _served(calls), handle_signals=False).run(burst=True)
    assert calls == []
    u = q.get("u")
    assert u is not None and u.state is leaseq.State.SCHEDULED  # retried: a deploy may bring it
    assert u.last_error == (
        "UnknownKind: no handler for kind 'transcode'; this worker serves 'resize', 'send_email'"
    )
    none = q.get("none")
    assert none is not None and none.state is leaseq.State.DEAD  # its only attempt used
    assert none.last_error is not None and "the job has no kind" in none.last_error


def test_a_handler_dict_is_checked() -> None:
    q = leaseq.Queue.from_url("memory://kinds-check", "k")
    for bad in ({}, {"a b": print}, {"ok": 3}, {1: print}):
        with pytest.raises(leaseq.InvalidArgument):
            leaseq.Worker(q, bad, handle_signals=False)  # type: ignore[arg-type]


def test_aio_worker_dispatches_sync_and_async_kinds(
    live: leaseq.aio.Queue,
    loop: asyncio.AbstractEventLoop,
) -> None:
    aq = live
    calls: list[str] = []

    async def resize(lease: leaseq.Lease) -> str:
        calls.append("resize")
        return "small"

    def mail(lease: leaseq.Lease) -> str:
        calls.append("mail")
        return "sent"

    async def scenario() -> list[leaseq.Job | None]:
        await aq.enqueue({}, id="m", kind="send_email")
        await aq.enqueue({}, id="r", kind="resize")
        await aq.enqueue({}, id="x", kind="nope", max_attempts=1)
        handlers = {"send_email": mail, "resize": resize}
        await leaseq.aio.Worker(aq, handlers, ttl=5.0).run(burst=True)
        return [await aq.get(i) for i in ("m", "r", "x")]

    m, rr, x = loop.run_until_complete(scenario())
    assert sorted(calls) == ["mail", "resize"]
    assert m is not None and m.result == "sent" and rr is not None and rr.result == "small"
    assert x is not None and x.state is leaseq.State.DEAD
    assert x.last_error is not None and x.last_error.startswith("UnknownKind: no handler")


def test_a_scheduled_kind_runs_on_a_handler_dict_worker(rr: Any) -> None:
    """Each due time of a schedule with kind= reaches its handler; none dies as
    "the job has no kind" (the worker ticks the schedule itself). Real server."""
    import threading

    from tests.support.servers import wait_until

    q = leaseq.Queue("jobs", redis=rr)
    calls: list[str] = []
    q.schedule("mails", {"to": "a@b.c"}, every=0.2, kind="send_email")
    w = leaseq.Worker(q, _served(calls), concurrency=1, ttl=5.0, handle_signals=False)
    t = threading.Thread(target=w.run)
    t.start()
    try:
        wait_until(lambda: q.stats().succeeded >= 2, 15, what="two scheduled jobs done")
    finally:
        w.stop()
        t.join(10.0)
    assert q.stats().dead == 0
    assert calls and all(c.startswith("mail:schedule:mails:") for c in calls)


def test_a_scheduled_kind_runs_on_a_handler_dict_aio_worker(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    """The aio twin: the aio Worker ticks the schedule and dispatches by kind."""
    from tests.support.backends import run

    seen: list[str] = []

    async def mail(lease: leaseq.Lease) -> str:
        seen.append(lease.id)
        return "sent"

    async def scenario() -> None:
        await live.schedule("mails", {}, every=0.2, kind="send_email")
        worker = leaseq.aio.Worker(live, {"send_email": mail}, concurrency=1, ttl=5.0)
        task = asyncio.ensure_future(worker.run())
        for _ in range(1500):
            if (await live.stats()).succeeded >= 2:
                break
            await asyncio.sleep(0.01)
        worker.stop()
        await asyncio.wait_for(task, 10.0)

    run(loop, scenario())
    stats = run(loop, live.stats())
    assert stats.succeeded >= 2 and stats.dead == 0
    assert seen and all(i.startswith("schedule:mails:") for i in seen)
