"""The queue's clock never goes backwards (a failover to a replica whose clock
is behind): deadlines and schedules are stamped from max(TIME, meta clock).

On fakeredis the server's TIME follows freezegun, so moving the frozen
clock back stands in for the new primary's slower clock.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from freezegun import freeze_time

import leaseq
from tests.support.store import row

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
