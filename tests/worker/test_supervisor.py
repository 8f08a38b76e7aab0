"""``leaseq worker --processes N`` on a real redis-server: children appear, a
killed child is replaced and nothing is lost, SIGTERM stops all cleanly, and a
child whose handler is stuck past its timeout is killed and replaced.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import leaseq
from leaseq.supervisor import ProcessSupervisor
from tests.support.servers import RedisServer, wait_until
from tests.support.supervised import Supervised as _Supervised
from tests.support.supervised import children

ROOT = Path(__file__).resolve().parents[2]


LEASEQ = str(Path(sys.executable).parent / "leaseq")


pytestmark = pytest.mark.slow


class Supervised(_Supervised):
    """One ``leaseq worker --processes`` run on ``url``."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def start(
        self, queue: str, fn: str, *opts: str, session: bool = False
    ) -> subprocess.Popen[bytes]:
        cmd = [LEASEQ, "--url", self.url, "worker", queue, f"tests.support.handlers:{fn}", *opts]
        return self.run(cmd, session=session)


def kids_when(sup: Supervised, ok: Callable[[set[int]], bool]) -> Callable[[], set[int] | None]:
    return sup.kids_when(ok)


@pytest.fixture
def sup(redis_server: RedisServer, rr: Any) -> Iterator[Supervised]:
    s = Supervised(redis_server.url)
    yield s
    s.close()


def _q(rr: Any) -> leaseq.Queue:
    return leaseq.Queue("jobs", redis=rr, backoff=0.0)


def _done(q: leaseq.Queue) -> int:
    return q.stats().succeeded


def test_n_children_share_the_queue_and_sigterm_stops_all(rr: Any, sup: Supervised) -> None:
    q = _q(rr)
    ids = q.enqueue_many([{"s": 0.02}] * 60)
    sup.start("jobs", "note_pid", "--processes", "2", "--concurrency", "1")
    kids = wait_until(kids_when(sup, lambda k: len(k) == 2), 20, what="two children")
    wait_until(lambda: _done(q) == len(ids), 30, what="the queue to drain")
    ran_on = {q.get(i).result for i in ids}  # type: ignore[union-attr]
    assert ran_on <= kids and len(ran_on) == 2  # both children took jobs
    slow = q.enqueue({"s": 1.0})  # in flight when the signal lands: it finishes
    wait_until(lambda: q.get(slow).state is leaseq.State.ACTIVE, 10, what="the slow job")  # type: ignore[union-attr]
    assert sup.proc is not None
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.exits(20) == 0
    job = q.get(slow)
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.attempts == 1
    assert all(children(k) == set() for k in kids)
    assert not (kids & set(int(p) for p in os.listdir("/proc") if p.isdigit()))


def test_a_killed_child_is_restarted_and_nothing_is_lost(rr: Any, sup: Supervised) -> None:
    q = _q(rr)
    ids = q.enqueue_many([{"s": 0.05}] * 80)
    sup.start("jobs", "note_pid", "--processes", "2", "--concurrency", "2", "--ttl", "1")
    kids = wait_until(kids_when(sup, lambda k: len(k) == 2), 20, what="two children")
    wait_until(lambda: _done(q) >= 5, 20, what="some progress")
    victim = min(kids)
    os.kill(victim, signal.SIGKILL)
    wait_until(
        kids_when(sup, lambda k: len(k) == 2 and victim not in k), 20, what="a replacement child"
    )
    wait_until(lambda: _done(q) == len(ids), 60, what="every job to succeed")
    stats = q.stats()
    assert stats.dead == 0 and stats.pending == 0 and stats.active == 0
    assert "starting another" in sup.log
    assert sup.proc is not None
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.exits(20) == 0


@pytest.mark.parametrize("fn", ["spin", "sleep"])
def test_a_child_stuck_past_its_timeout_is_killed_and_replaced(
    rr: Any, sup: Supervised, fn: str
) -> None:
    q = leaseq.Queue("jobs", redis=rr, backoff=0.0, max_attempts=2)
    stuck = q.enqueue({"s": 60}, timeout=0.5)
    sup.start("jobs", fn, "--processes", "1", "--kill-grace", "0.5", "--concurrency", "2")
    first = wait_until(lambda: sup.kids(), 20, what="the child")
    # Failed with the timeout message by the child itself, before the kill.
    wait_until(lambda: q.get(stuck).attempts == 2, 30, what="the retry")  # type: ignore[union-attr]
    wait_until(lambda: q.get(stuck).state is leaseq.State.DEAD, 30, what="the dead job")  # type: ignore[union-attr]
    job = q.get(stuck)
    assert job is not None and job.last_error == "timed out after 0.5 s"
    wait_until(lambda: "killing it" in sup.log, 20, what="the kill")
    now = wait_until(kids_when(sup, lambda k: bool(k) and not (k & first)), 20, what="a new child")
    assert len(now) == 1
    # The replacement serves the queue.
    fresh = q.enqueue({"s": 0.01})
    wait_until(lambda: q.get(fresh).state is leaseq.State.SUCCEEDED, 20, what="the next job")  # type: ignore[union-attr]
    assert sup.proc is not None
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.exits(20) == 0


def test_burst_children_exit_when_the_queue_is_empty(rr: Any, sup: Supervised) -> None:
    q = _q(rr)
    ids = q.enqueue_many([{"s": 0.01}] * 40)
    sup.start("jobs", "note_pid", "--processes", "2", "--burst")
    assert sup.exits(60) == 0
    assert _done(q) == len(ids)


def test_children_get_the_log_options(rr: Any, sup: Supervised) -> None:
    # --log-format json --log-jobs apply where the jobs run: in the children.
    q = _q(rr)
    ids = q.enqueue_many([{"s": 0.0}] * 6)
    sup.start(
        "jobs", "note_pid", "--processes", "2", "--burst", "--log-format", "json", "--log-jobs"
    )
    assert sup.exits(60) == 0
    lines = [json.loads(line) for line in sup.log.splitlines() if line.startswith("{")]
    finished = {line["job_id"] for line in lines if line.get("outcome") == "complete"}
    assert finished == set(ids)


def test_api_supervisor_runs_and_stops(rr: Any, redis_server: RedisServer) -> None:
    q = _q(rr)
    ids = q.enqueue_many([{"s": 0.01}] * 10)
    s = leaseq.Supervisor(
        "jobs",
        "tests.support.handlers:note_pid",
        processes=2,
        url=redis_server.url,
        burst=True,
        handle_signals=False,
        cwd=str(ROOT),
    )
    assert s.run() == 0
    assert _done(q) == len(ids) and s.restarts == 0 and s.pids == []
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Supervisor("jobs", "module:", processes=2)
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.Supervisor("jobs", "m:f", processes=0)
    for argv in ("python -m leaseq worker jobs m:f", [], [sys.executable, 3]):
        with pytest.raises(leaseq.InvalidArgument, match="argv"):
            ProcessSupervisor(argv, processes=2)  # type: ignore[arg-type]


def test_cli_timeout_options(rr: Any, redis_server: RedisServer) -> None:
    q = leaseq.Queue("jobs", redis=rr, max_attempts=1)
    env = {**os.environ, "LEASEQ_URL": redis_server.url}
    run = [LEASEQ, "enqueue", "jobs", '{"s": 0.01}', "--timeout", "2.5", "--id", "own"]
    assert subprocess.run(run, cwd=ROOT, env=env, capture_output=True).returncode == 0
    assert q.get("own").timeout == 2.5  # type: ignore[union-attr]
    slow = q.enqueue({"s": 3.0})  # no timeout of its own: the worker's --timeout applies
    worker = [
        LEASEQ,
        "worker",
        "jobs",
        "tests.support.handlers:sleep",
        "--timeout",
        "0.3",
        "--burst",
    ]
    done = subprocess.run(worker, cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    job = q.get(slow)
    assert job is not None and job.state is leaseq.State.DEAD
    assert job.last_error == "timed out after 0.3 s"
    assert q.get("own").state is leaseq.State.SUCCEEDED  # type: ignore[union-attr]
    for bad in ("nan", "0", "-1", "inf", "90000"):
        got = subprocess.run(
            [*worker, "--timeout", bad], cwd=ROOT, env=env, capture_output=True, timeout=60
        )
        assert got.returncode != 0 and b"timeout" in got.stderr
        assert b"Traceback" not in got.stderr


@pytest.mark.parametrize(
    ("opts", "named"),
    [
        (["--processes", "0"], b"--processes"),
        (["--processes", "5000"], b"--processes"),
        (["--processes", "2", "--kill-grace", "nan"], b"--kill-grace"),
        (["--processes", "2", "--kill-grace", "-1"], b"--kill-grace"),
    ],
)
def test_cli_process_options_are_named_as_typed(
    redis_server: RedisServer, opts: list[str], named: bytes
) -> None:
    env = {**os.environ, "LEASEQ_URL": redis_server.url}
    worker = [LEASEQ, "worker", "jobs", "tests.support.handlers:sleep", "--burst", *opts]
    got = subprocess.run(worker, cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert got.returncode != 0 and named in got.stderr, got.stderr
    assert got.stderr.count(b"\n") == 1 and b"Traceback" not in got.stderr


def test_ctrl_c_to_the_process_group_is_one_graceful_stop(rr: Any, sup: Supervised) -> None:
    q = _q(rr)
    slow = q.enqueue({"s": 1.0})
    proc = sup.start("jobs", "sleep", "--processes", "2", "--log-level", "DEBUG", session=True)
    wait_until(lambda: q.get(slow).state is leaseq.State.ACTIVE, 20, what="the slow job")  # type: ignore[union-attr]
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    assert sup.exits(20) == 0
    job = q.get(slow)
    # Finished, not released: the children got one signal (the forwarded SIGTERM).
    assert job is not None and job.state is leaseq.State.SUCCEEDED and job.attempts == 1
    assert "stopping now" not in sup.log
