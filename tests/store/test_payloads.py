"""What a payload may be, on both backends: the codecs (JSON, msgpack, a typed
msgspec payload), the size limit checked before any write, and the payload
rules (README "Payload rules"): non-finite numbers are refused, every other
change of type is the documented one. Results follow the same rules (they go
through the same codec).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

import leaseq
from tests.support.servers import wait_until
from tests.support.store import claim_one, row

# -- codecs and the size limit ---------------------------------------------------------


class Email(msgspec.Struct):
    to: str
    retries: int = 0


def test_typed_payload_rejected_at_enqueue_and_typed_at_claim(r: Any) -> None:
    q = leaseq.Queue("typed", redis=r, payload_type=Email)
    with pytest.raises(leaseq.InvalidPayload):
        q.enqueue({"to": 5})
    with pytest.raises(leaseq.InvalidPayload):
        q.enqueue_many([Email(to="a"), {"nope": 1}])
    assert r.dbsize() == 0
    q.enqueue(Email(to="a@b.c"))
    q.enqueue({"to": "d@e.f"})
    got = [claim_one(q).payload for _ in range(2)]
    assert got == [Email(to="a@b.c"), Email(to="d@e.f")]


def test_typed_payload_failing_at_claim_is_dead_lettered(r: Any) -> None:
    q = leaseq.Queue("typed", redis=r, payload_type=Email)
    bad = q.enqueue(Email(to="x"), id="bad")
    good = q.enqueue(Email(to="y"), id="good")
    r.hset(q.keys.job(bad), "payload", '{"to": 42}')
    leases = wait_until(lambda: q.claim_many(2), what="the good job")
    assert [lease.id for lease in leases] == [good]
    stored = row(q, bad)
    assert stored["state"] == "dead"
    assert "payload does not decode" in stored["last_error"]
    assert q.claim() is None


def test_msgpack_round_trip(r: Any) -> None:
    q = leaseq.Queue("packed", redis=r, serializer="msgpack")
    payload = {"to": "a@b.c", "n": [1, 2.5, None], "raw": b"\x00\xff"}
    job_id = q.enqueue(payload)
    lease = claim_one(q)
    assert lease.payload == payload
    q.complete(lease, result={"ok": b"\x01"})
    job = q.get(job_id)
    assert job is not None and job.payload == payload and job.result == {"ok": b"\x01"}


def test_max_payload_bytes_enforced_before_any_write(r: Any) -> None:
    q = leaseq.Queue("small", redis=r, max_payload_bytes=100)
    with pytest.raises(leaseq.PayloadTooLarge) as info:
        q.enqueue("x" * 200)
    assert isinstance(info.value, ValueError) and info.value.limit == 100
    with pytest.raises(leaseq.PayloadTooLarge):
        q.enqueue_many(["ok", "x" * 200])
    assert r.dbsize() == 0
    q.enqueue("x" * 90)
    assert r.dbsize() > 0


# -- the payload rules, both serializers -----------------------------------------------


NON_FINITE = [
    float("nan"),
    float("inf"),
    -math.inf,
    {"x": float("nan")},
    [1, {"deep": [2.0, float("-inf")]}],
    (1.0, float("inf")),
]


@pytest.fixture(params=["json", "msgpack"])
def sq(r: Any, request: pytest.FixtureRequest) -> leaseq.Queue:
    return leaseq.Queue("rules", redis=r, serializer=request.param, keep_succeeded=60.0)


@pytest.mark.parametrize("payload", NON_FINITE, ids=repr)
def test_non_finite_payload_is_refused_and_writes_nothing(sq: leaseq.Queue, payload: Any) -> None:
    with pytest.raises(leaseq.InvalidPayload, match="non-finite"):
        sq.enqueue(payload)
    with pytest.raises(leaseq.InvalidPayload, match="non-finite"):
        sq.enqueue_many([{"ok": 1.5}, payload])
    assert sq.stats().pending == 0


def test_finite_floats_and_nulls_still_pass(sq: leaseq.Queue) -> None:
    job_id = sq.enqueue({"a": None, "b": 1.5, "c": [None, -0.0, 1e308]})
    job = sq.get(job_id)
    assert job is not None and job.payload == {"a": None, "b": 1.5, "c": [None, -0.0, 1e308]}


def test_non_finite_result_is_refused(sq: leaseq.Queue) -> None:
    sq.enqueue({"n": 1})
    lease = sq.claim()
    assert lease is not None
    with pytest.raises(leaseq.InvalidPayload, match="result holds a non-finite number"):
        sq.complete(lease, result={"score": float("nan")})
    job = sq.get(lease.id)
    assert job is not None and job.state is leaseq.State.ACTIVE  # nothing written
    sq.complete(lease, result={"score": 0.5})


def test_documented_conversions(sq: leaseq.Queue) -> None:
    payload = {"t": (1, 2), "s": {3}, "f": frozenset({4}), "b": b"\x00hi", "k": {1: "one"}}
    job = sq.get(sq.enqueue(payload))
    assert job is not None
    got = job.payload
    assert got["t"] == [1, 2] and got["s"] == [3] and got["f"] == [4]
    if sq._core.codec.name == "json":
        assert got["b"] == "AGhp"  # base64 text
        assert got["k"] == {"1": "one"}  # JSON object keys are strings
    else:
        assert got["b"] == b"\x00hi"
        assert got["k"] == {1: "one"}
