"""Schedules: one job per due time, decided by the server clock.

The cases taking ``q``, ``r`` and ``clock`` run on fakeredis with a frozen
clock and on a real server with short intervals (and again on the asyncio
queue through tests/transport/test_aio.py). DST cases pin dates with freezegun, so
they run on fakeredis only: the real server's clock cannot be moved.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
from freezegun import freeze_time

import leaseq
from leaseq.store import schedules as sch
from tests.support.backends import Clock
from tests.support.servers import wait_until
from tests.support.store import a_budget_runs_out_in_a_script, all_keys, server_ms, text


def jobs_of(q: Any, name: str) -> list[str]:
    """Ids of the jobs schedule ``name`` made, oldest due time first."""
    found = [text(k).split(":job:", 1)[1] for k in q.redis.keys(q.keys.job_prefix + "*")]
    mine = [i for i in found if i.startswith(f"schedule:{name}:")]
    return sorted(mine, key=lambda i: int(i.rsplit(":", 1)[1]))


def period(clock: Clock) -> float:
    return 30.0 if clock.fake else 0.2


def test_every_fires_once_per_due_time(q: Any, r: Any, clock: Clock) -> None:
    every = period(clock)
    made = q.schedule("beat", {"n": 1}, every=every)
    assert made.every == every and made.next_due is not None and made.last_fired is None
    assert q.tick() == 0 and jobs_of(q, "beat") == []
    clock.past(made.next_due)
    assert q.tick() == 1
    assert q.tick() == 0  # the same due time again: nothing
    (first,) = jobs_of(q, "beat")
    assert first == f"schedule:beat:{round(made.next_due * 1000)}"
    job = q.get(first)
    assert job is not None and job.payload == {"n": 1} and job.state == "pending"
    after = q.schedules()[0]
    assert after.last_fired == made.next_due and after.fired == 1
    assert after.next_due == pytest.approx(made.next_due + every)
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.id == first


def test_after_downtime_it_fires_once_for_all_it_missed(q: Any, r: Any, clock: Clock) -> None:
    every = period(clock)
    made = q.schedule("beat", {}, every=every)
    assert made.next_due is not None
    clock.past(made.next_due + 5 * every)  # five more due times pass with no ticker
    assert q.tick() == 1
    assert q.tick() == 0
    assert len(jobs_of(q, "beat")) == 1
    after = q.schedules()[0]
    assert after.next_due is not None and after.next_due * 1000 > server_ms(r)
    # still on the grid of the first due time: created_at + k * every
    steps = (after.next_due - made.next_due) / every
    assert steps == pytest.approx(round(steps))


def test_a_schedule_carries_every_job_option(q: Any, r: Any, clock: Clock) -> None:
    made = q.schedule(
        "report",
        {"n": 1},
        every=period(clock),
        kind="report",
        group="tenant-7",
        priority=5,
        max_attempts=3,
        timeout=20.0,
    )
    assert (made.kind, made.group, made.timeout, made.priority) == ("report", "tenant-7", 20.0, 5)
    assert made.max_attempts == 3
    assert made.next_due is not None
    clock.past(made.next_due)
    assert q.tick() == 1
    (job_id,) = jobs_of(q, "report")
    job = q.get(job_id)
    assert job is not None
    assert (job.kind, job.group, job.priority, job.max_attempts, job.timeout) == (
        "report",
        "tenant-7",
        5,
        3,
        20.0,
    )
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.kind == "report" and lease.timeout == 20.0
    assert q.limits().busiest_group == 1  # claimed through its fair group


def test_a_unique_schedule_skips_while_its_previous_job_runs(q: Any, r: Any, clock: Clock) -> None:
    every = period(clock)
    made = q.schedule("sync", {}, every=every, unique=leaseq.Unique("sync"))
    assert made.unique_key == "sync" and made.next_due is not None
    clock.past(made.next_due)
    assert q.tick() == 1
    lease = q.claim(ttl=60.0)
    assert lease is not None
    nxt = q.schedules()[0].next_due
    clock.past(nxt)
    assert q.tick() == 0  # the previous run is still active: this due time is skipped
    assert q.schedules()[0].skipped == 1 and len(jobs_of(q, "sync")) == 1
    q.complete(lease)
    clock.past(q.schedules()[0].next_due)
    assert q.tick() == 1
    # An enqueue with the same key meets the schedule's job as its holder.
    assert q.enqueue({}, unique=leaseq.Unique("sync")) == jobs_of(q, "sync")[-1]


@pytest.mark.parametrize(
    "options",
    [
        {"delay": 5.0},
        {"kind": "has space"},
        {"group": ""},
        {"timeout": -1.0},
        {"unique": leaseq.Unique("k", period=5.0)},
        {"unique": leaseq.Unique(lambda p: "k")},
        {"colour": "red"},
    ],
)
def test_bad_job_options_of_a_schedule_write_nothing(q: Any, r: Any, options: Any) -> None:
    with pytest.raises((leaseq.LeaseqError, TypeError)):
        q.schedule("s", {}, every=60.0, **options)
    assert all_keys(r) == []


def test_a_replayed_or_stale_tick_makes_nothing(q: Any, r: Any, clock: Clock) -> None:
    made = q.schedule("beat", {}, every=period(clock))
    assert made.next_due is not None
    clock.past(made.next_due)
    run = q._run
    steps = sch.tick(q._core)
    read = next(steps)
    fire = steps.send(run(read))
    assert fire.script.name == "tick"
    assert run(fire) == [1, 1, 1]  # made, moved on, looked at
    # redis-py replays a call whose reply was lost; a second ticker that read
    # the same due time sends the same call: both are no-ops, even with the
    # job's row already gone (purged, or kept for no time).
    r.delete(q.keys.job(jobs_of(q, "beat")[0]))
    assert run(fire) == [0, 0, 1]
    assert jobs_of(q, "beat") == []


@pytest.fixture
def real_r(redis_server: Any) -> Iterator[Any]:
    """A client of the real server only: these cases need real time (no fake twin)."""
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    client.script_flush()
    yield client
    client.close()


def test_two_tickers_make_exactly_one_job_per_due_time(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    every = 0.05
    q.schedule("beat", {}, every=every)
    stop = time.monotonic() + 1.5
    counts: list[int] = []

    def ticker() -> None:
        kwargs = r.connection_pool.connection_kwargs
        client = redis.Redis(host=kwargs["host"], port=kwargs["port"])
        mine = leaseq.Queue("emails", redis=client)
        total = 0
        while time.monotonic() < stop:
            total += mine.tick()
        counts.append(total)
        client.close()

    threads = [threading.Thread(target=ticker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = jobs_of(q, "beat")
    dues = [int(i.rsplit(":", 1)[1]) for i in ids]
    # >= 5, not 30: a ticker stalled by a busy machine makes one job per gap
    assert sum(counts) == len(ids) == q.schedules()[0].fired >= 5
    assert len(set(dues)) == len(dues)
    # every job is on the schedule's grid: no due time was made twice or invented
    assert all((b - dues[0]) % round(every * 1000) == 0 for b in dues)


def test_changing_a_schedule_takes_effect_at_its_next_due_time(
    q: Any, r: Any, clock: Clock
) -> None:
    every = period(clock)
    made = q.schedule("beat", {"v": 1}, every=every)
    assert made.next_due is not None
    again = q.schedule("beat", {"v": 1}, every=every)  # the same definition: no change
    assert again.next_due == made.next_due and again.created_at == made.created_at
    clock.past(made.next_due)  # due now, not yet ticked
    changed = q.schedule("beat", {"v": 2}, every=10 * every)
    assert changed.next_due == made.next_due  # a due time already reached is kept
    assert q.tick() == 1
    job = q.get(jobs_of(q, "beat")[0])
    assert job is not None and job.payload == {"v": 2}
    after = q.schedules()[0]
    assert after.next_due == pytest.approx(made.next_due + 10 * every)
    assert after.every == 10 * every and after.fired == 1


def test_unschedule_while_a_tick_is_in_flight(q: Any, r: Any, clock: Clock) -> None:
    made = q.schedule("beat", {}, every=period(clock))
    assert made.next_due is not None
    clock.past(made.next_due)
    steps = sch.tick(q._core)
    fire = steps.send(q._run(next(steps)))
    assert q.unschedule("beat") is True
    assert q.unschedule("beat") is False
    assert q._run(fire) == [0, 0, 1]
    assert q.schedules() == [] and jobs_of(q, "beat") == []
    assert not r.exists(q.keys.schedule("beat"))


def test_schedules_are_readable_with_redis_cli(q: Any, r: Any) -> None:
    q.schedule("nightly", {"kind": "full"}, cron="0 3 * * *", tz="Europe/Paris")
    q.schedule("beat", {}, every=30.0, max_attempts=2, priority=7)
    raw = {text(k): text(v) for k, v in r.hgetall(q.keys.schedule("nightly")).items()}
    assert raw["cron"] == "0 3 * * *" and raw["tz"] == "Europe/Paris"
    assert raw["payload"] == '{"kind":"full"}' and raw["next_due"].isdigit()
    assert int(float(r.zscore(q.keys.schedules, "nightly"))) == int(raw["next_due"])
    names = [s.name for s in q.schedules()]
    assert sorted(names) == ["beat", "nightly"]
    beat = next(s for s in q.schedules() if s.name == "beat")
    assert (beat.max_attempts, beat.priority, beat.cron) == (2, 7, None)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({}, "exactly one"),
        ({"cron": "* * * * *", "every": 1.0}, "exactly one"),
        ({"cron": "not a cron"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "time zone"),
        ({"every": 1.0, "tz": "Europe/Paris"}, "tz"),
        ({"every": 0.0}, "every"),
        ({"every": float("nan")}, "every"),
        ({"every": 0.001}, "every"),
        ({"every": 1.0, "max_attempts": 0}, "max_attempts"),
        ({"every": 1.0, "priority": -1}, "priority"),
    ],
)
def test_bad_schedules_are_refused_and_write_nothing(
    q: Any, r: Any, kwargs: dict[str, Any], word: str
) -> None:
    with pytest.raises(leaseq.InvalidArgument, match=word):
        q.schedule("beat", {}, **kwargs)
    assert all_keys(r) == []


def test_bad_names_and_payloads_are_refused(q: Any, r: Any) -> None:
    with pytest.raises(leaseq.InvalidName):
        q.schedule("no spaces", {}, every=1.0)
    with pytest.raises(leaseq.InvalidName):
        q.unschedule("{tag}")
    with pytest.raises(leaseq.InvalidPayload):
        q.schedule("beat", {"x": object()}, every=1.0)
    assert all_keys(r) == []


def test_a_damaged_schedule_is_parked_not_read_forever(q: Any, r: Any, clock: Clock) -> None:
    made = q.schedule("beat", {}, every=period(clock))
    assert made.next_due is not None
    r.hset(q.keys.schedule("beat"), "every_ms", "abc")
    clock.past(made.next_due)
    assert q.tick() == 0
    (parked,) = q.schedules()
    assert parked.next_due is None and parked.error and "schedule it again" in parked.error
    assert r.zrangebyscore(q.keys.schedules, "-inf", server_ms(r)) == []
    q.schedule("beat", {}, every=period(clock))  # scheduling it again revives it
    assert q.schedules()[0].next_due is not None and q.schedules()[0].error is None


def test_a_stale_index_entry_is_dropped(q: Any, r: Any, clock: Clock) -> None:
    made = q.schedule("beat", {}, every=period(clock))
    assert made.next_due is not None
    r.delete(q.keys.schedule("beat"))
    clock.past(made.next_due)
    assert q.tick() == 0
    assert r.zcard(q.keys.schedules) == 0


def _due_now(q: Any, r: Any, names: list[str]) -> None:
    """Make the schedules due at once, by hand (hash and index together)."""
    at = server_ms(r) - 1000
    for name in names:
        r.hset(q.keys.schedule(name), "next_due", at)
        r.zadd(q.keys.schedules, {name: at})


def _ticked(q: Any, steps: Any, call: Any) -> tuple[int, list[tuple[int, int]]]:
    """Drive a tick by hand from ``call``: what it made, and (schedules sent,
    schedules looked at) of each tick call."""
    calls = []
    try:
        while True:
            reply = q._run(call)
            if call.script.name == "tick":
                sent = (len(call.args) - len(call.script.shape.args)) // 4
                calls.append((sent, int(reply[2])))
            call = steps.send(reply)
    except StopIteration as stop:
        return int(stop.value), calls


def test_many_due_schedules_fire_in_one_tick(q: Any, r: Any, clock: Clock) -> None:
    names = [f"s{i:02d}" for i in range(40)]
    for name in names:
        q.schedule(name, {"n": name}, every=600.0)
    _due_now(q, r, names)
    steps = sch.tick(q._core)
    made, calls = _ticked(q, steps, next(steps))
    assert made == 40 and all(len(jobs_of(q, name)) == 1 for name in names)
    # Reads of TICK_BATCH; each call looks at a page (8) at least, or all it was
    # sent, and the rest of a read go in the next call.
    assert len(calls) >= 3 and sum(looked for _, looked in calls) == 40
    assert all(min(8, sent) <= looked <= sent <= sch.TICK_BATCH for sent, looked in calls)
    assert q.tick() == 0


def test_a_tick_call_stops_at_its_time_budget_and_the_rest_go_next(
    q: Any, r: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"s{i:03d}" for i in range(200)]
    for name in names:
        q.schedule(name, {"n": name}, every=600.0)
    assert [s.name for s in q.schedules()] == names  # read whole, however many calls
    _due_now(q, r, names)
    monkeypatch.setattr(sch, "TICK_BATCH", 200)  # one read of up to 200, sent in one call
    steps = sch.tick(q._core)
    fire = steps.send(q._run(next(steps)))
    sent = (len(fire.args) - len(fire.script.shape.args)) // 4
    assert 16 <= sent <= 200  # the read too may stop at its budget, after a page of 16
    reply = q._run(fire)
    created, moved, looked = (int(n) for n in reply)
    # The first `looked` as sent (one page of 8 at least), each made; no more.
    assert 8 <= looked <= sent and created == moved == looked
    assert [n for n in names if jobs_of(q, n)] == names[:looked]
    if a_budget_runs_out_in_a_script(r):
        assert looked < 200, "200 schedules fit no 0.75 ms budget"
    try:
        made, calls = _ticked(q, steps, steps.send(reply))
    except StopIteration as stop:  # that call looked at all 200
        made, calls = int(stop.value), []
    assert made == 200 and all(len(jobs_of(q, n)) == 1 for n in names)  # the first call's too
    if looked < sent:
        assert calls[0][0] == sent - looked  # the rest as read, not read again


# -- cron and DST (moved clock: fakeredis only) ------------------------------------------


@pytest.fixture
def fq() -> leaseq.Queue:
    return leaseq.Queue("emails", redis=fakeredis.FakeRedis(server=fakeredis.FakeServer()))


def frozen_at(start: str) -> Any:
    """freezegun at ``start`` for fakeredis's TIME, with the cron arithmetic left on the
    real datetime class: freezegun's FakeDatetime drops ``fold`` on arithmetic, which
    would misplace times in the hour that DST repeats (a test artefact only)."""
    return freeze_time(start, ignore=["cronsim", "leaseq.store.schedules"])


def fires(fq: leaseq.Queue, name: str, start: str, hours: float, step: float = 300.0) -> list[int]:
    """Due times (ms epoch, UTC) of the jobs made while the clock walks from
    ``start`` for ``hours`` in ``step``-second moves, ticking at each."""
    with frozen_at(start) as frozen:
        yield_points = round(hours * 3600 / step)
        for _ in range(yield_points):
            frozen.tick(step)
            fq.tick()
    return [int(i.rsplit(":", 1)[1]) for i in jobs_of(fq, name)]


def utc_ms(text: str) -> int:
    from datetime import datetime, timezone

    return round(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


def test_cron_in_a_zone_fires_at_local_time(fq: leaseq.Queue) -> None:
    with frozen_at("2026-01-10 00:00:00"):
        fq.schedule("nightly", {}, cron="0 3 * * *", tz="Europe/Paris")
    # 03:00 in Paris in winter is 02:00 UTC
    assert fires(fq, "nightly", "2026-01-10 00:00:00", 48) == [
        utc_ms("2026-01-10 02:00:00"),
        utc_ms("2026-01-11 02:00:00"),
    ]


def test_dst_spring_forward_runs_a_skipped_time_once_after_the_gap(fq: leaseq.Queue) -> None:
    # 2026-03-29 in Paris: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    with frozen_at("2026-03-28 12:00:00"):
        fq.schedule("half-past-two", {}, cron="30 2 * * *", tz="Europe/Paris")
        fq.schedule("hourly", {}, cron="0 * * * *", tz="Europe/Paris")
    got = fires(fq, "half-past-two", "2026-03-28 12:00:00", 48)
    assert got == [
        utc_ms("2026-03-29 01:00:00"),  # 03:00 CEST, the first instant after the gap
        utc_ms("2026-03-30 00:30:00"),  # 02:30 CEST
    ]
    hourly = [int(i.rsplit(":", 1)[1]) for i in jobs_of(fq, "hourly")]
    # 02:00 local is skipped, not doubled: 01:00 CET (00:00 UTC) then 03:00 CEST (01:00 UTC)
    assert utc_ms("2026-03-29 00:00:00") in hourly
    assert hourly[hourly.index(utc_ms("2026-03-29 00:00:00")) + 1] == utc_ms("2026-03-29 01:00:00")
    assert len(hourly) == len(set(hourly))


def test_dst_fall_back_runs_a_repeated_time_once(fq: leaseq.Queue) -> None:
    # 2026-10-25 in Paris: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    with frozen_at("2026-10-24 12:00:00"):
        fq.schedule("half-past-two", {}, cron="30 2 * * *", tz="Europe/Paris")
        fq.schedule("every-half-hour", {}, cron="*/30 * * * *", tz="Europe/Paris")
    got = fires(fq, "half-past-two", "2026-10-24 12:00:00", 48)
    assert got == [
        utc_ms("2026-10-25 00:30:00"),  # 02:30 CEST, the first of the two
        utc_ms("2026-10-26 01:30:00"),  # 02:30 CET the next day
    ]
    half = [int(i.rsplit(":", 1)[1]) for i in jobs_of(fq, "every-half-hour")]
    # a wildcard hour runs in both copies of the repeated hour: 02:30 CEST and 02:30 CET
    assert utc_ms("2026-10-25 00:30:00") in half and utc_ms("2026-10-25 01:30:00") in half
    assert all(b - a == 1_800_000 for a, b in itertools.pairwise(half))


def test_the_client_clock_is_never_read(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    with freeze_time("2001-01-01 00:00:00", tick=True):  # the client is 25 years behind
        made = q.schedule("beat", {}, every=0.1)
        assert made.next_due is not None and made.next_due > 1.7e9  # the server's clock
        assert q.tick() == 0
        wait_until(q.tick, timeout=10, what="the tick on the server's clock")
    assert jobs_of(q, "beat") == [f"schedule:beat:{round(made.next_due * 1000)}"]


def test_a_worker_ticks_as_part_of_its_loop(real_r: Any) -> None:
    r = real_r
    q = leaseq.Queue("emails", redis=r)
    q.schedule("beat", {}, every=0.1)
    done: list[str] = []
    worker = leaseq.Worker(q, lambda lease: done.append(lease.id), concurrency=1, ttl=5.0)
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        wait_until(lambda: len(done) >= 3, timeout=15, what="three scheduled jobs to run")
    finally:
        worker.stop()
        runner.join()
    assert all(i.startswith("schedule:beat:") for i in done)


def test_an_aio_worker_ticks_as_part_of_its_loop(real_r: Any) -> None:
    r = real_r
    import asyncio

    import redis.asyncio as aioredis

    import leaseq.aio

    kwargs = r.connection_pool.connection_kwargs

    async def main() -> list[str]:
        client = aioredis.Redis(host=kwargs["host"], port=kwargs["port"])
        q = leaseq.aio.Queue("emails", redis=client)
        await q.schedule("beat", {}, every=0.1)
        done: list[str] = []
        worker: Any = None

        async def handler(lease: leaseq.Lease) -> None:
            done.append(lease.id)
            if len(done) >= 3:
                worker.stop()

        worker = leaseq.aio.Worker(q, handler, concurrency=1, ttl=5.0)
        await asyncio.wait_for(worker.run(), timeout=20)
        await client.aclose()
        return done

    done = asyncio.run(main())
    assert len(done) >= 3 and all(i.startswith("schedule:beat:") for i in done)


def test_schedules_are_read_page_by_page(r: Any) -> None:
    # Paging is the sans-I/O core's: run through the sync driver only.
    q = leaseq.Queue("emails", redis=r)
    for i in range(20):
        q.schedule(f"s{i:02d}", {"i": i}, every=60.0 + i)
    paged = q._drive(sch.read_schedules(q._core, page=7))  # pages of 7, any transport
    assert [s.name for s in paged] == [f"s{i:02d}" for i in range(20)]  # soonest due first
    assert [s.payload["i"] for s in paged] == list(range(20))
