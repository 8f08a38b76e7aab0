"""Bad input gets a typed leaseq error, subclassing the right built-in, and
nothing is written (contract section 5.7).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import leaseq
from tests.support.store import claim_one, snapshot

BAD_NAMES = [
    "",
    "a b",
    "a{b",
    "b}",
    "tab\there",
    "nul\x00",
    "new\nline",
    "é",
    "a" * 129,
    "slash/",
    5,
    None,
    b"bytes",
]


BAD_IDS = ["", "a b", "{x}", "x}", "{", "\t", "line\n", "bell\x07", "é", "a" * 257, 5, b"id"]


BAD_TTLS: list[Any] = [
    0,
    0.0,
    -1,
    -0.001,
    math.inf,
    -math.inf,
    math.nan,
    86_400.001,
    "30",
    None,
    True,
]


BAD_DELAYS: list[Any] = [-1, -0.001, math.inf, math.nan, 400 * 86_400.0, "1", True]


BAD_ATTEMPTS: list[Any] = [0, -1, True, False, 1.5, 3.0, "3", 1_000_001]


BAD_PRIORITIES: list[Any] = [-1, 1_000_001, True, 1.5, "1", None]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_queue_name_or_prefix(r: Any, name: Any) -> None:
    with pytest.raises(leaseq.InvalidName) as info:
        leaseq.Queue(name, redis=r)
    assert isinstance(info.value, ValueError) and isinstance(info.value, leaseq.LeaseqError)
    with pytest.raises(leaseq.InvalidName):
        leaseq.Queue("emails", redis=r, prefix=name)
    assert r.dbsize() == 0


def test_good_names_at_the_limits(r: Any) -> None:
    q = leaseq.Queue("a" * 128, redis=r, prefix="A.b_c-d:9")
    assert q.enqueue("x", id="!" + "~" * 254 + "|") == "!" + "~" * 254 + "|"
    assert q.enqueue("y", id="z" * 256) == "z" * 256
    assert q.keys.job("1") == "A.b_c-d:9:{" + "a" * 128 + "}:job:1"


@pytest.mark.parametrize(
    "settings",
    [
        {"max_attempts": 0},
        {"max_attempts": True},
        {"max_attempts": 2.0},
        {"backoff": -1},
        {"backoff": math.nan},
        {"backoff": "1"},
        {"keep_succeeded": -1},
        {"keep_succeeded": math.inf},
        {"serializer": "pickle"},
        {"max_payload_bytes": 0},
        {"lease_cap": 0},
        {"lease_cap": math.nan},
    ],
    ids=repr,
)
def test_bad_queue_settings(r: Any, settings: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Queue("emails", redis=r, **settings)
    assert r.dbsize() == 0


def test_unknown_setting_is_a_type_error(r: Any) -> None:
    with pytest.raises(TypeError):
        leaseq.Queue("emails", redis=r, max_attempt=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        leaseq.Queue("emails", r)  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [{"base": -1.0}, {"cap": math.inf}, {"jitter": 1.5}, {"base": 10.0, "cap": 1.0}, {"base": "1"}],
    ids=repr,
)
def test_bad_backoff(kwargs: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Backoff(**kwargs)


@pytest.mark.parametrize("job_id", BAD_IDS, ids=repr)
def test_bad_job_ids_write_nothing(q: leaseq.Queue, r: Any, job_id: Any) -> None:
    with pytest.raises(leaseq.InvalidName) as info:
        q.enqueue("x", id=job_id)
    assert isinstance(info.value, ValueError)
    with pytest.raises(leaseq.InvalidName):
        q.enqueue_many(["x", "y"], ids=["fine", job_id])
    for op in (q.cancel, q.retry_dead, q.get):
        with pytest.raises(leaseq.InvalidName):
            op(job_id)
    assert r.dbsize() == 0


ENQUEUE_BAD: list[tuple[str, Any]] = (
    [("delay", v) for v in BAD_DELAYS]
    + [("max_attempts", v) for v in BAD_ATTEMPTS]
    + [("priority", v) for v in BAD_PRIORITIES]
)


@pytest.mark.parametrize(("arg", "value"), ENQUEUE_BAD, ids=repr)
def test_bad_enqueue_numbers_write_nothing(q: leaseq.Queue, r: Any, arg: str, value: Any) -> None:
    with pytest.raises(leaseq.InvalidArgument) as info:
        q.enqueue("x", **{arg: value})
    assert isinstance(info.value, ValueError) and arg in str(info.value)
    with pytest.raises(leaseq.InvalidArgument):
        q.enqueue_many(["x"], **{arg: value})
    assert r.dbsize() == 0


@pytest.mark.parametrize(
    "payload", [object(), {"f": lambda: 0}, {"deep": [1, {"x": object()}]}], ids=repr
)
def test_unserialisable_payload_writes_nothing(q: leaseq.Queue, r: Any, payload: Any) -> None:
    with pytest.raises(leaseq.InvalidPayload) as info:
        q.enqueue(payload)
    assert isinstance(info.value, ValueError)
    assert r.dbsize() == 0


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
def test_bad_ttl_writes_nothing(q: leaseq.Queue, r: Any, ttl: Any) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    q.enqueue("y", id="other")
    before = snapshot(r)
    for call in (
        lambda: q.claim(ttl=ttl),
        lambda: q.claim_many(2, ttl=ttl),
        lambda: q.extend(lease, ttl=ttl),
    ):
        with pytest.raises(leaseq.InvalidArgument) as info:
            call()
        assert "ttl" in str(info.value)
    assert snapshot(r) == before


def test_ttl_at_the_limits(r: Any) -> None:
    q = leaseq.Queue("emails", redis=r, lease_cap=86_400.0)
    q.enqueue_many(["a", "b", "c"])
    day = claim_one(q, ttl=86_400.0)
    assert round((day.deadline - day.enqueued_at) * 1000) in range(86_400_000, 86_401_000)
    tiny = claim_one(q, ttl=0.0001)  # rounds up to one millisecond
    assert 0 < tiny.deadline - tiny.enqueued_at < 1.0
    # A ttl over the queue's lease_cap is refused, not silently cut.
    with pytest.raises(leaseq.InvalidArgument, match="lease_cap"):
        leaseq.Queue("emails", redis=r, lease_cap=3600.0).claim(ttl=7200.0)


OTHER_BAD: dict[str, Callable[[leaseq.Queue, leaseq.Lease], object]] = {
    "claim count 0": lambda q, lease: q.claim_many(0),
    "claim count -1": lambda q, lease: q.claim_many(-1),
    "claim count float": lambda q, lease: q.claim_many(1.5),  # type: ignore[arg-type]
    "claim count bool": lambda q, lease: q.claim_many(True),
    "claim worker": lambda q, lease: q.claim(worker="a b"),
    "claim block negative": lambda q, lease: q.claim(block=-1),
    "claim block nan": lambda q, lease: q.claim(block=math.nan),
    "fail retry_in negative": lambda q, lease: q.fail(lease, "x", retry_in=-1),
    "fail retry_in inf": lambda q, lease: q.fail(lease, "x", retry_in=math.inf),
    "fail retry_in nan": lambda q, lease: q.fail(lease, "x", retry_in=math.nan),
    "once name": lambda q, lease: q.once(lease, "has space"),
    "once name braces": lambda q, lease: q.once(lease, "{x}"),
    "retry attempts 0": lambda q, lease: q.retry_dead("job", attempts=0),
    "purge state": lambda q, lease: q.purge("nope"),
    "stats soon": lambda q, lease: q.stats(soon=-1),
    "complete_many results": lambda q, lease: q.complete_many([lease], results=[1, 2]),
}


@pytest.mark.parametrize("case", sorted(OTHER_BAD))
def test_other_bad_arguments_change_nothing(q: leaseq.Queue, r: Any, case: str) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    q.enqueue("y", id="other", delay=100.0)
    before = snapshot(r)
    with pytest.raises(leaseq.InvalidArgument) as info:
        OTHER_BAD[case](q, lease)
    assert isinstance(info.value, ValueError)
    assert snapshot(r) == before


def test_unknown_ids_are_lookup_errors(q: leaseq.Queue, r: Any) -> None:
    for op in (q.cancel, q.retry_dead):
        with pytest.raises(leaseq.JobNotFound) as info:
            op("missing")
        assert isinstance(info.value, LookupError) and info.value.job_id == "missing"
    assert q.get("missing") is None
    assert r.dbsize() == 0


def test_errors_are_one_hierarchy() -> None:
    assert issubclass(leaseq.AlreadyFinished, leaseq.LeaseLost)
    assert issubclass(leaseq.PayloadTooLarge, leaseq.InvalidPayload)
    for exc in (
        leaseq.LeaseLost,
        leaseq.InvalidArgument,
        leaseq.InvalidName,
        leaseq.InvalidPayload,
        leaseq.JobNotFound,
        leaseq.JobStateError,
        leaseq.DamagedRow,
        leaseq.DamagedKey,
        leaseq.ScriptError,
        leaseq.ServerUnavailable,
    ):
        assert issubclass(exc, leaseq.LeaseqError)
    assert issubclass(leaseq.ServerUnavailable, ConnectionError)


def test_msgpack_needs_a_client_that_returns_bytes(r: Any) -> None:
    from tests.support.backends import text_client

    with pytest.raises(leaseq.InvalidArgument, match="decode_responses"):
        leaseq.Queue("m", redis=text_client(r), serializer="msgpack")
    text = leaseq.Queue("j", redis=text_client(r))
    job_id = text.enqueue({"a": 1})
    lease = text.claim()
    assert lease is not None and lease.payload == {"a": 1}
    text.complete(lease, result=[1])
    job = text.get(job_id)
    assert job is not None and job.result == [1]
