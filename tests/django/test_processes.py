"""``manage.py leaseq_worker --processes N`` as real processes on a real
redis-server, under a real settings module (``worker_settings.py``): the
children share a Django task's jobs, a SIGKILLed one is replaced and its job
runs again once its lease expires, a child whose task runs on past its timeout
is killed and replaced, SIGTERM stops them all gracefully, a child whose
supervisor is killed stops, and bad values are one ``CommandError`` line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import leaseq
from tests.support import ROOT
from tests.support.servers import RedisServer, wait_until
from tests.support.supervised import Supervised

try:
    from django.tasks import default_task_backend
except ImportError:
    from django_tasks import default_task_backend  # type: ignore[no-redef]

pytestmark = pytest.mark.slow

SETTINGS = "tests.django.worker_settings"


class Manage(Supervised):
    """``python -m django leaseq_worker`` (what ``manage.py leaseq_worker`` runs)."""

    def __init__(self, url: str) -> None:
        super().__init__("leaseq-django-")
        self.env = {**os.environ, "LEASEQ_URL": url, "PYTHONPATH": str(ROOT)}

    def argv(self, *opts: str) -> list[str]:
        return [sys.executable, "-m", "django", "leaseq_worker", "--settings", SETTINGS, *opts]

    def start(self, *opts: str) -> subprocess.Popen[bytes]:
        return self.run(self.argv(*opts), env=self.env)

    def kids_once(self, ok: Any) -> set[int] | None:
        """The children, if ``ok(children)`` holds for one look at them."""
        return self.kids_when(ok)()


@pytest.fixture
def manage(tasks: Any, redis_server: RedisServer) -> Iterator[Manage]:
    m = Manage(redis_server.url)
    yield m
    m.close()


def _job(job_id: str) -> leaseq.Job:
    job = default_task_backend.queue("default").get(job_id)
    assert job is not None
    return job


def _pid_of(job: leaseq.Job) -> int:
    assert job.worker is not None  # host:pid:suffix
    return int(job.worker.split(":")[-2])


def test_processes_share_the_tasks_replace_the_dead_and_stop_on_sigterm(
    tasks: Any, manage: Manage
) -> None:
    q = default_task_backend.queue("default")
    proc = manage.start(
        "--processes", "2", "--concurrency", "2", "--ttl", "1", "--kill-grace", "0.3"
    )
    kids = wait_until(lambda: manage.kids_once(lambda k: len(k) == 2), 20, what="two children")
    # Both serving before the batch lands, so neither takes it all while the other starts.
    wait_until(lambda: manage.log.count("started (concurrency") == 2, 20, what="two workers")
    batch = [tasks.note_pid.enqueue(0.05).id for _ in range(24)]
    wait_until(lambda: q.stats().succeeded == len(batch), 20, what="the batch")
    assert {_job(i).result for i in batch} == kids  # both children ran tasks
    # A child SIGKILLed mid-task: replaced, and its task runs again elsewhere.
    lost = tasks.note_pid.enqueue(0.5).id
    wait_until(lambda: _job(lost).state is leaseq.State.ACTIVE, 10, what="the task to start")
    victim = _pid_of(_job(lost))
    os.kill(victim, signal.SIGKILL)
    kids = wait_until(
        lambda: manage.kids_once(lambda k: len(k) == 2 and victim not in k),
        20,
        what="a replacement child",
    )
    wait_until(lambda: _job(lost).state is leaseq.State.SUCCEEDED, 20, what="the lost task")
    job = _job(lost)
    assert job.attempts == 2 and job.result in kids and "lease expired" in (job.last_error or "")
    # A task running on past its timeout: its child reports it and is killed.
    hung = tasks.hang.enqueue(60).id
    wait_until(lambda: "killing it" in manage.log, 20, what="the stuck child's kill")
    assert _job(hung).last_error == "timed out after 0.3 s"
    before = kids
    kids = wait_until(
        lambda: manage.kids_once(lambda k: len(k) == 2 and k != before), 20, what="a new child"
    )
    # SIGTERM: the task in flight finishes, every child exits, then the supervisor.
    last = tasks.note_pid.enqueue(0.5).id
    wait_until(lambda: _job(last).state is leaseq.State.ACTIVE, 10, what="the last task")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert _job(last).state is leaseq.State.SUCCEEDED and _job(last).attempts == 1
    alive = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    assert not kids & alive


def _gone(pid: int) -> bool:
    """``pid`` has exited (its /proc entry gone, or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_a_child_whose_supervisor_is_killed_stops(tasks: Any, manage: Manage) -> None:
    proc = manage.start("--processes", "1")
    (kid,) = wait_until(manage.kids, 20, what="the child")
    wait_until(lambda: "started (concurrency" in manage.log, 20, what="its worker")
    proc.kill()
    proc.wait()
    wait_until(lambda: _gone(kid), 10, what="the orphaned child to stop")
    assert "is gone: stopping" in manage.log


def test_bad_process_options_are_one_command_error_line(tasks: Any, manage: Manage) -> None:
    got = subprocess.run(
        manage.argv("--processes", "0"), cwd=ROOT, env=manage.env, capture_output=True, timeout=60
    )
    assert got.returncode == 1 and b"Traceback" not in got.stderr
    assert got.stderr.decode().strip() == "CommandError: --processes must be within 1..1024, not 0"
    for opts, named in [
        (["--processes", "5000"], "--processes"),
        (["--processes", "x"], "--processes"),
        (["--processes", "2", "--kill-grace", "nan"], "--kill-grace"),
        (["--processes", "2", "--kill-grace", "-1"], "--kill-grace"),
        (["--timeout", "0"], "--timeout"),
        (["--grace", "-1"], "--grace"),
        (["--ttl", "0"], "--ttl"),
        (["--processes", "2"], "settings module"),  # these tests' settings.configure()
    ]:
        with pytest.raises(CommandError, match=named):
            call_command("leaseq_worker", "--burst", *opts)
