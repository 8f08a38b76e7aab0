"""Issue 9, defect 5: a server clock that jumps forward and is corrected must
not freeze the queue. The clock floor (meta field ``clock``) holds the
queue's time back by at most CLOCK_HOLD (10 s); past that it follows the
server's TIME again, and ``reset_clock`` drops the floor at once.

fakeredis's TIME follows freezegun, so moving the frozen clock stands in
for the server's clock jumping.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from freezegun import freeze_time

import leaseq
from leaseq.store.core import CLOCK_HOLD
from tests.support.store import row

T0 = dt.datetime(2026, 3, 1, 12, 0, 0)


MS0 = int(T0.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


@pytest.fixture
def fq() -> Any:
    import fakeredis

    return leaseq.Queue("clock", redis=fakeredis.FakeRedis(server=fakeredis.FakeServer()))


def test_a_corrected_forward_jump_does_not_freeze_the_queue(fq: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        frozen.move_to(T0 + dt.timedelta(hours=1))  # the server clock jumps ahead
        fq.enqueue("seen", id="seen")  # ... and the floor records it
        assert int(fq.redis.hget(fq.keys.meta, "clock")) == MS0 + 3_600_000
        frozen.move_to(T0)  # NTP sets it right
        fq.enqueue("a", id="a", delay=2.0)
        # Time is the server's again, not an hour ahead and standing still.
        assert int(row(fq, "a")["run_at"]) == MS0 + 2000
        lease = fq.claim(ttl=1.0)
        assert lease is not None and lease.id == "seen"
        assert lease.deadline == pytest.approx(MS0 / 1000 + 1.0)
        frozen.tick(1.5)
        assert fq.reap() == (1, 0)  # the lease ran out after 1 s, not after an hour
        frozen.tick(1.0)
        assert {lease.id for lease in fq.claim_many(5)} == {"a", "seen"}


def test_the_floor_still_holds_a_small_step_back(fq: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        fq.enqueue("a", id="a")
        lease = fq.claim(ttl=30.0)
        assert lease is not None
        frozen.move_to(T0 - dt.timedelta(seconds=CLOCK_HOLD))  # a failover to a slower clock
        assert fq.extend(lease, ttl=30.0).deadline == lease.deadline  # never earlier
        frozen.move_to(T0 - dt.timedelta(seconds=CLOCK_HOLD + 0.001))  # past the bound
        assert fq.extend(lease, ttl=30.0).deadline == pytest.approx(lease.deadline - 10.001)


def test_a_frozen_queue_time_lasts_at_most_the_bound(fq: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        frozen.move_to(T0 + dt.timedelta(seconds=8))
        fq.enqueue("x", id="x")
        frozen.move_to(T0)
        for _ in range(8):  # held at T0 + 8 s while the server catches up
            assert fq.stats().server_time == MS0 / 1000 + 8
            frozen.tick(1.0)
        frozen.tick(0.5)
        assert fq.stats().server_time == MS0 / 1000 + 8.5


def test_reset_clock_lets_an_operator_out_at_once(fq: leaseq.Queue) -> None:
    with freeze_time(T0) as frozen:
        frozen.move_to(T0 + dt.timedelta(seconds=9))
        fq.enqueue("x", id="x")
        frozen.move_to(T0)
        assert fq.stats().server_time == MS0 / 1000 + 9  # held, within the bound
        assert fq.reset_clock() == (MS0 / 1000 + 9, MS0 / 1000)
        assert fq.stats().server_time == MS0 / 1000
        assert fq.redis.hget(fq.keys.meta, "clock") is None
        assert fq.reset_clock() == (None, MS0 / 1000)  # a replay finds nothing to drop
        fq.enqueue("y", id="y")
        assert int(row(fq, "y")["enqueued_at"]) == MS0
