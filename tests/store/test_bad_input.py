"""The bad-input matrix of docs/reliability.md: every row is a case here.

1. Bad arguments: each raises its typed leaseq error (also the matching
   built-in) and the server holds exactly what it held before.
2. Rows damaged by hand, in every state, field by field: every operation
   either works or raises a leaseq error (never anything else), the damaged
   job ends dead-lettered with a reason or left alone where it was, and
   every healthy job still runs to success.
3. Keys of the wrong Redis type, for every index key and a job key: a typed
   ``DamagedKey`` (or the job alone is dead-lettered), and the other queues
   on the same server keep working.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock

BIG = 1_048_576


def snapshot(r: Any) -> dict[bytes, Any]:
    """Every key with its type and value: 'writes nothing' means this is unchanged."""
    out: dict[bytes, Any] = {}
    for key in sorted(r.keys("*")):
        kind = r.type(key)
        if kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            out[key] = r.lrange(key, 0, -1)
        else:
            out[key] = (kind, r.dump(key) if kind != b"string" else r.get(key))
    return out


def circular() -> list[Any]:
    a: list[Any] = []
    a.append(a)
    return a


# -- 1. bad arguments -----------------------------------------------------------------

Case = Callable[[leaseq.Queue, leaseq.Lease], object]
"""A bad call, given the queue and a lease it holds (for the lease operations)."""


ARGUMENTS: dict[str, tuple[Case, type[Exception]]] = {
    # payloads
    "payload-object": (lambda q, h: q.enqueue(object()), leaseq.InvalidPayload),
    "payload-function": (lambda q, h: q.enqueue(print), leaseq.InvalidPayload),
    "payload-nested-object": (lambda q, h: q.enqueue({"a": [object()]}), leaseq.InvalidPayload),
    "payload-tuple-keys": (lambda q, h: q.enqueue({(1, 2): 1}), leaseq.InvalidPayload),
    "payload-circular": (lambda q, h: q.enqueue(circular()), leaseq.InvalidPayload),
    "payload-lone-surrogate": (lambda q, h: q.enqueue("\ud800"), leaseq.InvalidPayload),
    "payload-over-limit": (lambda q, h: q.enqueue("x" * BIG), leaseq.PayloadTooLarge),
    "payload-many-one-bad": (
        lambda q, h: q.enqueue_many([1, 2, object(), 4]),
        leaseq.InvalidPayload,
    ),
    "payload-many-one-too-large": (
        lambda q, h: q.enqueue_many([1, "x" * BIG]),
        leaseq.PayloadTooLarge,
    ),
    "result-object": (lambda q, h: q.complete(h, object()), leaseq.InvalidPayload),
    "result-over-limit": (lambda q, h: q.complete(h, "x" * BIG), leaseq.PayloadTooLarge),
    # job ids
    "id-empty": (lambda q, h: q.enqueue(1, id=""), leaseq.InvalidName),
    "id-open-brace": (lambda q, h: q.enqueue(1, id="a{b"), leaseq.InvalidName),
    "id-close-brace": (lambda q, h: q.enqueue(1, id="a}b"), leaseq.InvalidName),
    "id-hash-tag": (lambda q, h: q.enqueue(1, id="{other}"), leaseq.InvalidName),
    "id-space": (lambda q, h: q.enqueue(1, id="a b"), leaseq.InvalidName),
    "id-tab": (lambda q, h: q.enqueue(1, id="a\tb"), leaseq.InvalidName),
    "id-newline": (lambda q, h: q.enqueue(1, id="a\nb"), leaseq.InvalidName),
    "id-nul": (lambda q, h: q.enqueue(1, id="a\x00b"), leaseq.InvalidName),
    "id-escape": (lambda q, h: q.enqueue(1, id="a\x1b[2J"), leaseq.InvalidName),
    "id-del": (lambda q, h: q.enqueue(1, id="a\x7f"), leaseq.InvalidName),
    "id-non-ascii": (lambda q, h: q.enqueue(1, id="café"), leaseq.InvalidName),
    "id-257-chars": (lambda q, h: q.enqueue(1, id="x" * 257), leaseq.InvalidName),
    "id-10kB": (lambda q, h: q.enqueue(1, id="x" * 10_240), leaseq.InvalidName),
    "id-int": (lambda q, h: q.enqueue(1, id=42), leaseq.InvalidName),
    "id-bytes": (lambda q, h: q.enqueue(1, id=b"42"), leaseq.InvalidName),
    "id-many-one-bad": (
        lambda q, h: q.enqueue_many([1, 2], ids=["ok", "not ok"]),
        leaseq.InvalidName,
    ),
    "id-get": (lambda q, h: q.get("a b"), leaseq.InvalidName),
    "id-cancel": (lambda q, h: q.cancel("{x}"), leaseq.InvalidName),
    "id-retry": (lambda q, h: q.retry_dead("x" * 10_240), leaseq.InvalidName),
    "id-unknown-cancel": (lambda q, h: q.cancel("nope"), leaseq.JobNotFound),
    "id-unknown-retry": (lambda q, h: q.retry_dead("nope"), leaseq.JobNotFound),
    "worker-id-space": (lambda q, h: q.claim(ttl=1.0, worker="a b"), leaseq.InvalidName),
    "once-name-brace": (lambda q, h: q.once(h, "a{b}"), leaseq.InvalidName),
    "once-name-empty": (lambda q, h: q.once(h, ""), leaseq.InvalidName),
    # leases
    "ttl-zero": (lambda q, h: q.claim(ttl=0), leaseq.InvalidArgument),
    "ttl-negative": (lambda q, h: q.claim(ttl=-1.0), leaseq.InvalidArgument),
    "ttl-nan": (lambda q, h: q.claim(ttl=float("nan")), leaseq.InvalidArgument),
    "ttl-inf": (lambda q, h: q.claim(ttl=float("inf")), leaseq.InvalidArgument),
    "ttl-over-a-day": (lambda q, h: q.claim(ttl=86_401.0), leaseq.InvalidArgument),
    "ttl-absurd": (lambda q, h: q.claim(ttl=1e300), leaseq.InvalidArgument),
    "ttl-string": (lambda q, h: q.claim(ttl="30"), leaseq.InvalidArgument),
    "ttl-bool": (lambda q, h: q.claim(ttl=True), leaseq.InvalidArgument),
    "ttl-none": (lambda q, h: q.claim(ttl=None), leaseq.InvalidArgument),
    "extend-ttl-zero": (lambda q, h: q.extend(h, ttl=0), leaseq.InvalidArgument),
    "extend-ttl-string": (lambda q, h: q.extend(h, ttl="5"), leaseq.InvalidArgument),
    "block-negative": (lambda q, h: q.claim(block=-1.0), leaseq.InvalidArgument),
    "block-string": (lambda q, h: q.claim(block="1"), leaseq.InvalidArgument),
    "count-zero": (lambda q, h: q.claim_many(0), leaseq.InvalidArgument),
    "count-negative": (lambda q, h: q.claim_many(-5), leaseq.InvalidArgument),
    "count-string": (lambda q, h: q.claim_many("2"), leaseq.InvalidArgument),
    "count-absurd": (lambda q, h: q.claim_many(10**12), leaseq.InvalidArgument),
    # delays, retries, attempts, priority
    "delay-negative": (lambda q, h: q.enqueue(1, delay=-1.0), leaseq.InvalidArgument),
    "delay-nan": (lambda q, h: q.enqueue(1, delay=float("nan")), leaseq.InvalidArgument),
    "delay-inf": (lambda q, h: q.enqueue(1, delay=float("inf")), leaseq.InvalidArgument),
    "delay-absurd": (lambda q, h: q.enqueue(1, delay=1e12), leaseq.InvalidArgument),
    "delay-string": (lambda q, h: q.enqueue(1, delay="5"), leaseq.InvalidArgument),
    "retry-in-negative": (lambda q, h: q.fail(h, "x", -1.0), leaseq.InvalidArgument),
    "retry-in-nan": (lambda q, h: q.fail(h, "x", float("nan")), leaseq.InvalidArgument),
    "retry-in-string": (lambda q, h: q.fail(h, "x", "1"), leaseq.InvalidArgument),
    "max-attempts-zero": (lambda q, h: q.enqueue(1, max_attempts=0), leaseq.InvalidArgument),
    "max-attempts-negative": (lambda q, h: q.enqueue(1, max_attempts=-3), leaseq.InvalidArgument),
    "max-attempts-float": (lambda q, h: q.enqueue(1, max_attempts=2.0), leaseq.InvalidArgument),
    "max-attempts-string": (lambda q, h: q.enqueue(1, max_attempts="3"), leaseq.InvalidArgument),
    "max-attempts-bool": (lambda q, h: q.enqueue(1, max_attempts=True), leaseq.InvalidArgument),
    "max-attempts-absurd": (
        lambda q, h: q.enqueue(1, max_attempts=10**18),
        leaseq.InvalidArgument,
    ),
    "retry-attempts-zero": (lambda q, h: q.retry_dead("x", attempts=0), leaseq.InvalidArgument),
    "priority-negative": (lambda q, h: q.enqueue(1, priority=-1), leaseq.InvalidArgument),
    "priority-absurd": (lambda q, h: q.enqueue(1, priority=10**7), leaseq.InvalidArgument),
    "priority-string": (lambda q, h: q.enqueue(1, priority="1"), leaseq.InvalidArgument),
    "priority-float": (lambda q, h: q.enqueue(1, priority=0.5), leaseq.InvalidArgument),
    # states
    "state-unknown-ls": (lambda q, h: q.ls("weird"), leaseq.InvalidArgument),
    "state-unknown-purge": (lambda q, h: q.purge("weird"), leaseq.InvalidArgument),
    "state-active-purge": (lambda q, h: q.purge("active"), leaseq.InvalidArgument),
}


BUILTIN = {
    leaseq.InvalidName: ValueError,
    leaseq.InvalidArgument: ValueError,
    leaseq.InvalidPayload: ValueError,
    leaseq.PayloadTooLarge: ValueError,
    leaseq.JobNotFound: LookupError,
}


@pytest.mark.parametrize("case", sorted(ARGUMENTS))
def test_bad_argument_is_typed_and_writes_nothing(q: leaseq.Queue, r: Any, case: str) -> None:
    call, error = ARGUMENTS[case]
    q.enqueue_many([{"healthy": i} for i in range(3)], ids=["h0", "h1", "h2"])
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == "h0"
    before = snapshot(r)
    with pytest.raises(error) as info:
        call(q, lease)
    assert isinstance(info.value, leaseq.LeaseqError)
    assert isinstance(info.value, BUILTIN[error])
    assert snapshot(r) == before
    # ... and the queue still serves every healthy job.
    q.complete(lease)
    while more := q.claim(ttl=30.0):
        q.complete(more)
    assert q.stats().succeeded == 3


QUEUE_SETTINGS: dict[str, tuple[dict[str, Any], type[Exception]]] = {
    "name-empty": ({"name": ""}, leaseq.InvalidName),
    "name-braces": ({"name": "a{b}"}, leaseq.InvalidName),
    "name-space": ({"name": "a b"}, leaseq.InvalidName),
    "name-newline": ({"name": "a\n"}, leaseq.InvalidName),
    "name-nul": ({"name": "a\x00"}, leaseq.InvalidName),
    "name-non-ascii": ({"name": "été"}, leaseq.InvalidName),
    "name-129-chars": ({"name": "q" * 129}, leaseq.InvalidName),
    "name-10kB": ({"name": "q" * 10_240}, leaseq.InvalidName),
    "name-int": ({"name": 7}, leaseq.InvalidName),
    "prefix-braces": ({"prefix": "{x}"}, leaseq.InvalidName),
    "prefix-space": ({"prefix": "my prefix"}, leaseq.InvalidName),
    "max-attempts-zero": ({"max_attempts": 0}, leaseq.InvalidArgument),
    "max-attempts-string": ({"max_attempts": "5"}, leaseq.InvalidArgument),
    "backoff-negative": ({"backoff": -1.0}, leaseq.InvalidArgument),
    "backoff-string": ({"backoff": "1s"}, leaseq.InvalidArgument),
    "backoff-nan": ({"backoff": float("nan")}, leaseq.InvalidArgument),
    "keep-succeeded-negative": ({"keep_succeeded": -5.0}, leaseq.InvalidArgument),
    "keep-succeeded-string": ({"keep_succeeded": "1h"}, leaseq.InvalidArgument),
    "serializer-pickle": ({"serializer": "pickle"}, leaseq.InvalidArgument),
    "max-payload-zero": ({"max_payload_bytes": 0}, leaseq.InvalidArgument),
    "lease-cap-zero": ({"lease_cap": 0}, leaseq.InvalidArgument),
    "worker-id-braces": ({"worker_id": "w{1}"}, leaseq.InvalidName),
    "redis-none": ({"redis": None}, leaseq.InvalidArgument),
}


@pytest.mark.parametrize("case", sorted(QUEUE_SETTINGS))
def test_bad_queue_setting_is_refused_at_construction(r: Any, case: str) -> None:
    override, error = QUEUE_SETTINGS[case]
    settings: dict[str, Any] = {"name": "emails", "redis": r} | override
    name = settings.pop("name")
    with pytest.raises(error) as info:
        leaseq.Queue(name, **settings)
    assert isinstance(info.value, leaseq.LeaseqError) and isinstance(info.value, ValueError)
    assert r.keys("*") == []


def test_unknown_queue_setting_is_a_type_error(r: Any) -> None:
    with pytest.raises(TypeError):
        leaseq.Queue("emails", redis=r, max_attempt=3)  # type: ignore[call-arg]


@pytest.mark.parametrize("url", ["", "http://x", "redis://127.0.0.1:notaport/0", 5])
def test_bad_url_is_invalid_argument(url: Any) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Queue.from_url(url, "emails")


# -- 2. rows damaged by hand, in every state --------------------------------------------

STATES = ("pending", "scheduled", "active", "dead", "succeeded")


INDEXES = ("pending", "scheduled", "active", "succeeded", "dead", "cancelled")


def _set(field: str, value: str) -> Callable[[Any, str], object]:
    return lambda r, key: r.hset(key, field, value)


def _drop(field: str) -> Callable[[Any, str], object]:
    return lambda r, key: r.hdel(key, field)


def _retype(make: Callable[[Any, str], object]) -> Callable[[Any, str], object]:
    def damage(r: Any, key: str) -> None:
        r.delete(key)
        make(r, key)

    return damage


ROW_DAMAGE: dict[str, Callable[[Any, str], object]] = {
    "state=weird": _set("state", "weird"),
    "state=empty": _set("state", ""),
    "state missing": _drop("state"),
    "attempts=abc": _set("attempts", "abc"),
    "attempts=-1": _set("attempts", "-1"),
    "attempts=1e3": _set("attempts", "1e3"),
    "attempts=20 digits": _set("attempts", "9" * 20),
    "attempts missing": _drop("attempts"),
    "max_attempts=x": _set("max_attempts", "x"),
    "max_attempts=0": _set("max_attempts", "0"),
    "max_attempts missing": _drop("max_attempts"),
    "payload not JSON": _set("payload", "{{{"),
    "payload missing": _drop("payload"),
    "lease_until=soon": _set("lease_until", "soon"),
    "lease_until missing": _drop("lease_until"),
    "run_at=later": _set("run_at", "later"),
    "priority=high": _set("priority", "high"),
    "enqueued_at=yesterday": _set("enqueued_at", "yesterday"),
    "claimed_at=x": _set("claimed_at", "x"),
    "result not JSON": _set("result", "{{{"),
    "row deleted": lambda r, key: r.delete(key),
    "row is a string": _retype(lambda r, key: r.set(key, "oops")),
    "row is a list": _retype(lambda r, key: r.rpush(key, "a", "b")),
    "row is a zset": _retype(lambda r, key: r.zadd(key, {"a": 1})),
}


def _bad_job(q: leaseq.Queue, state: str, clock: Clock) -> leaseq.Lease | None:
    """The job 'bad', brought into ``state``; its lease when there is one."""
    short = clock.lease(5.0, 0.05)
    q.enqueue({"bad": True}, id="bad", delay=short if state == "scheduled" else None)
    if state in ("pending", "scheduled"):
        return None
    lease = q.claim(ttl=short)
    assert lease is not None and lease.id == "bad"
    if state == "dead":
        q.fail(lease, "failed for good", dead=True)
    elif state == "succeeded":
        q.complete(lease)
    return lease


def _tolerate(call: Callable[[], object], seen: list[str]) -> None:
    """Run an operation: it may work or raise a leaseq error, never anything else."""
    try:
        call()
        seen.append("ok")
    except leaseq.LeaseqError as exc:
        seen.append(type(exc).__name__)


@pytest.mark.parametrize("damage", sorted(ROW_DAMAGE))
@pytest.mark.parametrize("state", STATES)
def test_damaged_row_never_crashes_or_blocks_the_queue(
    q: leaseq.Queue, r: Any, clock: Clock, state: str, damage: str
) -> None:
    lease = _bad_job(q, state, clock)
    ROW_DAMAGE[damage](r, q.keys.job("bad"))
    q.enqueue_many([{"healthy": i} for i in range(3)], ids=["h0", "h1", "h2"])
    clock.advance(clock.lease(6.0, 0.06))  # the bad job's delay and lease have run out
    seen: list[str] = []
    if lease is not None:
        for op in (
            lambda: q.extend(lease, ttl=5.0),
            lambda: q.once(lease, "m"),
            lambda: q.complete(lease),
            lambda: q.fail(lease, "x"),
            lambda: q.release(lease),
        ):
            _tolerate(op, seen)
    for op in (
        q.reap,
        q.stats,
        lambda: q.get("bad"),
        lambda: q.cancel("bad"),
        *(lambda s=s: q.ls(s) for s in INDEXES),
    ):
        _tolerate(op, seen)
    ran: list[str] = []
    for _ in range(20):  # a damaged row may cost a claim, never the queue
        got: list[leaseq.Lease] = []
        _tolerate(lambda got=got: got.extend(q.claim_many(10, ttl=30.0)), seen)
        for held in got:
            ran.append(held.id)
            _tolerate(lambda held=held: q.complete(held), seen)
        if not got and seen[-1] == "ok":
            break
    assert {"h0", "h1", "h2"} <= set(ran)
    for job_id in ("h0", "h1", "h2"):
        job = q.get(job_id)
        assert job is not None and job.state is leaseq.State.SUCCEEDED
    _tolerate(lambda: q.retry_dead("bad"), seen)
    _tolerate(q.stats, seen)
    assert_accounted_for(q, r)


def assert_accounted_for(q: leaseq.Queue, r: Any) -> None:
    """The damaged job is dead-lettered with a reason, or left where an operator
    finds it: never orphaned (a hash in no index) and never in two indexes."""
    key = q.keys.job("bad")
    where = [s for s in INDEXES if r.zscore(q.keys.index(s), "bad") is not None]
    is_hash = r.type(key) == b"hash"
    state = (r.hget(key, "state") or b"").decode() if is_hash else ""
    # An ungrouped pending job of priority 0 waits in the ready LIST, not the
    # pending ZSET (docs/keys-and-rows.md#the-ready-list). An entry there is this row's
    # only while the row is pending: one of a row gone on is stale (the claim
    # drops it), not an index the row is in.
    if state == "pending" and b"bad" in r.lrange(q.keys.ready, 0, -1):
        where.append("pending")
    assert len(where) <= 1, f"'bad' is in {where}"
    if not is_hash:
        return  # gone, or not a row at all: nothing left to account for
    assert where, f"row 'bad' (state {state!r}) is in no index: orphaned"
    if state in INDEXES:
        assert where == [state], f"row 'bad' is {state} but indexed in {where}"
    if state == "dead":
        assert r.hget(key, "last_error"), "dead without a reason"
    assert where[0] in ("succeeded", "dead", "cancelled", "pending", "scheduled", "active")


# -- 3. keys of the wrong type ------------------------------------------------------------

KEY_KINDS: dict[str, Callable[[Any, str], object]] = {
    "string": lambda r, key: r.set(key, "oops"),
    "list": lambda r, key: r.rpush(key, "a"),
    "hash": lambda r, key: r.hset(key, "a", "b"),
}


QUEUE_KEYS = (
    *("pending", "scheduled", "active", "succeeded", "dead", "cancelled", "meta", "wake"),
    "ready",  # LIST: pending jobs, ungrouped and of priority 0
)


def _everything(q: leaseq.Queue, seen: list[str]) -> None:
    """Every operation once; each may work or raise a leaseq error."""
    _tolerate(lambda: q.enqueue({"x": 1}, id="new"), seen)
    _tolerate(lambda: q.enqueue({"x": 1}, id="later", delay=0.001), seen)
    leases: list[leaseq.Lease] = []
    _tolerate(lambda: leases.extend(q.claim_many(2, ttl=30.0)), seen)
    for i, lease in enumerate(leases):
        _tolerate(lambda lease=lease: q.extend(lease, ttl=30.0), seen)
        if i == 0:
            _tolerate(lambda lease=lease: q.complete(lease), seen)
        else:
            _tolerate(lambda lease=lease: q.fail(lease, "x", dead=True), seen)
    _tolerate(q.reap, seen)
    _tolerate(q.stats, seen)
    _tolerate(lambda: q.cancel("job"), seen)
    _tolerate(lambda: q.retry_dead("job"), seen)
    for state in INDEXES:
        _tolerate(lambda state=state: q.ls(state), seen)
    _tolerate(lambda: q.purge("dead"), seen)


@pytest.mark.parametrize(
    ("which", "kind"),
    [
        (which, kind)
        for which in QUEUE_KEYS
        for kind in sorted(KEY_KINDS)
        # their own types
        if (which, kind) not in (("meta", "hash"), ("wake", "list"), ("ready", "list"))
    ],
)
def test_queue_key_of_the_wrong_type_is_a_typed_error_and_spares_other_queues(
    q: leaseq.Queue, r: Any, which: str, kind: str
) -> None:
    other = leaseq.Queue("other", redis=r)
    other.enqueue_many([1, 2], ids=["o1", "o2"])
    q.enqueue({"x": 0}, id="job")
    key = getattr(q.keys, which)
    r.delete(key)
    KEY_KINDS[kind](r, key)
    seen: list[str] = []
    _everything(q, seen)
    assert set(seen) <= {"ok", "DamagedKey", "JobNotFound", "JobStateError"}, seen
    if which not in ("wake",):
        assert "DamagedKey" in seen, f"nothing noticed that {which} is a {kind}"
    # Another queue on the same server does not notice a thing.
    while lease := other.claim(ttl=30.0):
        other.complete(lease)
    assert other.stats().succeeded == 2
