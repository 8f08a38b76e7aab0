"""A job's way through the queue, on fakeredis and a real server: enqueue
(ids, dedup, batches, priority), claim (FIFO, leases stamped by the server
clock, delays, blocking claims), complete, fail and backoff, dead letters and
retry_dead, release, cancel, purge, extend and the lease cap, once().

Every case that takes ``q`` runs again on leaseq.aio (tests/transport/test_aio.py),
and every case that takes only ``q``, ``r`` and ``clock`` on Redis Cluster
(tests/transport/test_cluster.py).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

import leaseq
from leaseq.store.enqueue import enqueue_calls
from tests.support.backends import Clock
from tests.support.servers import wait_until
from tests.support.store import all_keys, claim_one, index, row, server_ms, snapshot

# -- the shortest path -----------------------------------------------------------------


def test_enqueue_claim_complete(q: leaseq.Queue) -> None:
    job_id = q.enqueue({"to": "a@b.c"})
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.id == job_id and lease.attempt == 1
    q.complete(lease, result="sent")
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.result == "sent"


def test_expired_lease_is_reaped(q: leaseq.Queue, clock: Clock) -> None:
    q.enqueue({"n": 1})
    lease = q.claim(ttl=clock.lease(30.0))
    assert lease is not None
    clock.past(lease.deadline)
    assert q.reap() == (1, 0)
    again = q.claim(ttl=30.0)
    assert again is not None and again.attempt == 2
    try:
        q.complete(lease)
    except leaseq.LeaseLost as exc:
        assert exc.token == 1
    else:
        raise AssertionError("stale lease completed")


# -- enqueue -------------------------------------------------------------------


def test_enqueue_writes_a_readable_row(q: leaseq.Queue, r: Any) -> None:
    before = server_ms(r)
    job_id = q.enqueue({"to": "a@b.c"}, priority=7)
    stored = row(q, job_id)
    assert stored["state"] == "pending"
    assert stored["attempts"] == "0"
    assert stored["max_attempts"] == "5"
    assert stored["payload"] == '{"to":"a@b.c"}'
    assert stored["priority"] == "7"
    assert before - 5 <= int(stored["enqueued_at"]) <= server_ms(r) + 5
    assert job_id in index(q, "pending")


@pytest.mark.parametrize(
    "state", ["pending", "scheduled", "active", "succeeded", "dead", "cancelled"]
)
def test_enqueue_dedups_by_id_in_every_state(q: leaseq.Queue, r: Any, state: str) -> None:
    q.enqueue({"v": 1}, id="job-1", delay=100.0 if state == "scheduled" else None)
    if state in ("active", "succeeded", "dead"):
        lease = claim_one(q)
        if state == "succeeded":
            q.complete(lease)
        elif state == "dead":
            q.fail(lease, "boom", dead=True)
    elif state == "cancelled":
        assert q.cancel("job-1") is True
    before = row(q, "job-1")
    assert before["state"] == state
    keys_before = all_keys(r)
    assert q.enqueue({"v": 2}, id="job-1") == "job-1"
    assert q.enqueue_many([{"v": 3}], ids=["job-1"]) == ["job-1"]
    assert row(q, "job-1") == before
    assert all_keys(r) == keys_before
    assert q.stats().totals["enqueued"] == 1


def test_enqueue_many_returns_ids_in_order_and_claims_fifo(q: leaseq.Queue) -> None:
    ids = q.enqueue_many([{"i": i} for i in range(7)])
    assert len(set(ids)) == 7
    got = [claim_one(q) for _ in ids]
    assert [lease.id for lease in got] == ids
    assert [lease.payload for lease in got] == [{"i": i} for i in range(7)]


def test_enqueue_many_with_one_bad_item_writes_nothing(q: leaseq.Queue, r: Any) -> None:
    with pytest.raises(leaseq.InvalidPayload):
        q.enqueue_many([{"ok": 1}, {"ok": 2}, {"bad": object()}])
    with pytest.raises(leaseq.InvalidName):
        q.enqueue_many([{"ok": 1}, {"ok": 2}], ids=["fine", "not fine"])
    with pytest.raises(leaseq.InvalidArgument):
        q.enqueue_many([{"ok": 1}], ids=["a", "b"])
    assert r.dbsize() == 0


def test_enqueue_many_across_chunks(q: leaseq.Queue) -> None:
    ids = q.enqueue_many([i for i in range(2500)])
    assert len(ids) == len(set(ids)) == 2500
    assert q.stats().pending == 2500
    # One claim call leases at most 1000 (CLAIM_LIMIT): three calls take them all, in order.
    assert [lease.id for _ in range(3) for lease in q.claim_many(2500)] == ids


def test_ids_made_by_the_client_are_fresh_and_valid(q: leaseq.Queue) -> None:
    ids = [q.enqueue("a"), *q.enqueue_many(["b", "c"]), q.enqueue("d", id="mine")]
    assert len(set(ids)) == 4 and ids[3] == "mine"
    for job_id in ids[:3]:
        # 80 bits in Crockford's base32: 16 characters, no i, l, o or u.
        assert re.fullmatch(r"[0-9a-hjkmnp-tv-z]{16}", job_id)
        assert row(q, job_id)["state"] == "pending"
    # Every character of the alphabet turns up, and nothing else: the 80 bits are all used.
    many = "".join(q.enqueue_many([{}] * 2_000))
    assert set(many) == set("0123456789abcdefghjkmnpqrstvwxyz")


def test_a_replayed_enqueue_creates_nothing_twice(q: leaseq.Queue, r: Any) -> None:
    # redis-py retries a call whose reply was lost: the very same script
    # call arrives twice. Client-made ids make the second one a no-op.
    ids, calls = enqueue_calls(q._core, ["a", "b"], None, {})
    assert q._run(calls[0]) == [1, 1]
    assert q._run(calls[0]) == [0, 0]
    assert q.stats().pending == 2
    assert [lease.id for lease in q.claim_many(5)] == ids


def test_priority_then_fifo(q: leaseq.Queue) -> None:
    q.enqueue("a", id="a", priority=5)
    q.enqueue("b", id="b", priority=0)
    q.enqueue("c", id="c", priority=5)
    q.enqueue("d", id="d", priority=0)
    q.enqueue("e", id="e", priority=1_000_000)
    q.enqueue("f", id="f", priority=1)
    order = [claim_one(q).id for _ in range(6)]
    assert order == ["b", "d", "f", "a", "c", "e"]
    assert q.claim() is None


def test_claim_many_counts(q: leaseq.Queue) -> None:
    q.enqueue_many(range(5))
    assert len(q.claim_many(3)) == 3
    assert len(q.claim_many(10)) == 2
    assert q.claim_many(1) == []
    assert q.stats().active == 5


# -- claim and the server clock --------------------------------------------------


def test_claim_stamps_lease_from_server_clock(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue({"n": 1})
    before = server_ms(r)
    lease = q.claim(ttl=30.0, worker="w-1")
    after = server_ms(r)
    assert lease is not None and lease.attempt == 1 and lease.worker == "w-1"
    stored = row(q, job_id)
    assert stored["state"] == "active" and stored["attempts"] == "1"
    assert stored["worker"] == "w-1"
    assert before + 30_000 <= int(stored["lease_until"]) <= after + 30_000
    assert int(stored["lease_until"]) == round(lease.deadline * 1000)
    assert index(q, "active") == {job_id: float(stored["lease_until"])}
    assert index(q, "pending") == {}


def test_delay_schedules_then_claim_promotes_when_due(q: leaseq.Queue, clock: Clock) -> None:
    delay = clock.lease(5.0, 0.05)
    job_id = q.enqueue({"n": 1}, delay=delay)
    stored = row(q, job_id)
    assert stored["state"] == "scheduled"
    assert index(q, "scheduled") == {job_id: float(stored["run_at"])}
    assert int(stored["run_at"]) - int(stored["enqueued_at"]) == round(delay * 1000)
    if clock.fake:
        assert q.claim() is None
        clock.advance(delay - 0.001)
        assert q.claim() is None
        clock.advance(0.001)
    lease = wait_until(lambda: q.claim(), what="the delayed job to be due")
    assert lease.id == job_id
    assert "run_at" not in row(q, job_id)
    assert index(q, "scheduled") == {}


def test_frozen_client_clock_changes_nothing_on_real_server(redis_server: Any) -> None:
    import redis as redis_lib
    from freezegun import freeze_time

    client = redis_lib.Redis(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("clock", redis=client)
    try:
        for when in ("1990-01-01", "2090-06-01"):
            with freeze_time(when):
                q.enqueue({"when": when}, delay=0.0)
                q.enqueue({"when": when, "later": True}, delay=100.0)
                lease = claim_one(q, ttl=30.0)
                now = server_ms(client)
                assert abs(lease.deadline * 1000 - (now + 30_000)) < 2_000
                extended = q.extend(lease, ttl=60.0)
                assert abs(extended.deadline * 1000 - (server_ms(client) + 60_000)) < 2_000
                job = q.get(lease.id)
                assert job is not None and job.enqueued_at is not None
                assert abs(job.enqueued_at * 1000 - now) < 2_000
                due = client.zrange(q.keys.scheduled, -1, -1, withscores=True)[0][1]
                assert abs(due - (now + 100_000)) < 2_000
                # Nothing reaps a lease that the server says still runs.
                assert q.reap() == (0, 0)
                q.complete(extended)
    finally:
        client.flushall()
        client.close()


def test_ten_millisecond_lease(q: leaseq.Queue, clock: Clock) -> None:
    job_id = q.enqueue("short")
    lease = claim_one(q, ttl=0.01)
    assert row(q, job_id)["lease_until"] == str(int(row(q, job_id)["claimed_at"]) + 10)
    if clock.fake:
        assert q.reap() == (0, 0)
        clock.advance(0.01)
    wait_until(lambda: q.reap() == (1, 0), what="the 10 ms lease to expire")
    again = claim_one(q)
    assert again.id == lease.id and again.attempt == 2
    assert "lease expired" in row(q, job_id)["last_error"]


# -- complete / fail / retries ----------------------------------------------------


def test_complete_stores_result_and_counts(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x")
    lease = claim_one(q)
    q.complete(lease, result={"sent": True})
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.SUCCEEDED
    assert job.result == {"sent": True} and job.lease_until is None
    assert job.finished_at is not None
    assert q.stats().succeeded == 1 and q.stats().active == 0
    assert index(q, "active") == {}


def test_fail_backs_off_into_scheduled_until_dead(r: Any, clock: Clock) -> None:
    base = clock.lease(1.0, 0.02)
    q = leaseq.Queue(
        "emails", redis=r, max_attempts=3, backoff=leaseq.Backoff(base=base, cap=100.0, jitter=0.0)
    )
    job_id = q.enqueue({"n": 1})
    for attempt in (1, 2):
        lease = claim_one(q)
        assert lease.attempt == attempt
        before = server_ms(r)
        assert q.fail(lease, f"boom {attempt}") is leaseq.State.SCHEDULED
        after = server_ms(r)
        stored = row(q, job_id)
        want = round(base * 2 ** (attempt - 1) * 1000)
        assert stored["state"] == "scheduled" and stored["last_error"] == f"boom {attempt}"
        assert before + want <= int(stored["run_at"]) <= after + want
        assert index(q, "scheduled") == {job_id: float(stored["run_at"])}
        assert index(q, "active") == {}
        if clock.fake:
            clock.advance(want / 1000 - 0.001)
            assert q.claim() is None
            clock.advance(0.001)
        else:
            clock.past(int(stored["run_at"]) / 1000)
    lease = claim_one(q)
    assert lease.attempt == 3 and lease.last_attempt
    assert q.fail(lease, "boom 3") is leaseq.State.DEAD
    stored = row(q, job_id)
    assert stored["state"] == "dead" and stored["last_error"] == "boom 3"
    assert stored["attempts"] == "3"
    assert job_id in index(q, "dead") and index(q, "scheduled") == {}
    assert q.claim() is None


def test_fail_with_zero_retry_goes_back_to_pending(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x")
    assert q.fail(claim_one(q), "again", retry_in=0) is leaseq.State.PENDING
    assert row(q, job_id)["state"] == "pending"
    assert claim_one(q).attempt == 2


def test_fail_dead_now(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x")
    assert q.fail(claim_one(q), "poison", dead=True) is leaseq.State.DEAD
    assert row(q, job_id)["state"] == "dead" and row(q, job_id)["last_error"] == "poison"
    assert q.stats().dead == 1


def test_huge_error_text_is_trimmed(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x")
    q.fail(claim_one(q), "e" * 100_000, dead=True)
    assert len(row(q, job_id)["last_error"]) <= 8192


def test_claim_never_happens_at_max_attempts(q: leaseq.Queue, r: Any) -> None:
    spent = q.enqueue("spent", id="spent", max_attempts=2)
    fine = q.enqueue("fine", id="fine")
    r.hset(q.keys.job(spent), "attempts", 2)
    lease = claim_one(q)
    assert lease.id == fine
    stored = row(q, spent)
    assert stored["state"] == "dead" and stored["attempts"] == "2"
    assert stored["last_error"] == "no attempts left (2 of 2)"
    assert q.claim() is None


def test_expired_last_attempt_is_dead_lettered_by_reap(q: leaseq.Queue, clock: Clock) -> None:
    job_id = q.enqueue("x", max_attempts=1)
    lease = claim_one(q, ttl=clock.lease(30.0))
    clock.past(lease.deadline)
    assert q.reap() == (0, 1)
    stored = row(q, job_id)
    assert stored["state"] == "dead"
    assert "lease expired" in stored["last_error"] and "no attempts left" in stored["last_error"]
    assert q.claim() is None


def test_retry_dead_raises_max_attempts_and_keeps_tokens_unique(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x", max_attempts=2)
    q.fail(claim_one(q), "one", retry_in=0)
    zombie = claim_one(q)
    assert q.fail(zombie, "two") is leaseq.State.DEAD
    assert q.retry_dead(job_id, attempts=3) == 5
    stored = row(q, job_id)
    assert stored["state"] == "pending"
    assert stored["attempts"] == "2" and stored["max_attempts"] == "5"
    fresh = claim_one(q)
    assert fresh.attempt == 3
    with pytest.raises(leaseq.LeaseLost):
        q.complete(zombie)
    assert row(q, job_id)["state"] == "active"
    q.complete(fresh)
    with pytest.raises(leaseq.JobStateError):
        q.retry_dead(job_id)
    with pytest.raises(leaseq.JobNotFound):
        q.retry_dead("nope")


def test_retry_all_dead(q: leaseq.Queue) -> None:
    for i in range(3):
        q.enqueue(i)
    for lease in q.claim_many(3):
        q.fail(lease, "x", dead=True)
    assert q.retry_all_dead() == 3
    assert q.stats().pending == 3 and q.stats().dead == 0


# -- release, cancel, purge --------------------------------------------------------


def test_release_refunds_the_attempt(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x", max_attempts=1)
    lease = claim_one(q)
    q.release(lease)
    stored = row(q, job_id)
    assert stored["state"] == "pending" and stored["attempts"] == "1"
    assert stored["max_attempts"] == "2" and "lease_until" not in stored
    assert index(q, "active") == {}
    again = claim_one(q)
    assert again.attempt == 2
    with pytest.raises(leaseq.LeaseLost):
        q.release(lease)


def test_cancel(q: leaseq.Queue) -> None:
    now_id = q.enqueue("now")
    later_id = q.enqueue("later", delay=100.0)
    assert q.cancel(now_id) is True
    assert q.cancel(later_id) is True
    assert q.cancel(later_id) is False
    assert row(q, now_id)["state"] == "cancelled"
    assert index(q, "pending") == {} and index(q, "scheduled") == {}
    assert q.stats().cancelled == 2
    done = q.enqueue("done")
    q.complete(claim_one(q))
    with pytest.raises(leaseq.JobStateError) as info:
        q.cancel(done)  # finished: past cancelling
    assert info.value.state == "succeeded"
    with pytest.raises(leaseq.JobNotFound) as missing:
        q.cancel("unknown")
    assert isinstance(missing.value, LookupError)


def test_purge(q: leaseq.Queue) -> None:
    ids = q.enqueue_many(range(4))
    leases = q.claim_many(3)
    for lease in leases[:2]:
        q.fail(lease, "x", dead=True)
    assert q.purge("dead") == 2
    assert all(not row(q, i) for i in ids[:2])
    with pytest.raises(leaseq.InvalidArgument):
        q.purge("active")
    with pytest.raises(leaseq.InvalidArgument):
        q.purge("bogus")
    assert row(q, ids[2])["state"] == "active"
    assert q.purge(leaseq.State.PENDING) == 1
    assert q.stats().pending == 0 and q.stats().active == 1


# -- extend and the lease cap ------------------------------------------------------


def test_extend_moves_deadline_on_server_clock(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue("x")
    lease = claim_one(q, ttl=5.0)
    before = server_ms(r)
    longer = q.extend(lease, ttl=60.0)
    assert longer.attempt == lease.attempt and longer.id == lease.id
    assert before + 60_000 <= round(longer.deadline * 1000) <= server_ms(r) + 60_000
    assert row(q, job_id)["lease_until"] == str(round(longer.deadline * 1000))
    assert index(q, "active")[job_id] == round(longer.deadline * 1000)


def test_extend_never_passes_the_lease_cap(r: Any, clock: Clock) -> None:
    cap = clock.lease(10.0, 0.3)
    q = leaseq.Queue("emails", redis=r, lease_cap=cap)
    job_id = q.enqueue("x")
    with pytest.raises(leaseq.InvalidArgument, match="lease_cap"):
        q.claim(ttl=cap * 10)  # a ttl over the cap is refused, nothing claimed
    lease = claim_one(q, ttl=cap)
    claimed_at = int(row(q, job_id)["claimed_at"])
    assert round(lease.deadline * 1000) == claimed_at + round(cap * 1000)
    clock.advance(cap / 5)
    lease = q.extend(lease, ttl=cap)
    assert round(lease.deadline * 1000) == claimed_at + round(cap * 1000)
    assert int(row(q, job_id)["lease_until"]) == claimed_at + round(cap * 1000)
    clock.past(lease.deadline)
    # Past the cap, a heartbeat cannot buy time: it is told the lease is over,
    # and the row keeps the capped deadline.
    with pytest.raises(leaseq.LeaseCapReached) as info:
        q.extend(lease, ttl=cap)
    assert isinstance(info.value, leaseq.LeaseLost)
    assert round(info.value.deadline * 1000) == claimed_at + round(cap * 1000)
    assert int(row(q, job_id)["lease_until"]) == claimed_at + round(cap * 1000)
    assert q.reap() == (1, 0)
    assert claim_one(q, ttl=cap).attempt == 2


# -- once ----------------------------------------------------------------------------


def test_once_is_true_only_the_first_time_across_attempts(q: leaseq.Queue) -> None:
    job_id = q.enqueue("x")
    first = claim_one(q)
    assert q.once(first, "charge") is True
    assert q.once(first, "charge") is False
    assert q.once(first, "email") is True
    q.fail(first, "x", retry_in=0)
    second = claim_one(q)
    assert q.once(second, "charge") is False
    job = q.get(job_id)
    assert job is not None and job.once == {"charge": 1, "email": 1}
    with pytest.raises(leaseq.LeaseLost):
        q.once(first, "other")


# -- durable steps ---------------------------------------------------------------------


def test_a_step_records_once_under_the_lease_and_reads_back_through_the_codec(
    q: leaseq.Queue, r: Any
) -> None:
    job_id = q.enqueue("x")
    first = claim_one(q)
    assert q.recorded_steps(first) == {}
    assert q.record_step(first, "charge", {"ids": (1, 2)}) == {"ids": [1, 2]}
    assert q.record_step(first, "charge", "again") == {"ids": [1, 2]}  # the first stands
    q.fail(first, "x", retry_in=0)
    second = claim_one(q)
    assert q.recorded_steps(second) == {"charge": {"ids": [1, 2]}}
    job = q.get(job_id)
    assert job is not None and job.steps == {"charge": {"ids": [1, 2]}}
    assert r.hget(f"leaseq:{{emails}}:job:{job_id}", "step:charge") == b'{"ids":[1,2]}'


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("", 1, leaseq.InvalidArgument),
        ("a b", 1, leaseq.InvalidArgument),
        ("ok", float("nan"), leaseq.InvalidPayload),
        ("ok", object(), leaseq.InvalidPayload),
        ("ok", "x" * (2 << 20), leaseq.PayloadTooLarge),
    ],
)
def test_a_step_the_checks_refuse_writes_nothing(
    q: leaseq.Queue, r: Any, name: str, value: Any, error: type[Exception]
) -> None:
    q.enqueue("x", id="j")
    lease = claim_one(q)
    before = snapshot(r)
    with pytest.raises(error):
        q.record_step(lease, name, value)
    assert snapshot(r) == before


# -- more ordering and timing ---------------------------------------------------------


def test_promoted_job_keeps_its_priority(q: leaseq.Queue, clock: Clock) -> None:
    delay = clock.lease(5.0, 0.05)
    q.enqueue("low", id="low", priority=5)
    q.enqueue("urgent", id="urgent", priority=0, delay=delay)
    clock.advance(delay + 0.001)
    assert [claim_one(q).id for _ in range(2)] == ["urgent", "low"]


def test_explicit_retry_in_overrides_backoff(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue("x")
    before = server_ms(r)
    assert q.fail(claim_one(q), "later", retry_in=7.5) is leaseq.State.SCHEDULED
    run_at = int(row(q, job_id)["run_at"])
    assert before + 7_500 <= run_at <= server_ms(r) + 7_500


def test_backoff_delays_are_capped_and_jittered() -> None:
    plain = leaseq.Backoff(base=0.5, cap=10.0, jitter=0.0)
    assert [plain.delay(n) for n in (1, 2, 3, 4, 5, 6, 100)] == [0.5, 1, 2, 4, 8, 10, 10]
    jittered = leaseq.Backoff(base=1.0, cap=60.0, jitter=0.5)
    for attempt in range(1, 12):
        full = min(60.0, 2.0 ** (attempt - 1))
        assert all(full / 2 <= jittered.delay(attempt) <= full for _ in range(20))


def test_blocking_claim_wakes_on_enqueue(r: Any) -> None:
    q = leaseq.Queue("emails", redis=r)
    timer = threading.Timer(0.05, lambda: q.enqueue("late", id="late"))
    started = time.monotonic()
    timer.start()
    try:
        lease = q.claim(block=5.0)
    finally:
        timer.cancel()
        # The claim can return before the timer's enqueue has read its own reply:
        # let it finish before the fixture closes the connections under it.
        timer.join(10.0)
    assert not timer.is_alive()
    assert lease is not None and lease.id == "late"
    assert time.monotonic() - started < 2.0


def test_blocking_claim_waits_for_a_delayed_job_and_gives_up(r: Any) -> None:
    q = leaseq.Queue("emails", redis=r)
    started = time.monotonic()
    assert q.claim(block=0.1) is None
    assert time.monotonic() - started >= 0.1
    q.enqueue("soon", id="soon", delay=0.1)
    lease = q.claim(block=5.0)
    assert lease is not None and lease.id == "soon"
    assert time.monotonic() - started < 2.5


def test_from_url(redis_server: Any) -> None:
    q = leaseq.Queue.from_url(redis_server.url, "urls", max_attempts=3)
    try:
        job_id = q.enqueue("x")
        assert claim_one(q).max_attempts == 3
        assert row(q, job_id)["state"] == "active"
    finally:
        q.redis.flushall()
        q.redis.close()
    memory = leaseq.Queue.from_url("memory://", "urls")
    memory.enqueue("y", id="y")
    assert claim_one(memory).id == "y"
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Queue.from_url("nope://x", "urls")
    with pytest.raises(TypeError):
        leaseq.Queue.from_url(redis_server.url, "urls", bogus=1)


def test_enqueue_many_dedups_within_one_batch(q: leaseq.Queue) -> None:
    q.enqueue("x", id="2")
    assert q.enqueue_many(["a", "b", "a2"], ids=["a", "b", "a"]) == ["a", "b", "a"]
    assert row(q, "a")["payload"] == '"a"'
    assert len(set(q.enqueue_many(["n1", "n2", "n3"]))) == 3
    assert q.stats().pending == 6 and q.stats().totals["enqueued"] == 6


def test_a_sleep_parks_the_job_in_its_own_index_until_a_claim_wakes_it(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    nap = clock.lease(5.0, 0.2)
    job_id = q.enqueue("x", max_attempts=1)
    first = claim_one(q)
    wakes = q.suspend(first, "nap", nap)
    job = q.get(job_id)
    assert job is not None and (job.state, job.steps) == (leaseq.State.SUSPENDED, {"nap": None})
    assert job.run_at == pytest.approx(wakes) and job.max_attempts == 2  # the attempt refunded
    assert list(index(q, "suspended")) == [job_id] and index(q, "active") == {}
    assert q.stats().suspended == 1 and q.claim(ttl=5.0) is None  # asleep: not claimable
    with pytest.raises(leaseq.LeaseLost):
        q.complete(first)  # its lease ended with the sleep
    clock.advance(nap + 0.01)
    second = claim_one(q)  # the claim wakes it first
    assert (second.id, second.attempt) == (job_id, 2)
    assert q.recorded_steps(second) == {"nap": None}
    q.complete(second, result="done")
    job = q.get(job_id)
    assert job is not None and (job.state, job.result) == (leaseq.State.SUCCEEDED, "done")


def test_a_suspended_job_can_be_deleted(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue("x")
    q.suspend(claim_one(q), "nap", 60.0)
    assert q.delete(job_id) == "suspended"  # the state it was in
    assert q.get(job_id) is None and index(q, "suspended") == {} and q.stats().suspended == 0
