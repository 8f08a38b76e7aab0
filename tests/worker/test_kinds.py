"""Kinds: kind= on enqueue, Lease.kind / Job.kind, and handler dicts that
dispatch by kind in both workers.

The cases that store a kind run again on leaseq.aio
(tests/transport/test_aio.py); the handler-dict cases run on every worker
driver.
"""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
import leaseq.aio
from tests.support.drivers import Driver
from tests.support.servers import wait_until

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


@pytest.mark.parametrize("resize", ["plain", "async"])
def test_a_handler_dict_dispatches_by_kind(driver: Driver, resize: str) -> None:
    q = driver.q
    q.enqueue({}, id="m", kind="send_email")
    q.enqueue({}, id="r", kind="resize")
    calls: list[str] = []
    served = _served(calls)
    if resize == "async":  # a dict may mix plain and async def handlers

        async def resize_async(lease: leaseq.Lease) -> int:
            calls.append(f"resize:{lease.id}")
            return 2

        served["resize"] = resize_async
    driver.worker(served).run(burst=True)
    assert sorted(calls) == ["mail:m", "resize:r"]
    m, r = q.get("m"), q.get("r")
    assert m is not None and m.result == "sent" and r is not None and r.result == 2


def test_an_unknown_kind_is_not_run_and_is_retried(driver: Driver) -> None:
    q = driver.q
    q.enqueue({}, id="u", kind="transcode", max_attempts=2)
    q.enqueue({}, id="x", kind="nope", max_attempts=1)
    q.enqueue({}, id="none", max_attempts=1)
    calls: list[str] = []
    driver.worker(_served(calls)).run(burst=True)
    assert calls == []
    u = q.get("u")
    assert u is not None and u.state is leaseq.State.SCHEDULED  # retried: a deploy may bring it
    assert u.last_error == (
        "UnknownKind: no handler for kind 'transcode'; this worker serves 'resize', 'send_email'"
    )
    x = q.get("x")
    assert x is not None and x.state is leaseq.State.DEAD  # its only attempt used
    assert x.last_error is not None and x.last_error.startswith("UnknownKind: no handler")
    none = q.get("none")
    assert none is not None and none.state is leaseq.State.DEAD  # its only attempt used
    assert none.last_error is not None and "the job has no kind" in none.last_error


def test_a_handler_dict_is_checked(driver: Driver) -> None:
    for bad in ({}, {"a b": print}, {"ok": 3}, {1: print}):
        with pytest.raises(leaseq.InvalidArgument):
            driver.worker(bad)


@pytest.mark.parametrize("mail", ["plain", "async"])
def test_a_scheduled_kind_runs_on_a_handler_dict_worker(live_driver: Driver, mail: str) -> None:
    """Each due time of a schedule with kind= reaches its handler; none dies as
    "the job has no kind" (the worker ticks the schedule itself). Real server."""
    q = live_driver.queue("jobs")
    calls: list[str] = []
    served = _served(calls)
    if mail == "async":

        async def mail_async(lease: leaseq.Lease) -> str:
            calls.append(f"mail:{lease.id}")
            return "sent"

        served["send_email"] = mail_async
    q.schedule("mails", {"to": "a@b.c"}, every=0.2, kind="send_email")
    w = live_driver.worker(served, queue=q, concurrency=1, ttl=5.0)
    w.start()
    try:
        wait_until(lambda: q.stats().succeeded >= 2, 15, what="two scheduled jobs done")
    finally:
        w.stop()
        w.join(10.0)
    assert q.stats().dead == 0
    assert calls and all(c.startswith("mail:schedule:mails:") for c in calls)
