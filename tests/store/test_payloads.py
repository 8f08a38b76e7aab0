"""The payload rules (README "Payload rules"): non-finite numbers are refused,
every other change of type is the documented one. Results follow the same
rules (they go through the same codec). Both backends, both serializers.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import leaseq

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
