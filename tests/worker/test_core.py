"""The worker core's decisions, without a server or a thread: what an extend's
answer means (``heard``), the next claim (``Prefetch.plan``) and the chores'
timers (``Chores``). Both workers call these; the behaviour on a real server
is in the other files of this directory."""

from __future__ import annotations

import threading

import leaseq
from leaseq.errors import LeaseLost
from leaseq.handler import JobContext
from leaseq.work.chores import Chores
from leaseq.work.claims import CLAIM_BATCH, Prefetch
from leaseq.work.heartbeat import heard


def _lease(deadline: float = 0.0) -> leaseq.Lease:
    return leaseq.Lease(
        id="j",
        queue="q",
        attempt=1,
        max_attempts=3,
        payload=None,
        deadline=deadline,
        enqueued_at=0.0,
        worker="w",
    )


def test_a_renewed_lease_is_held_with_its_new_deadline() -> None:
    ctx = JobContext(_lease())
    assert heard(ctx, _lease(deadline=9.0)) == "renewed"
    assert ctx.lease.deadline == 9.0
    assert not ctx.lost.is_set() and not ctx.cancelled.is_set()


def test_a_lost_lease_sets_lost_only() -> None:
    ctx = JobContext(_lease())
    assert heard(ctx, LeaseLost("j", 1, "active", "2")) == "lost"
    assert ctx.lost.is_set() and not ctx.cancelled.is_set()


def test_a_cancelled_job_sets_cancelled_before_lost() -> None:
    order: list[str] = []

    class Noted(threading.Event):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def set(self) -> None:
            order.append(self.name)
            super().set()

    ctx = JobContext(_lease(), lost=Noted("lost"), cancelled=Noted("cancelled"))
    assert heard(ctx, LeaseLost("j", 1, "cancelled", "1")) == "cancelled"
    assert ctx.lost.is_set() and ctx.cancelled.is_set()
    assert order == ["cancelled", "lost"]  # whoever sees lost finds cancelled set


def test_a_claim_asks_for_what_fits_and_starts_the_idle_slots() -> None:
    prefetch = Prefetch(4, 4, 0.0)  # at most 8 held
    assert prefetch.plan(0, 4) == (8, 4)
    assert prefetch.plan(3, 1) == (5, 1)  # a handler is idle: claim
    assert prefetch.plan(7, 0) is None  # 3 of 4 spares left: no claim yet
    assert prefetch.plan(6, 0) == (2, 0)  # half spent: refill, all of it spares
    big = Prefetch(1, CLAIM_BATCH * 2, 0.0)
    assert big.plan(0, 1) == (CLAIM_BATCH, 1)  # one call asks for at most CLAIM_BATCH


def test_chores_come_due_once_per_interval() -> None:
    class Ticks:
        def tick(self) -> None: ...

    chores = Chores(10.0, 3.0, 100.0, spread=False)
    assert chores.reap(100.0) and not chores.reap(105.0) and chores.reap(110.0)
    assert chores.tick(100.0, Ticks()) and not chores.tick(100.5, Ticks())
    assert not chores.tick(200.0, object())  # a queue without schedules never ticks
    assert chores.register(100.0)
    chores.registered(100.0)
    assert not chores.register(100.5) and chores.register(101.0)  # every ttl / 3
    row = chores.row(concurrency=4, done=7, running=2)
    assert row == {"ttl": 3.0, "concurrency": 4, "done": 7, "running": 2}
    spread = Chores(10.0, 3.0, 100.0, spread=True)
    assert 105.0 <= spread.next_reap <= 110.0  # the first reap within the first interval
