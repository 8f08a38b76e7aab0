"""Contract-wide invariants: one script call per transition, every job in exactly
one state (and its index) at every step of a random workload, no pickle.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from leaseq.store.scripts import SCRIPTS
from tests.support.backends import Clock
from tests.support.store import claim_one, index, server_ms, text

STATE_INDEXES = ("pending", "scheduled", "active", "dead")


def _record_commands(r: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Patch the client so every command it sends is recorded by name."""
    sent: list[str] = []
    real = r.execute_command

    def execute_command(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]).upper())
        return real(*args, **options)

    monkeypatch.setattr(r, "execute_command", execute_command)
    return sent


def test_each_transition_is_one_script_call(
    r: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = leaseq.Queue("one", redis=r, keep_succeeded=10.0, backoff=0.0)
    q.stats()  # the first call loads the scripts and reads maxmemory-policy once
    for script in SCRIPTS.values():
        r.script_load(script.plain)  # what a server without #!lua flags runs
        with contextlib.suppress(redis.ResponseError):  # Redis 6 cannot compile '#!lua'
            r.script_load(script.source)
    q.enqueue("x", id="expired")
    expired = claim_one(q, ttl=clock.lease(1.0))
    clock.past(expired.deadline)
    sent = _record_commands(r, monkeypatch)
    ops: list[Any] = [
        lambda: q.enqueue("a", id="a"),
        lambda: q.enqueue_many(["b", "c", "d", "e"], ids=["b", "c", "d", "e"]),
        lambda: q.enqueue("f", id="f", delay=100.0),
        lambda: q.cancel("f"),
        lambda: q.reap(),
        lambda: held.update({lease.id: lease for lease in q.claim_many(5, ttl=30.0)}),
        lambda: held.update(a=q.extend(held["a"], ttl=60.0)),
        lambda: q.once(held["a"], "m"),
        lambda: q.complete(held["a"]),
        lambda: q.complete_many([held["e"]]),
        lambda: q.fail(held["b"], "x"),
        lambda: q.release(held["c"]),
        lambda: q.fail(held["d"], "x", dead=True),
        lambda: q.retry_dead("d"),
        lambda: q.purge("pending"),
        lambda: q.stats(),
    ]
    held: dict[str, leaseq.Lease] = {}
    for op in ops:
        op()
    assert sent == ["EVALSHA"] * len(ops)
    assert sorted(held) == ["a", "b", "c", "d", "e"]
    assert q.stats().pending == 0


def _check_invariants(q: leaseq.Queue, seen: dict[str, int]) -> None:
    r = q.redis
    where: dict[str, list[str]] = {}
    alive: set[str] = set()
    finished: dict[tuple[str, str], float] = {}
    now = server_ms(r)
    for name in (*STATE_INDEXES, "succeeded", "cancelled"):
        for member, score in r.zrange(q.keys.index(name), 0, -1, withscores=True):
            where.setdefault(text(member), []).append(name)
            finished[(name, text(member))] = score
    # Ungrouped pending jobs of priority 0 wait in the ready LIST, not the pending
    # ZSET (docs/keys-and-rows.md#the-ready-list). An entry there indexes its job as pending
    # while the row is such a job (one entry per job: a second is stale); any other
    # entry is stale, one whose job left without a claim, and meta field ready_stale
    # counts exactly those (stats' pending count subtracts it).
    listed = [text(member) for member in r.lrange(q.keys.ready, 0, -1)]
    live: set[str] = set()
    for job_id in listed:
        state, group, priority = r.hmget(q.keys.job(job_id), "state", "group", "priority")
        if state == b"pending" and group is None and int(priority or 0) == 0:
            live.add(job_id)
    for job_id in live:
        where.setdefault(job_id, []).append("pending")
    stale_entries = int(r.hget(q.keys.meta, "ready_stale") or 0)
    assert len(listed) - len(live) == stale_entries, f"ready {listed}, {stale_entries} stale"
    for raw in r.keys(q.keys.job("*")):
        job_id = text(raw)[len(q.keys.job_prefix) :]
        fields = {text(k): text(v) for k, v in r.hgetall(raw).items()}
        if not fields:
            continue  # expired between KEYS and HGETALL (real clock)
        state, attempts, bound = (
            fields["state"],
            int(fields["attempts"]),
            int(fields["max_attempts"]),
        )
        assert attempts >= seen.get(job_id, 0), f"attempts went down on {job_id}"
        seen[job_id] = attempts
        alive.add(job_id)
        assert attempts <= bound, f"{job_id} ran more than max_attempts"
        indexes = where.pop(job_id, [])
        # A finished index may still list an id whose kept row expired and
        # was enqueued afresh: only while its entry is past (the lazy trim).
        stale = {
            name
            for name in indexes
            if name in ("succeeded", "cancelled") and finished[(name, job_id)] <= now
        }
        if state in STATE_INDEXES:
            assert set(indexes) - stale == {state}, f"{job_id} is {state}, indexed in {indexes}"
        else:
            assert set(indexes) <= {state, *stale}, f"{job_id} is {state}, indexed in {indexes}"
        assert ("lease_until" in fields) == (state == "active")
    for gone in set(seen) - alive:
        del seen[gone]  # an expired row: its id may be enqueued afresh
    # Index entries without a row may only be finished ones awaiting the lazy trim.
    for job_id, indexes in where.items():
        assert set(indexes) <= {"succeeded", "cancelled"}, f"orphan {job_id} in {indexes}"


REAL_LEASE = 0.5
"""Seconds a lease lasts on the real server: the frozen clock of the fakeredis
copy moves leases past their deadlines on purpose; on the real one, a loaded
machine (CI runs two passes at once) takes tens of ms a step, and leases much
shorter than this would expire between nearly every claim and its completion."""


def test_random_workload_keeps_every_job_in_one_state(r: Any, clock: Clock, backend: str) -> None:
    rng = random.Random(20261129)
    q = leaseq.Queue(
        "mix", redis=r, max_attempts=3, backoff=clock.lease(0.5, 0.005), keep_succeeded=1.0
    )
    held: list[leaseq.Lease] = []
    seen: dict[str, int] = {}
    for step in range(160):
        op = rng.choice(
            [
                "enqueue",
                "enqueue",
                "claim",
                "claim",
                "complete",
                "fail",
                "release",
                "extend",
                "reap",
                "cancel",
                "retry",
                "dup",
                "advance",
            ]
        )
        if op == "enqueue":
            n = rng.randint(1, 3)
            q.enqueue_many(
                range(n),
                delay=rng.choice([None, clock.lease(1.0, 0.01)]),
                # ids from the seeded rng keep the run the same every time
                ids=[f"j{step}-{i}" for i in range(n)],
            )
        elif op == "dup":
            q.enqueue("dup", id=f"d{rng.randint(0, 5)}")
        elif op == "claim":
            held += q.claim_many(rng.randint(1, 3), ttl=clock.lease(2.0, REAL_LEASE))
        elif op == "advance":
            clock.advance(clock.lease(rng.choice([0.3, 1.5, 3.0]), 0.005))
        elif op == "reap":
            q.reap()
        elif op in ("cancel", "retry"):
            # The head of pending (the ready list's first live entry, then the ZSET's).
            ids = list(index(q, "pending")) if op == "cancel" else r.zrange(q.keys.dead, 0, 0)
            if ids:
                job_id = text(ids[0])
                with contextlib.suppress(leaseq.JobStateError):  # it moved on meanwhile
                    q.cancel(job_id) if op == "cancel" else q.retry_dead(job_id)
        elif held:
            lease = held.pop(rng.randrange(len(held)))
            try:
                if op == "complete":
                    q.complete(lease)
                elif op == "fail":
                    q.fail(lease, f"step {step}", dead=rng.random() < 0.1)
                elif op == "release":
                    q.release(lease)
                else:
                    held.append(q.extend(lease, ttl=clock.lease(2.0, REAL_LEASE)))
            except leaseq.LeaseLost:
                pass  # expired and reaped (or re-claimed): refused, nothing changed
        _check_invariants(q, seen)
    assert seen, "the workload made jobs"
    totals = q.stats().totals
    assert totals["enqueued"] >= 20 and totals["succeeded"] >= 5, totals
    if backend == "fake":
        # On the frozen clock the run is the same every time, so it must have
        # walked the dead and expired paths too. On a real server, under a loaded
        # machine, which leases run out depends on timing; the invariants above
        # are what that run checks.
        assert totals.get("dead", 0) >= 1 and totals.get("expired", 0) >= 1, totals


def test_no_pickle_anywhere() -> None:
    root = Path(__file__).resolve().parents[2] / "leaseq"
    for path in root.rglob("*.py"):
        source = path.read_text()
        assert "import pickle" not in source and "pickle.loads" not in source, path


def test_stale_lease_cannot_touch_a_job_retried_from_dead(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job", max_attempts=1)
    zombie = claim_one(q)
    q.fail(zombie, "x")
    q.retry_dead("job", attempts=1)
    with pytest.raises(leaseq.LeaseLost):
        q.complete(zombie)
    fresh = claim_one(q)
    assert fresh.attempt == 2
    q.complete(fresh)
