"""The queue's clock: deadlines and schedules are stamped from max(TIME, the
meta ``clock`` floor).

A clock that goes back (a failover to a replica whose clock is behind)
never shortens a lease or makes a retry due early. A clock that jumps
forward and is corrected does not freeze the queue: the floor holds the
queue's time back by at most CLOCK_HOLD (10 s), past that it follows the
server's TIME again, and ``reset_clock`` drops the floor at once.

On fakeredis the server's TIME follows freezegun, so moving the frozen clock
stands in for the server's clock moving.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from freezegun import freeze_time

import leaseq
from leaseq.store.settings import CLOCK_HOLD
from tests.support.store import row

# -- a clock that goes back ------------------------------------------------------------


START = dt.datetime(2026, 1, 1, 12, 0, 0)


@pytest.fixture
def fq() -> Any:
    import fakeredis

    return leaseq.Queue("emails", redis=fakeredis.FakeRedis(server=fakeredis.FakeServer()))


def test_a_clock_that_goes_back_never_shortens_a_lease(fq: leaseq.Queue) -> None:
    with freeze_time(START) as frozen:
        fq.enqueue("a", id="a")
        lease = fq.claim(ttl=30.0)
        assert lease is not None
        # The new primary is behind, by less than the floor's 10 s bound.
        frozen.move_to(START - dt.timedelta(seconds=8))
        longer = fq.extend(lease, ttl=30.0)
        assert longer.deadline >= lease.deadline
        # The lease is not reaped early, although TIME is 8 s before it began.
        assert fq.reap() == (0, 0)
        fq.enqueue("b", id="b")
        assert int(row(fq, "b")["enqueued_at"]) >= round(lease.deadline * 1000) - 30_000


def test_a_retry_is_never_due_before_the_time_already_seen(fq: leaseq.Queue) -> None:
    with freeze_time(START) as frozen:
        fq.enqueue("a", id="a")
        lease = fq.claim(ttl=30.0)
        assert lease is not None
        seen = int(fq.redis.hget(fq.keys.meta, "clock"))
        frozen.move_to(START - dt.timedelta(seconds=10))  # the bound, inclusive
        assert fq.fail(lease, "boom", retry_in=5.0) is leaseq.State.SCHEDULED
        assert int(row(fq, "a")["run_at"]) == seen + 5000


def test_stats_reads_the_clock_without_writing(q: leaseq.Queue) -> None:
    assert q.stats().pending == 0
    assert q.redis.exists(q.keys.meta) == 0  # no queue made by looking at it
    q.enqueue("a")
    assert "clock" not in q.stats().totals


# -- a clock that jumps forward and is corrected ---------------------------------------


T0 = dt.datetime(2026, 3, 1, 12, 0, 0)


MS0 = int(T0.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


@pytest.fixture
def fq_jump() -> Any:
    import fakeredis

    return leaseq.Queue("clock", redis=fakeredis.FakeRedis(server=fakeredis.FakeServer()))


def test_a_corrected_forward_jump_does_not_freeze_the_queue(fq_jump: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        frozen.move_to(T0 + dt.timedelta(hours=1))  # the server clock jumps ahead
        fq_jump.enqueue("seen", id="seen")  # ... and the floor records it
        assert int(fq_jump.redis.hget(fq_jump.keys.meta, "clock")) == MS0 + 3_600_000
        frozen.move_to(T0)  # NTP sets it right
        fq_jump.enqueue("a", id="a", delay=2.0)
        # Time is the server's again, not an hour ahead and standing still.
        assert int(row(fq_jump, "a")["run_at"]) == MS0 + 2000
        lease = fq_jump.claim(ttl=1.0)
        assert lease is not None and lease.id == "seen"
        assert lease.deadline == pytest.approx(MS0 / 1000 + 1.0)
        frozen.tick(1.5)
        assert fq_jump.reap() == (1, 0)  # the lease ran out after 1 s, not after an hour
        frozen.tick(1.0)
        assert {lease.id for lease in fq_jump.claim_many(5)} == {"a", "seen"}


def test_the_floor_still_holds_a_small_step_back(fq_jump: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        fq_jump.enqueue("a", id="a")
        lease = fq_jump.claim(ttl=30.0)
        assert lease is not None
        frozen.move_to(T0 - dt.timedelta(seconds=CLOCK_HOLD))  # a failover to a slower clock
        assert fq_jump.extend(lease, ttl=30.0).deadline == lease.deadline  # never earlier
        frozen.move_to(T0 - dt.timedelta(seconds=CLOCK_HOLD + 0.001))  # past the bound
        assert fq_jump.extend(lease, ttl=30.0).deadline == pytest.approx(lease.deadline - 10.001)


def test_a_frozen_queue_time_lasts_at_most_the_bound(fq_jump: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        frozen.move_to(T0 + dt.timedelta(seconds=8))
        fq_jump.enqueue("x", id="x")
        frozen.move_to(T0)
        for _ in range(8):  # held at T0 + 8 s while the server catches up
            assert fq_jump.stats().server_time == MS0 / 1000 + 8
            frozen.tick(1.0)
        frozen.tick(0.5)
        assert fq_jump.stats().server_time == MS0 / 1000 + 8.5


def test_reset_clock_lets_an_operator_out_at_once(fq_jump: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        frozen.move_to(T0 + dt.timedelta(seconds=9))
        fq_jump.enqueue("x", id="x")
        frozen.move_to(T0)
        assert fq_jump.stats().server_time == MS0 / 1000 + 9  # held, within the bound
        assert fq_jump.reset_clock() == (MS0 / 1000 + 9, MS0 / 1000)
        assert fq_jump.stats().server_time == MS0 / 1000
        assert fq_jump.redis.hget(fq_jump.keys.meta, "clock") is None
        assert fq_jump.reset_clock() == (None, MS0 / 1000)  # a replay finds nothing to drop
        fq_jump.enqueue("y", id="y")
        assert int(row(fq_jump, "y")["enqueued_at"]) == MS0
