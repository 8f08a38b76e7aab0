"""The per-queue event stream: every transition, written by the script that
makes it, in the same call; the switch, the bound, resuming, big batches,
blocking reads, sync and async. (``leaseq events``: tests/cli/test_events.py.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import leaseq
import leaseq.aio
from leaseq import State
from leaseq.cli.events import line
from leaseq.store.enqueue import enqueue_calls
from tests.support.backends import Clock
from tests.support.servers import RedisServer, wait_until
from tests.support.store import claim_one

P, S, A, D, OK, C = (
    State.PENDING,
    State.SCHEDULED,
    State.ACTIVE,
    State.DEAD,
    State.SUCCEEDED,
    State.CANCELLED,
)


T = tuple[str, int, State | None, State | None]


def seen(q: leaseq.Queue, since: Any = None) -> list[T]:
    return [(e.job_id, e.attempt, e.from_state, e.to_state) for e in q.events(since)]


class Tail:
    """What the stream got since the last look (so each step checks only its own)."""

    def __init__(self, q: leaseq.Queue) -> None:
        self.q = q
        self.last: leaseq.Event | None = None

    def __call__(self) -> list[T]:
        got = list(self.q.events(self.last))
        if got:
            self.last = got[-1]
        return [(e.job_id, e.attempt, e.from_state, e.to_state) for e in got]


def test_every_path_emits_its_transitions(q: leaseq.Queue, clock: Clock) -> None:
    tail = Tail(q)
    q.enqueue("a", id="a", max_attempts=2)
    q.enqueue("s", id="s", delay=3600.0)
    assert tail() == [("a", 0, None, P), ("s", 0, None, S)]
    lease = claim_one(q)
    assert tail() == [("a", 1, P, A)]
    q.fail(lease, "boom", retry_in=0)
    assert tail() == [("a", 1, A, P)]
    lease = claim_one(q)
    q.release(lease)
    assert tail() == [("a", 2, P, A), ("a", 2, A, P)]
    q.complete(claim_one(q))
    assert tail() == [("a", 3, P, A), ("a", 3, A, OK)]  # release raised max_attempts
    q.run_now("s")
    assert tail() == [("s", 0, S, P)]
    q.cancel("s")
    assert tail() == [("s", 0, P, C)]
    q.enqueue("b", id="b", max_attempts=1)
    q.fail(claim_one(q), "x")
    assert tail() == [("b", 0, None, P), ("b", 1, P, A), ("b", 1, A, D)]
    q.retry_dead("b")
    assert tail() == [("b", 1, D, P)]
    q.fail(claim_one(q), "x", retry_in=5.0)
    assert tail() == [("b", 2, P, A), ("b", 2, A, S)]
    q.delete("b")
    assert tail() == [("b", 2, S, None)]
    q.delete("a")
    assert tail() == [("a", 3, OK, None)]


def test_claim_promotes_and_reaps_on_the_way(q: leaseq.Queue, clock: Clock) -> None:
    tail = Tail(q)
    q.enqueue("d", id="d", delay=1.0)
    q.enqueue("e", id="e", max_attempts=1)
    lease = q.claim(ttl=clock.lease(5.0))
    assert lease is not None and lease.id == "e"
    tail()
    clock.advance(6.0 if clock.fake else 1.1)
    got = q.claim(ttl=30.0)
    assert got is not None and got.id == "d"
    # The expired lease of e (its one attempt used) dies, d is promoted then leased.
    assert tail() == [("d", 0, S, P), ("e", 1, A, D), ("d", 1, P, A)]


def test_reap_fail_dead_and_purge(q: leaseq.Queue, clock: Clock) -> None:
    tail = Tail(q)
    q.enqueue_many(["x", "y"], ids=["x", "y"], max_attempts=3)
    leases = q.claim_many(2, ttl=clock.lease(5.0))
    tail()
    clock.past(max(lease.deadline for lease in leases))
    assert q.reap() == (2, 0)
    assert sorted(tail()) == [("x", 1, A, P), ("y", 1, A, P)]
    for lease in q.claim_many(2, ttl=30.0):
        q.fail(lease, "no", dead=True)
    assert sorted(tail()[-2:]) == [("x", 2, A, D), ("y", 2, A, D)]
    assert q.retry_all_dead() == 2
    assert sorted(tail()) == [("x", 2, D, P), ("y", 2, D, P)]
    assert q.purge("pending") == 2
    assert sorted(tail()) == [("x", 2, P, None), ("y", 2, P, None)]


def test_tick_and_a_damaged_row(q: leaseq.Queue, r: Any, clock: Clock) -> None:
    tail = Tail(q)
    q.schedule("beat", {"n": 1}, every=60.0)
    clock.advance(61.0 if clock.fake else 0)
    if not clock.fake:
        r.hset(q.keys.schedule("beat"), "next_due", 0)
        r.zadd(q.keys.schedules, {"beat": 0})
    q.tick()
    got = tail()
    assert len(got) == 1 and got[0][2:] == (None, P) and got[0][0].startswith("schedule:beat:")
    q.enqueue("z", id="z")
    r.hset(q.keys.job("z"), "attempts", "abc")
    tail()
    q.claim_many(5)
    assert ("z", 0, P, D) in tail()


def test_an_entry_holds_at_most_ten_transitions(q: leaseq.Queue, r: Any) -> None:
    # MAXLEN bounds entries; ten transitions an entry keeps a batch-heavy
    # queue's stream within 10 x maxlen transitions.
    q.enqueue_many(range(300))
    leases = q.claim_many(300)
    assert len(leases) == 300
    q.complete_many(leases[:5])
    entries = [fields for _, fields in r.xrange(q.keys.events)]
    assert all(0 < int(fields[b"n"]) <= 10 and int(fields[b"at"]) > 0 for fields in entries)
    claimed = [f for f in entries if b"pending>active" in f]
    assert sum(len(f[b"pending>active"].split()) for f in claimed) == 300
    # Full entries but the last of each claim call (a call may stop at its time budget).
    assert len(claimed) <= 30 + sum(int(f[b"n"]) < 10 for f in claimed)
    assert len(entries[0][b"new>pending"].split()) == 10
    assert entries[-1][b"n"] == b"5"
    assert [e.job_id for e in q.events()][300:305] == [lease.id for lease in leases[:5]]


def test_an_entry_spans_transition_groups_in_order(q: leaseq.Queue, r: Any) -> None:
    # One claim with two kinds of transition (leases, and rows it must
    # dead-letter) still writes them all, ten to an entry.
    ids = q.enqueue_many(range(20))
    damaged = ids[1::3]
    for job_id in damaged:
        r.hset(q.keys.job(job_id), "attempts", "abc")
    start = r.xrange(q.keys.events)[-1][0]
    leases = q.claim_many(20)
    assert len(leases) == 20 - len(damaged)
    entries = r.xrange(q.keys.events, min=b"(" + start)
    assert sum(int(e[1][b"n"]) for e in entries) == 20
    assert all(int(e[1][b"n"]) <= 10 for e in entries)
    after = list(q.events(since=start.decode()))
    assert sorted(e.job_id for e in after) == sorted(ids)
    assert {e.job_id for e in after if e.to_state is leaseq.State.DEAD} == set(damaged)


def test_the_switch_off_writes_nothing_and_on_again_records(q: leaseq.Queue, r: Any) -> None:
    before = q.event_settings()
    assert before.enabled and before.maxlen == leaseq.store.events.DEFAULT_MAXLEN
    assert before.entries == 0 and before.first_id is None
    off = q.set_events(False)
    assert not off.enabled
    q.enqueue("a", id="a")
    q.complete(claim_one(q))
    q.enqueue("b", id="b", max_attempts=1)
    q.fail(claim_one(q), "x")
    q.retry_dead("b")
    q.purge("pending")
    assert r.xlen(q.keys.events) == 0 and list(q.events()) == []
    assert q.set_events(True).enabled
    q.enqueue("c", id="c")
    assert seen(q) == [("c", 0, None, P)]
    settings = q.event_settings()
    assert settings.entries == 1 and settings.first_id == settings.last_id


def test_the_bound_holds(q: leaseq.Queue, r: Any) -> None:
    assert q.set_events(maxlen=50).maxlen == 50
    last = ""
    for i in range(400):
        last = q.enqueue(i)
    # MAXLEN ~ trims whole stream nodes (100 entries by default): never far past.
    assert r.xlen(q.keys.events) <= 50 + 100
    assert list(q.events())[-1].job_id == last
    assert q.set_events(maxlen=10).entries <= 10 + 100


def test_the_default_bound_keeps_a_window_not_a_record_per_job(rr: Any) -> None:
    # Single enqueues write one entry each: past the default bound the stream
    # stops growing, so its memory does not grow with the queue.
    from leaseq.transport.drive import call_many

    q = leaseq.Queue("window", redis=rr)
    bound = leaseq.store.events.DEFAULT_MAXLEN
    assert q.event_settings().maxlen == bound == 10_000
    calls = [c for i in range(bound + 2_500) for c in enqueue_calls(q._core, [i], [None], {})[1]]
    assert all(reply == [1] for reply in call_many(rr, calls))
    assert q.stats().pending == bound + 2_500
    assert bound <= rr.xlen(q.keys.events) <= bound + 100  # MAXLEN ~: whole nodes


def test_since_resumes_without_loss_or_duplicates(q: leaseq.Queue) -> None:
    q.enqueue_many(range(25))
    for lease in q.claim_many(10):
        q.complete(lease)
    everything = list(q.events())
    assert len(everything) == 25 + 10 + 10
    parts: list[leaseq.Event] = []
    last: leaseq.Event | None = None
    while True:
        page = list(q.events(last, limit=7))
        if not page:
            break
        parts += page
        last = page[-1]
    assert parts == everything
    # A stream id resumes after that whole entry (ten transitions an entry).
    after = list(q.events(everything[0].stream_id))
    assert after == everything[10:]
    assert list(q.events("$")) == []
    assert [e.index for e in everything[:3]] == [0, 1, 2]


def test_since_an_event_whose_entry_is_gone_skips_nothing_after_it(q: leaseq.Queue, r: Any) -> None:
    # The entry was trimmed away (or the server restarted empty): what follows
    # is a new entry, none of whose transitions the reader has seen.
    q.enqueue_many(range(3))
    last = list(q.events())[-1]
    assert last.index == 2
    r.xtrim(q.keys.events, maxlen=0, approximate=False)
    q.enqueue_many(["a", "b", "c", "d"])
    assert len(list(q.events(last))) == 4


def test_entries_added_by_hand_never_stop_a_reader(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("a", id="before")
    key = q.keys.events
    r.xadd(key, {"at": "1", "n": "1", "pending>active": b"\xff\xfe:1"})
    r.xadd(key, {"at": "9" * 20, "n": "x", "a>b": "no-colon j:\u00b2 k:" + "9" * 30})
    q.enqueue("b", id="after")
    got = list(q.events())
    assert [e.job_id for e in got] == ["before", "\ufffd\ufffd", "no-colon", "j", "k", "after"]
    assert [e.attempt for e in got] == [0, 1, 0, 0, 0, 0]
    assert got[2].at == 0.0 and got[2].from_state is None
    assert all(len(line(e)) <= 80 for e in got)
    assert line(
        leaseq.Event(
            stream_id="1-0", index=0, job_id="x", attempt=0, from_state=None, to_state=P, at=1e300
        )
    ).startswith("?")


@pytest.mark.parametrize("bad", [{"since": "nope"}, {"block": -1.0}, {"limit": 0}])
def test_bad_arguments_raise_at_the_call(q: leaseq.Queue, bad: dict[str, Any]) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        q.events(**bad)
    with pytest.raises(leaseq.InvalidArgument):
        q.set_events(maxlen=0)
    with pytest.raises(leaseq.InvalidArgument):
        q.set_events("yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("junk", ["1.5", "1e20", "inf", "nan", "-5", " 7", "0x10", "9" * 20])
def test_a_junk_bound_in_meta_never_stops_a_transition(q: leaseq.Queue, r: Any, junk: str) -> None:
    # An operator's HSET meta events_maxlen <junk> must not turn every script's
    # XADD into an error (the row would move, then the call raise).
    r.hset(q.keys.meta, "events_maxlen", junk)
    q.enqueue("a", id="a")
    q.complete(claim_one(q))
    assert seen(q) == [("a", 0, None, P), ("a", 1, P, A), ("a", 1, A, OK)]
    assert q.event_settings().maxlen == leaseq.store.events.DEFAULT_MAXLEN


def test_a_stream_key_of_the_wrong_type_never_stops_a_transition(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    # Every transition script writes to the stream last: a WRONGTYPE there would
    # raise after the script's other writes (a claimed job with no lease handed out,
    # an enqueue that reports failure but stored its row).
    r.set(q.keys.events, "junk")
    q.enqueue("a", id="a")
    lease = claim_one(q)
    assert lease.id == "a"
    q.complete(lease)
    assert q.get("a").state is OK
    if not clock.fake:  # fakeredis's XREAD of a string key raises AttributeError
        with pytest.raises(leaseq.DamagedKey):
            list(q.events())
    with pytest.raises(leaseq.DamagedKey):
        q.event_settings()
    r.delete(q.keys.events)
    q.enqueue("b", id="b")
    assert seen(q) == [("b", 0, None, P)]


@pytest.mark.parametrize(
    "since", ["18446744073709551616", "1-18446744073709551616", "9" * 20 + "-0", "\u0661\u0662"]
)
def test_a_stream_id_past_64_bits_is_a_bad_argument(q: leaseq.Queue, since: str) -> None:
    with pytest.raises(leaseq.InvalidArgument):
        list(q.events(since))


# -- on the real server only --------------------------------------------------------


@pytest.fixture
def rq(redis_server: RedisServer) -> Iterator[Any]:
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    yield client
    client.close()


def _count(q: leaseq.Queue) -> dict[tuple[State | None, State | None], int]:
    out: dict[tuple[State | None, State | None], int] = {}
    for e in q.events():
        out[(e.from_state, e.to_state)] = out.get((e.from_state, e.to_state), 0) + 1
    return out


def test_ten_thousand_jobs_through_the_batch_paths(rq: Any) -> None:
    n = 10_000
    q = leaseq.Queue("big", redis=rq)
    q.set_events(maxlen=1_000_000)
    q.enqueue_many(range(n), max_attempts=1)
    assert _count(q) == {(None, P): n}
    leases: list[leaseq.Lease] = []
    while got := q.claim_many(1000):
        leases += got
    # Complete half, let the rest die, then retry all and purge.
    q.complete_many(leases[: n // 2])
    for lease in leases[n // 2 :]:
        q.fail(lease, "x")
    assert q.retry_all_dead() == n // 2
    assert q.purge("pending") == n // 2
    counts = _count(q)
    assert counts == {
        (None, P): n,
        (P, A): n,
        (A, OK): n // 2,
        (A, D): n // 2,
        (D, P): n // 2,
        (P, None): n // 2,
    }


def test_follow_wakes_on_a_new_transition(rq: Any) -> None:
    q = leaseq.Queue("live", redis=rq)
    q.enqueue("old")
    got: list[leaseq.Event] = []
    reader = threading.Thread(target=lambda: got.extend(q.events("$", block=10.0, limit=1)))
    reader.start()
    # The reader must be blocked in its XREAD before the enqueue: '$' means
    # "after what is there when the read starts", and a connection merely open
    # may not have sent it yet.
    wait_until(lambda: any(c.get("cmd") == "xread" for c in rq.client_list()), timeout=5)
    q.enqueue("new", id="new")
    reader.join(10)
    assert [e.job_id for e in got] == ["new"]
    assert list(q.events("$", block=0.05)) == []  # a wait that brings nothing ends it


def test_a_sharded_queue_refuses_events_but_switches_every_shard(rq: Any) -> None:
    sq = leaseq.ShardedQueue("sh", shards=3, redis=rq)
    with pytest.raises(leaseq.InvalidArgument, match="plain queue"):
        sq.events()
    assert not sq.set_events(False).enabled
    sq.enqueue_many(range(30))
    assert sq.event_settings().entries == 0
    assert sq.set_events(True).enabled
    sq.enqueue_many(range(30))
    assert sq.event_settings().entries >= 3


def test_aio_events_is_an_async_iterator(rq: Any, redis_server: RedisServer) -> None:
    import asyncio

    import redis.asyncio as aioredis

    async def scenario() -> list[str]:
        client = aioredis.Redis(port=redis_server.port)
        aq = leaseq.aio.Queue("aio-ev", redis=client)
        await aq.enqueue("a", id="a")
        await aq.enqueue("b", id="b")
        ids = [e.job_id async for e in aq.events()]
        await client.aclose()
        return ids

    assert asyncio.run(scenario()) == ["a", "b"]


def test_drop_deletes_the_stream_with_the_queue(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many(range(5))
    q.set_events(maxlen=1000)
    assert r.exists(q.keys.events)
    q.drop()
    assert not r.exists(q.keys.events) and not r.exists(q.keys.meta)
    q.enqueue("again", id="again")  # a new queue of the name: events on, default bound
    assert seen(q) == [("again", 0, None, P)]
    assert q.event_settings().maxlen == leaseq.store.events.DEFAULT_MAXLEN


def test_stats_read_while_events_are_off(q: leaseq.Queue) -> None:
    q.enqueue({})
    q.set_events(False)
    stats = q.stats()
    assert stats.pending == 1 and "events" not in stats.totals
