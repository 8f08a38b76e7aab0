"""Typed tasks: ``@q.task``, arguments checked at enqueue against the signature
(nothing written when they do not fit), stored as readable JSON, converted back
to the annotated types by both workers, and the typed result of ``wait``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import signal
import subprocess
from typing import Any

import msgspec
import pytest
import redis

import leaseq
import leaseq.aio
from tests.support import LEASEQ, ROOT
from tests.support.cli import Cli
from tests.support.servers import RedisServer, wait_until


class Point(msgspec.Struct, frozen=True):
    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class Box:
    width: float
    height: float


class Receipt(msgspec.Struct, frozen=True):
    sent_at: dt.datetime
    to: str
    corner: Point


def _tasks(q: Any) -> Any:
    @q.task(max_attempts=2)
    def send_email(to: str, subject: str, *, html: bool = False) -> str:
        return f"{to}:{subject}:{html}"

    @q.task(name="receipt")
    def receipt(at: dt.datetime, corner: Point, box: Box, to: str = "x") -> Receipt:
        assert isinstance(at, dt.datetime) and isinstance(corner, Point)
        assert isinstance(box, Box)
        return Receipt(sent_at=at + dt.timedelta(hours=1), to=to, corner=corner)

    @q.task(name="always_fails", max_attempts=1)
    def always_fails(n: int) -> None:
        raise ValueError(f"no {n}")

    @q.task(name="spread")
    def spread(first: int, /, *rest: int, **named: str) -> list[Any]:
        return [first, list(rest), named]

    return send_email, receipt, always_fails, spread


AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def test_a_call_is_stored_as_readable_json_named_by_kind(q: leaseq.Queue) -> None:
    send_email, *_ = _tasks(q)
    job_id = send_email.enqueue("a@b.c", "hi", html=True)
    raw = q.redis.hget(q.keys.job(job_id), "payload")
    assert json.loads(raw) == {"args": [], "kwargs": {"to": "a@b.c", "subject": "hi", "html": True}}
    job = q.get(job_id)
    assert job is not None and job.kind == send_email.name
    assert send_email.name == f"{__name__}._tasks.<locals>.send_email"
    assert job.max_attempts == 2  # the task's options
    assert send_email("a", "b") == "a:b:False"  # a direct call just runs it


@pytest.mark.parametrize(
    ("args", "kwargs", "argument"),
    [
        (("a@b.c",), {}, "subject"),  # missing
        (("a@b.c", "hi"), {"cc": "x"}, "cc"),  # unknown keyword
        ((5, "hi"), {}, "to"),  # wrong type
        (("a@b.c", "hi"), {"html": "yes"}, "html"),  # wrong type, keyword-only
        (("a@b.c", "hi", True), {}, None),  # too many positional
    ],
)
def test_arguments_that_do_not_fit_are_refused_and_nothing_is_written(
    q: leaseq.Queue, args: tuple[Any, ...], kwargs: dict[str, Any], argument: str | None
) -> None:
    send_email, *_ = _tasks(q)
    with pytest.raises(leaseq.InvalidTaskArgument) as info:
        send_email.enqueue(*args, **kwargs)
    assert isinstance(info.value, leaseq.InvalidArgument)
    assert info.value.argument == argument and info.value.task == send_email.name
    if argument is not None:
        assert repr(argument) in str(info.value)
    assert q.stats().pending == 0 and q.redis.dbsize() == 0


def test_typed_values_round_trip_through_the_worker(q: leaseq.Queue) -> None:
    _, receipt, _, spread = _tasks(q)
    with pytest.raises(leaseq.InvalidTaskArgument, match="corner"):
        receipt.enqueue(AT, {"x": 1}, Box(1.0, 2.0))  # y is missing
    with pytest.raises(leaseq.InvalidTaskArgument, match="'at'"):
        receipt.enqueue(object(), Point(x=1, y=2), Box(1.0, 2.0))  # cannot be stored
    job_id = receipt.enqueue(AT, Point(x=1, y=2), {"width": 3, "height": 4.5}, to="me")
    stored = q.get(job_id)
    assert stored is not None
    assert stored.payload["kwargs"]["at"] == "2026-01-02T03:04:05Z"
    spread_id = spread.enqueue(1, 2, 3, color="red")
    assert q.get(spread_id).payload == {"args": [1, 2, 3], "kwargs": {"color": "red"}}  # type: ignore[union-attr]
    leaseq.Worker(q, q.tasks, concurrency=2, handle_signals=False).run(burst=True)
    got = receipt.wait(job_id, timeout=5.0)
    assert got == Receipt(sent_at=AT + dt.timedelta(hours=1), to="me", corner=Point(x=1, y=2))
    assert spread.wait(spread_id, timeout=5.0) == [1, [2, 3], {"color": "red"}]


def test_wait_raises_for_a_failed_job_and_on_timeout(q: leaseq.Queue) -> None:
    send_email, _, always_fails, _ = _tasks(q)
    failing = always_fails.enqueue(7)
    later = send_email.options(delay=3600.0, id="welcome-a").enqueue("a@b.c", "hi")
    assert later == "welcome-a"
    assert send_email.options(id="welcome-a").enqueue("a@b.c", "other") == "welcome-a"  # dedup
    assert q.stats().scheduled == 1
    leaseq.Worker(q, q.tasks, handle_signals=False).run(burst=True)
    with pytest.raises(leaseq.TaskFailed, match="no 7") as info:
        always_fails.wait(failing, timeout=5.0)
    assert info.value.state == "dead"
    with pytest.raises(leaseq.WaitTimeout):
        send_email.wait(later, timeout=0.05)
    with pytest.raises(leaseq.InvalidArgument, match="kind"):
        send_email.wait(failing, timeout=1.0)
    with pytest.raises(leaseq.JobNotFound):
        send_email.wait("never", timeout=1.0)


def test_bad_task_declarations_are_refused(q: leaseq.Queue) -> None:
    with pytest.raises(leaseq.InvalidArgument, match="unknown task option 'retries'"):
        q.task(retries=3)
    with pytest.raises(leaseq.InvalidName):
        q.task(name="has space")(lambda: None)
    q.task(name="taken")(_tasks)
    with pytest.raises(leaseq.InvalidArgument, match="taken"):
        q.task(name="taken")(test_bad_task_declarations_are_refused)
    send_email, *_ = _tasks(q)
    with pytest.raises(leaseq.InvalidArgument, match="unknown task option"):
        send_email.options(kind="other")


def test_a_plain_enqueue_of_a_tasks_kind_is_checked_like_the_tasks_own(
    q: leaseq.Queue, r: Any
) -> None:
    send_email, *_ = _tasks(q)
    before = sorted(r.keys())
    bad = {"args": [], "kwargs": {"to": 5}}
    with pytest.raises(leaseq.InvalidTaskArgument):
        q.enqueue(bad, kind=send_email.name)
    with pytest.raises(leaseq.InvalidTaskArgument):
        q.enqueue_many([{"args": ["a@b.c", "hi"], "kwargs": {}}, bad], kind=send_email.name)
    with pytest.raises(leaseq.InvalidPayload):
        q.enqueue_flow([leaseq.Step({"nope": 1}, kind=send_email.name)])
    assert sorted(r.keys()) == before
    good = q.enqueue({"args": ["a@b.c", "hi"], "kwargs": {}}, kind=send_email.name)
    assert q.get(good).kind == send_email.name
    assert q.enqueue({"anything": 1}, kind="not-a-task-here")  # unknown kinds: as before


def test_a_tasks_own_backoff_times_its_retries(driver: Any) -> None:
    """``@q.task(backoff=)`` (seconds, or a ``leaseq.Backoff``) delays each retry of
    a failed run, on every worker; the queue's backoff (here 1 s) applies to the
    others, and ``Retry(in_)`` still wins."""
    q = driver.q

    @q.task(name="flaky", backoff=120.0)
    def flaky() -> None:
        raise RuntimeError("the API is down")

    @q.task(name="doubling", backoff=leaseq.Backoff(base=300.0, cap=900.0, jitter=0.0))
    def doubling() -> None:
        raise RuntimeError("again")

    @q.task(name="asks")
    def asks() -> None:
        raise leaseq.Retry(7.0)

    a, b, c = flaky.enqueue(), doubling.enqueue(), asks.enqueue()
    driver.worker(q.tasks).run(burst=True)
    for job_id, delay in ((a, 120.0), (b, 300.0), (c, 7.0)):
        job = q.get(job_id)
        assert job.state is leaseq.State.SCHEDULED, job
        waited = job.run_at - job.failures[-1].failed_at
        assert waited == pytest.approx(delay, abs=0.05), (job_id, waited)
    with pytest.raises(leaseq.InvalidArgument, match="backoff"):
        q.task(name="bad", backoff=-1.0)(lambda: None)
    assert flaky.options(priority=3).backoff == 120.0  # options keep it


def test_a_job_whose_payload_no_longer_fits_fails_its_attempt(q: leaseq.Queue) -> None:
    send_email, *_ = _tasks(q)
    # Written by a producer that does not know the task (an older deploy): this
    # queue object has none, so nothing checks the calls at enqueue.
    old_deploy = leaseq.Queue(q.name, redis=q.redis)
    old_deploy.enqueue(
        {"args": [5, "hi"], "kwargs": {}}, id="old", kind=send_email.name, max_attempts=1
    )
    old_deploy.enqueue({"nope": 1}, id="junk", kind=send_email.name, max_attempts=1)
    leaseq.Worker(q, q.tasks, handle_signals=False).run(burst=True)
    old, junk = q.get("old"), q.get("junk")
    assert old is not None and old.state is leaseq.State.DEAD and "'to'" in (old.last_error or "")
    assert junk is not None and junk.state is leaseq.State.DEAD
    assert "no call" in (junk.last_error or "")


def test_edits_of_a_tasks_jobs_are_checked_against_its_signature(q: leaseq.Queue) -> None:
    send_email, *_ = _tasks(q)
    bad = {"args": [], "kwargs": {"to": "a@b.c", "subject": 10}}
    job_id = send_email.options(max_attempts=1).enqueue("a@b.c", "hi")
    before = q.get(job_id)
    with pytest.raises(leaseq.InvalidTaskArgument) as info:
        q.update(job_id, payload=bad)
    assert info.value.argument == "subject"
    with pytest.raises(leaseq.InvalidPayload, match="no call"):
        q.update(job_id, payload={"to": "a@b.c"})
    assert q.get(job_id) == before  # nothing written
    q.update(job_id, payload={"args": ["b@c.d", "hello"], "kwargs": {}})
    lease = q.claim(ttl=30.0)
    assert lease is not None and lease.payload["args"] == ["b@c.d", "hello"]
    q.fail(lease, "down", dead=True)
    with pytest.raises(leaseq.InvalidTaskArgument):
        q.retry_dead(job_id, payload=bad)
    dead = q.get(job_id)
    assert dead is not None and dead.state is leaseq.State.DEAD and dead.max_attempts == 1
    # Typed: the task's own retry checks the call as enqueue does.
    with pytest.raises(leaseq.InvalidTaskArgument):
        send_email.retry_dead(job_id, "c@d.e")
    # The queue's max_attempts (5) more tries after the one it used.
    assert send_email.retry_dead(job_id, "c@d.e", "again", html=True) == 6
    again = q.get(job_id)
    assert again is not None and again.state is leaseq.State.PENDING
    assert again.payload == {
        "args": [],
        "kwargs": {"to": "c@d.e", "subject": "again", "html": True},
    }
    # A schedule of the task's kind is checked; the task's own schedule too.
    with pytest.raises(leaseq.InvalidTaskArgument):
        q.schedule("digest", bad, every=60.0, kind=send_email.name)
    with pytest.raises(leaseq.InvalidTaskArgument):
        send_email.schedule("digest", every=60.0, args=("a@b.c",))
    assert q.schedules() == []
    made = send_email.schedule("digest", every=60.0, args=("a@b.c", "daily"))
    assert made.kind == send_email.name and made.every == 60.0

    # A task's own argument named like a timing one stays the task's.
    @q.task(name="zoned")
    def zoned(region: str, tz: str = "UTC") -> str:
        return f"{region}/{tz}"

    at = zoned.schedule("z", cron="0 3 * * *", kwargs={"region": "eu", "tz": "Europe/Paris"})
    assert at.payload == {"args": [], "kwargs": {"region": "eu", "tz": "Europe/Paris"}}
    # A task's retry_dead is for its own jobs: another kind's is refused, unwritten.
    with pytest.raises(leaseq.InvalidArgument, match="is of kind"):
        zoned.retry_dead(job_id, "eu")
    assert q.get(job_id) == again
    # A kind no task of this process has is not checked: any payload goes.
    other = q.enqueue({"free": "form"}, kind="elsewhere.task")
    q.update(other, payload={"still": "free"})


def test_a_fan_in_task_reads_its_parents_results_from_its_job(q: leaseq.Queue) -> None:
    @q.task(name="part")
    def part(n: int) -> int:
        return n * 10

    @q.task(name="total")
    def total() -> int:
        return sum(leaseq.current_job().parent_results())

    parents = [part.enqueue(n) for n in (1, 2, 3)]
    job_id = total.options(depends_on=parents).enqueue()
    leaseq.Worker(q, q.tasks, handle_signals=False).run(burst=True)
    assert total.wait(job_id, timeout=5.0) == 60


def test_edits_on_a_sharded_queue_are_checked_on_every_shard(r: Any) -> None:
    sharded = leaseq.ShardedQueue("wide", shards=3, redis=r, backoff=0.0)

    @sharded.task(name="square")
    def square(n: int) -> int:
        return n * n

    ids = [square.enqueue(i) for i in range(9)]  # over every shard
    for job_id in ids:
        with pytest.raises(leaseq.InvalidTaskArgument):
            sharded.update(job_id, payload={"args": ["x"], "kwargs": {}})
        sharded.update(job_id, payload={"args": [3], "kwargs": {}})


def test_async_tasks_run_on_the_threaded_worker(q: leaseq.Queue) -> None:
    @q.task(name="double")
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    ids = [double.enqueue(i) for i in range(5)]
    leaseq.Worker(q, q.tasks, concurrency=2, handle_signals=False).run(burst=True)
    assert [double.wait(i, timeout=5.0) for i in ids] == [0, 2, 4, 6, 8]


def test_tasks_on_the_asyncio_queue_and_worker(
    live: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    @live.task(name="shout")
    async def shout(word: str, at: dt.datetime) -> str:
        return f"{word.upper()}@{at.year}"

    @live.task(name="length")
    def length(point: Point) -> int:  # a plain task runs in the worker's threads
        return point.x + point.y

    @live.task(name="fails", max_attempts=1)
    async def fails() -> None:
        raise ValueError("no")

    async def main() -> None:
        with pytest.raises(leaseq.InvalidTaskArgument, match="'word'"):
            await shout.enqueue(3, AT)
        assert (await live.stats()).pending == 0
        a = await shout.enqueue("hi", AT)
        b = await length.options(priority=5).enqueue(Point(x=2, y=3))
        c = await fails.enqueue()
        d = await length.options(delay=3600.0).enqueue({"x": 1, "y": 1})
        await leaseq.aio.Worker(live, live.tasks, concurrency=2).run(burst=True)
        assert await shout.wait(a, timeout=5.0) == "HI@2026"
        assert await length.wait(b, timeout=5.0) == 5
        with pytest.raises(leaseq.TaskFailed, match="ValueError"):
            await fails.wait(c, timeout=5.0)
        with pytest.raises(leaseq.WaitTimeout):
            await length.wait(d, timeout=0.05)

    loop.run_until_complete(main())


@pytest.mark.parametrize("spec", ["tests.support.tasks", "tests.support.tasks:queue"])
def test_the_cli_worker_serves_a_module_of_tasks(cli: Cli, spec: str) -> None:
    from tests.support import tasks

    q = cli.queue()
    send = q.task(name="send")(tasks.send.fn)
    add = q.task(name="add")(tasks.add.fn)
    a = send.enqueue(tasks.Address(to="a@b.c"), AT, html=True)
    b = add.enqueue(2, 3)
    code, _, err = cli("worker", "mail", spec, "--burst")
    assert code == 0, err
    assert send.wait(a, timeout=5.0) == "a@b.c@2026-01-02T03:04:05+00:00:True"
    assert add.wait(b, timeout=5.0) == 5


def test_the_cli_worker_refuses_a_module_without_tasks(cli: Cli) -> None:
    code, _, err = cli("worker", "mail", "tests.support.handlers", "--burst")
    assert code != 0 and "defines no tasks" in err and "Traceback" not in err


def test_tasks_on_a_sharded_queue(r: Any) -> None:
    sharded = leaseq.ShardedQueue("wide", shards=3, redis=r, backoff=0.0)

    @sharded.task(name="square")
    def square(n: int) -> int:
        return n * n

    ids = [square.enqueue(i) for i in range(6)]
    leaseq.Worker(sharded, sharded.tasks, handle_signals=False).run(burst=True)
    assert [square.wait(i, timeout=5.0) for i in ids] == [0, 1, 4, 9, 16, 25]


def test_ten_thousand_calls_in_one_enqueue_many(rr: Any) -> None:
    q = leaseq.Queue("bulk", redis=rr, backoff=0.0)

    @q.task(name="label")
    def label(n: int, *, unit: str = "x") -> str:
        return f"{n}{unit}"

    bad: list[Any] = [(i,) for i in range(10_000)]
    bad[7_000] = ("seven",)
    with pytest.raises(leaseq.InvalidTaskArgument, match="call 7000") as info:
        label.enqueue_many(bad)
    assert info.value.argument == "n" and rr.dbsize() == 0  # one bad call: nothing written
    with pytest.raises(leaseq.InvalidArgument, match="ids="):
        label.options(id="one").enqueue_many([(1,)])
    ids = label.enqueue_many([(i,) if i % 2 else {"n": i, "unit": "y"} for i in range(10_000)])
    assert len(ids) == 10_000 and q.stats().pending == 10_000
    leaseq.Worker(q, q.tasks, concurrency=8, handle_signals=False).run(burst=True)
    assert [label.wait(i, timeout=5.0) for i in (ids[0], ids[1], ids[-1])] == ["0y", "1x", "9999x"]
    assert q.stats().succeeded == 10_000


def test_worker_processes_serve_a_module_of_tasks(rr: Any, redis_server: RedisServer) -> None:
    # The module form README shows (leaseq worker QUEUE myapp.tasks) with --processes.
    from tests.support import tasks

    q = leaseq.Queue("mail", redis=rr)
    add = q.task(name="add")(tasks.add.fn)
    ids = [add.enqueue(i, 1) for i in range(20)]
    cmd = [LEASEQ, "--url", redis_server.url, "worker", "mail", "tests.support.tasks"]
    done = subprocess.run(
        [*cmd, "--processes", "2", "--burst"], cwd=ROOT, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    assert [add.wait(job_id, timeout=5.0) for job_id in ids] == [i + 1 for i in range(20)]


def test_the_cli_worker_refuses_a_queue_its_tasks_do_not_use(cli: Cli) -> None:
    # tests.support.tasks declares its tasks on "mail": served on "emails" the worker
    # would sit idle, or take other apps' jobs there and fail them as UnknownKind.
    job_id = cli.queue("emails").enqueue({}, kind="something-else")
    code, _, err = cli("worker", "emails", "tests.support.tasks", "--burst")
    assert code != 0 and "Traceback" not in err
    assert "defines tasks of queue mail" in err and "serves emails" in err, err
    job = cli.queue("emails").get(job_id)
    assert job is not None and job.state is leaseq.State.PENDING  # nothing taken
    code, _, err = cli("worker", "emails,mail", "tests.support.tasks", "--burst")
    assert code == 0, err  # one of its queues: served


def test_the_cli_runs_aio_tasks_on_one_loop_with_asyncio(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # leaseq worker --asyncio: aio.Worker on one event loop, where the tasks' own
    # aio queue (made at import) can be awaited; SIGTERM stops it as it stops Worker.
    monkeypatch.setenv("LEASEQ_TEST_URL", redis_server.url)
    cmd = [LEASEQ, "--url", redis_server.url, "worker", "aiojobs", "tests.support.aio_tasks"]

    async def enqueue() -> str:
        from tests.support import aio_tasks

        try:
            return await aio_tasks.fan.enqueue(5)
        finally:
            await aio_tasks.queue.close()

    job_id = asyncio.run(enqueue())
    done = subprocess.run([*cmd, "--asyncio", "--burst"], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    q = leaseq.Queue("aiojobs", redis=redis.Redis.from_url(redis_server.url))
    assert q.stats().succeeded == 6  # the fan and its five leaves
    assert q.get(job_id).result == 5  # type: ignore[union-attr]
    # Not in burst: it runs until SIGTERM, then exits 0 with nothing in flight.
    proc = subprocess.Popen(
        [*cmd, "--asyncio", "--concurrency", "2"], cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: q.workers() != [], 20, what="the worker to register")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert b"SIGTERM: stopping" in (proc.stderr.read() if proc.stderr else b"")
