"""The one outcome policy (``leaseq.work.outcomes.decide``) and both workers held
to it: the threaded and the asyncio worker write the same ``last_error``
texts, and neither leaves a job ``active`` when its outcome cannot be
written as asked.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import redis
import redis.asyncio as aioredis

import leaseq
import leaseq.aio
from leaseq.store.payloads import Codec
from leaseq.work import claims
from leaseq.work.claims import Prefetch
from leaseq.work.outage import error_kind
from leaseq.work.outcomes import completion_batch, decide
from tests.support.servers import RedisServer

ENCODE = Codec("json", None, 100).encode


# -- the pure function --------------------------------------------------------------


def test_a_return_value_completes_with_it() -> None:
    out = decide(None, {"ok": 1}, ENCODE)
    assert (out.kind, out.result, out.error) == ("complete", {"ok": 1}, "")


def test_retry_carries_its_delay_and_reason() -> None:
    out = decide(leaseq.Retry(in_=2.5, reason="later"))
    assert (out.kind, out.retry_in, out.error) == ("retry", 2.5, "Retry: later")


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "soon", 10**9])
def test_retry_with_a_bad_delay_falls_back_to_the_backoff_and_says_so(bad: Any) -> None:
    out = decide(leaseq.Retry(in_=bad, reason="later"))
    assert out.kind == "retry" and out.retry_in is None
    assert out.error.startswith("Retry: later (bad delay, queue backoff used: Retry.in_ ")


def test_dead_dead_letters_with_its_reason() -> None:
    out = decide(leaseq.Dead("poison"))
    assert (out.kind, out.error) == ("dead", "Dead: poison")


def test_any_other_exception_is_a_failure_with_type_message_and_its_traceback_apart() -> None:
    def handler() -> None:
        raise KeyError("k")

    try:
        handler()
    except KeyError as exc:
        out = decide(exc)
    assert out.kind == "retry" and out.retry_in is None
    assert out.error == "KeyError: 'k'" and "in handler" in out.traceback


def test_a_handlers_system_exit_is_its_own_failure() -> None:
    out = decide(SystemExit(3))
    assert out.kind == "retry" and out.error.startswith("SystemExit: 3")


def test_a_result_too_large_to_store_is_dead_naming_size_and_limit() -> None:
    out = decide(None, "x" * 500, ENCODE)
    assert out.kind == "dead" and out.result is None
    assert out.error.startswith(
        "ResultTooLarge: the handler returned a result of 502 bytes encoded, "
        "over the queue's max_payload_bytes of 100"
    )
    assert "xxxx" not in out.error


def test_a_result_that_is_not_data_is_dead_saying_why() -> None:
    out = decide(None, object(), ENCODE)
    assert out.kind == "dead"
    assert out.error.startswith(
        "InvalidResult: the handler's result (of type object) cannot be stored"
    )


def test_cancellation_reads_as_such() -> None:
    out = decide(asyncio.CancelledError())
    assert out.kind == "retry" and out.error == "CancelledError: the handler was cancelled"


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (leaseq.ServerUnavailable("down"), "transient"),
        (leaseq.LeaseLost("j", 1, None, None), "job"),
        (leaseq.DamagedRow("j", "attempts", "abc"), "job"),
        (leaseq.DamagedKey("active is a string"), "fatal"),
        (leaseq.ScriptError("unknown reply"), "fatal"),
    ],
)
def test_error_kinds(exc: leaseq.LeaseqError, kind: str) -> None:
    assert error_kind(exc) == kind


def _lease(queue: str, job_id: str, attempt: int, incarnation: int = 0) -> leaseq.Lease:
    return leaseq.Lease(
        id=job_id,
        queue=queue,
        attempt=attempt,
        max_attempts=3,
        payload=None,
        deadline=0.0,
        enqueued_at=0.0,
        worker="w",
        incarnation=incarnation,
    )


def test_a_completion_batch_holds_each_id_and_attempt_once() -> None:
    # A refusal names its lease by id and attempt: another queue's lease, or another
    # row's, with the same pair waits for the next call; another attempt does not.
    admit = completion_batch()
    assert admit(_lease("a", "j", 1))
    assert not admit(_lease("b", "j", 1))
    assert not admit(_lease("a", "j", 1, incarnation=7))
    assert admit(_lease("a", "j", 2)) and admit(_lease("b", "k", 1))


def test_a_worker_holds_two_leases_of_one_attempt_apart_by_their_fences() -> None:
    # After a failover that lost a claim the same worker may be handed the same
    # attempt again under a new fence while the first run goes on: both are held,
    # so the first is still heartbeated (and learns it is lost), not forgotten.
    import threading

    from leaseq.handler import JobContext
    from leaseq.work.held import HeldTable, Task

    first = msgspec.structs.replace(_lease("a", "j", 1), fence="f-lost")
    again = msgspec.structs.replace(first, fence="f-new")
    table = HeldTable(threading.Condition())
    tasks = [Task(lease, JobContext(lease), 0.0) for lease in (first, again)]
    with table.cond:
        table.add(tasks, 0.0)
    assert len(table.tasks) == 2 and all(table.holds(t) for t in tasks)
    assert {t.lease.fence for t in table.beat_due(1.0)} == {"f-lost", "f-new"}


def test_a_completion_batch_is_bounded() -> None:
    admit = completion_batch(limit=2)
    assert admit(_lease("a", "1", 1)) and admit(_lease("a", "2", 1))
    assert not admit(_lease("a", "3", 1))
    assert completion_batch()(_lease("a", "3", 1))  # each call starts afresh


# -- both workers, one policy -----------------------------------------------------------


def _ok(lease: leaseq.Lease) -> Any:
    return {"n": lease.payload["n"]}


def _boom(lease: leaseq.Lease) -> Any:
    raise ValueError("boom")


def _retry_bad(lease: leaseq.Lease) -> Any:
    raise leaseq.Retry(in_=-1, reason="negative")


def _dead(lease: leaseq.Lease) -> Any:
    raise leaseq.Dead("poison")


def _huge(lease: leaseq.Lease) -> Any:
    return "x" * 5000


def _not_data(lease: leaseq.Lease) -> Any:
    return object()


HANDLERS: dict[str, Callable[[leaseq.Lease], Any]] = {
    "ok": _ok,
    "boom": _boom,
    "retry_bad": _retry_bad,
    "dead": _dead,
    "huge": _huge,
    "not_data": _not_data,
}


def _dispatch(lease: leaseq.Lease) -> Any:
    return HANDLERS[lease.id](lease)


async def _adispatch(lease: leaseq.Lease) -> Any:
    await asyncio.sleep(0)
    return HANDLERS[lease.id](lease)


@pytest.fixture
def rs(rr: redis.Redis) -> redis.Redis:
    """A client on the real server, flushed (conftest's ``rr``)."""
    return rr


def _settings() -> dict[str, Any]:
    return {"backoff": 600.0, "max_attempts": 3, "max_payload_bytes": 1000}


def _seed(q: leaseq.Queue) -> None:
    for name in HANDLERS:
        q.enqueue({"n": name}, id=name)


def _rows(q: leaseq.Queue) -> dict[str, tuple[str, int, Any, str]]:
    out = {}
    for name in HANDLERS:
        job = q.get(name)
        assert job is not None
        first = (job.last_error or "").splitlines()[0] if job.last_error else ""
        out[name] = (job.state.value, job.attempts, job.result, first)
    return out


def test_both_workers_write_the_same_outcomes(rs: Any, redis_server: RedisServer) -> None:
    threaded = leaseq.Queue("threaded", redis=rs, **_settings())
    _seed(threaded)
    leaseq.Worker(threaded, _dispatch, handle_signals=False).run(burst=True)

    async def on_aio() -> None:
        client = aioredis.Redis(port=redis_server.port)
        aq = leaseq.aio.Queue("aio", redis=client, **_settings())
        await leaseq.aio.Worker(aq, _adispatch, ttl=5.0).run(burst=True)
        await client.aclose()

    _seed(leaseq.Queue("aio", redis=rs, **_settings()))
    asyncio.run(on_aio())
    rows = _rows(threaded)
    assert rows == _rows(leaseq.Queue("aio", redis=rs, **_settings()))
    # And what the policy says, job by job: nothing left active, no repr of a coroutine.
    assert rows["ok"] == ("succeeded", 1, {"n": "ok"}, "")
    assert rows["boom"][:2] == ("scheduled", 1) and rows["boom"][3] == "ValueError: boom"
    assert rows["retry_bad"][:2] == ("scheduled", 1)
    assert rows["retry_bad"][3].startswith("Retry: negative (bad delay, queue backoff used")
    assert rows["dead"] == ("dead", 1, None, "Dead: poison")
    assert rows["huge"][:2] == ("dead", 1) and rows["huge"][3].startswith("ResultTooLarge: ")
    assert rows["not_data"][:2] == ("dead", 1)
    assert rows["not_data"][3].startswith("InvalidResult: ")


def test_a_spare_is_overdue_after_the_ttl_or_the_floor_and_then_no_spares_are_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The one rule both workers follow: a spare waits at most max(ttl, floor).
    assert Prefetch(2, 3, 0.0, ttl=30.0).max_wait == 30.0
    assert Prefetch(2, 3, 0.0, ttl=1.0).max_wait == claims.SPARE_WAIT_FLOOR
    p = Prefetch(2, 3, 0.0, ttl=30.0)
    assert not p.overdue(100.0, 129.9) and p.overdue(100.0, 130.0)
    # Handed back: no spares (else it claims them straight back, and again at every
    # freed slot while handlers stay that slow); an idle slot is still filled.
    p.handed_back()
    assert p.limit == 2 and not p.room(2)
    assert p.room(1) and p.limit == 2


def test_spares_come_back_once_jobs_finish_fast_enough_to_use_them() -> None:
    p = Prefetch(2, 3, 0.0, ttl=30.0)  # 3 spares, each may wait 30 s
    p.handed_back()
    p.adapt(100, 10.0)  # the measure starts here
    p.adapt(104, 39.9)
    assert p.limit == 2  # under max_wait: not judged yet
    p.adapt(105, 40.0)  # 5 done in 30 s: 3 spares would wait ~18 s each, too long to keep
    assert p.limit == 2
    p.adapt(110, 70.0)  # 5 more: still not twice the spares
    assert p.limit == 2
    p.adapt(116, 100.0)  # 6 done in 30 s: the spares would be used in time
    assert p.limit == 5 and p.room(2)
    # An adaptive prefetch judges against the spares it would hold now.
    q = Prefetch(4, None, 0.0, ttl=1.0)  # max_wait: the 5 s floor
    q.handed_back()
    q.adapt(0, 1.0)
    q.adapt(7, 6.0)  # 7 done: fewer than twice its 4 spares
    assert q.limit == 4
    q.adapt(15, 11.0)
    assert q.limit == 8
    # A long ttl lets a spare wait long, but the rate is judged over HOLD_WINDOW at
    # most: once jobs are fast again, spares come back within seconds, not a ttl.
    slow = Prefetch(2, 3, 0.0, ttl=300.0)
    slow.handed_back()
    slow.adapt(0, 1.0)
    slow.adapt(2, 1.0 + claims.HOLD_WINDOW - 0.1)
    assert slow.limit == 2
    slow.adapt(3, 1.0 + claims.HOLD_WINDOW)  # 3 in 5 s: its 3 spares would start in 5 s
    assert slow.limit == 5
