"""Django's Tasks framework on leaseq (``leaseq.django.LeaseqBackend``), end to
end on a real server: enqueue, ``manage.py leaseq_worker``, results read back,
a failing task, a deferred one, priority, context, async tasks.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

import leaseq

try:
    from django.tasks import TaskResultStatus, default_task_backend, signals
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
except ImportError:
    from django_tasks import (  # type: ignore[no-redef]
        TaskResultStatus,
        default_task_backend,
        signals,
    )
    from django_tasks.exceptions import (  # type: ignore[no-redef]
        InvalidTaskError as InvalidTask,
    )
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[no-redef]


def _work(*args: str) -> None:
    call_command("leaseq_worker", "--burst", "--concurrency", "1", *args)


def test_the_worker_command_names_an_unknown_backend_in_one_line(tasks: Any) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--backend 'nope'"):
        _work("--backend", "nope")


def test_a_task_runs_through_leaseq_and_its_result_reads_back(tasks: Any) -> None:
    backend = default_task_backend
    assert (backend.supports_defer, backend.supports_async_task) == (True, True)
    assert (backend.supports_get_result, backend.supports_priority) == (True, True)
    result = tasks.add.enqueue(2, 3)
    mail = tasks.send.enqueue("a@b.c", subject="hi")
    assert result.status == TaskResultStatus.READY and not result.is_finished
    job = backend.queue("default").get(result.id)
    assert job is not None and job.kind == "tests.support.django_tasks.add"
    assert job.payload == {"args": [2, 3], "kwargs": {}} and job.priority == 100
    assert backend.queue("emails").get(mail.id) is not None  # queue_name is the queue
    _work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5
    assert result.attempts == 1 and result.finished_at is not None
    got = backend.get_result(mail.id)
    assert got.return_value == {"to": "a@b.c", "subject": "hi"} and got.task.name == "send"
    assert tasks.send.get_result(mail.id).id == mail.id
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("no-such-id")


def test_a_failing_task_reports_its_error(tasks: Any) -> None:
    seen: list[tuple[str, str, Any]] = []

    def record(signal: str) -> Any:
        def receiver(sender: Any, task_result: Any, **kw: Any) -> None:
            seen.append((signal, task_result.id, task_result.status))

        return receiver

    receivers = {name: record(name) for name in ("enqueued", "started", "finished")}
    for name, receiver in receivers.items():
        getattr(signals, f"task_{name}").connect(receiver)
    try:
        result = tasks.explode.enqueue("no luck")
        _work()
    finally:
        for name, receiver in receivers.items():
            getattr(signals, f"task_{name}").disconnect(receiver)
    assert seen == [
        ("enqueued", result.id, TaskResultStatus.READY),
        ("started", result.id, TaskResultStatus.RUNNING),
        ("finished", result.id, TaskResultStatus.FAILED),
    ]
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class is ValueError and "no luck" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018


def test_priority_and_a_deferred_task(tasks: Any) -> None:
    backend = default_task_backend
    later = tasks.add.using(run_after=timezone.now() + dt.timedelta(hours=1)).enqueue(1, 1)
    low = tasks.add.using(priority=-50).enqueue(0, 1)
    high = tasks.add.using(priority=50).enqueue(0, 2)
    queue = backend.queue("default")
    assert [queue.get(r.id).priority for r in (low, high)] == [150, 50]  # type: ignore[union-attr]
    assert backend.get_result(high.id).task.priority == 50
    _work()
    assert tasks.ran == ["add:0+2", "add:0+1"]  # larger Django priority first
    deferred = backend.get_result(later.id)
    assert deferred.status == TaskResultStatus.READY
    assert queue.get(later.id).state is leaseq.State.SCHEDULED  # type: ignore[union-attr]
    queue.run_now(later.id)
    _work()
    assert backend.get_result(later.id).return_value == 2


def test_every_state_has_a_status(tasks: Any) -> None:
    from leaseq.django.backend import STATUS

    assert set(STATUS) == set(leaseq.State), "give the new state a Django status"


def test_a_task_waiting_for_its_parent_is_ready(tasks: Any) -> None:
    backend = default_task_backend
    queue = backend.queue("default")
    parent = tasks.add.using(run_after=timezone.now() + dt.timedelta(hours=1)).enqueue(1, 1)
    child = queue.enqueue(
        {"args": [2, 2], "kwargs": {}},
        kind="tests.support.django_tasks.add",
        depends_on=[parent.id],
    )
    assert queue.get(child).state is leaseq.State.WAITING  # type: ignore[union-attr]
    waiting = backend.get_result(child)
    assert waiting.status == TaskResultStatus.READY and waiting.started_at is None
    queue.run_now(parent.id)
    _work()
    assert backend.get_result(child).return_value == 4


def test_context_async_tasks_and_aenqueue(tasks: Any) -> None:
    ctx = tasks.which_attempt.enqueue("t")
    loud = asyncio.run(tasks.shout.aenqueue("hey"))
    _work("--queues", "default")
    assert default_task_backend.get_result(ctx.id).return_value == ["t", 1, ctx.id]
    assert default_task_backend.get_result(loud.id).return_value == "HEY"


def test_bad_calls_write_nothing(tasks: Any) -> None:
    with pytest.raises(InvalidTask):
        tasks.add.using(queue_name="elsewhere").enqueue(1, 2)
    with pytest.raises(TypeError):
        tasks.add.enqueue(object(), 2)  # not JSON
    assert default_task_backend.queue("default").stats().pending == 0


def test_the_result_enqueue_returns_is_the_one_read_back(tasks: Any) -> None:
    result = tasks.add.enqueue(1, 2)
    again = default_task_backend.get_result(result.id)
    assert result.enqueued_at == again.enqueued_at  # the row's time, the server's clock
    before = result.enqueued_at
    result.refresh()
    assert result.enqueued_at == before and result.enqueued_at.tzinfo is not None


def test_errors_carry_python_tracebacks_and_every_failed_attempt(tasks: Any) -> None:
    boom = tasks.explode.enqueue("no luck")
    leaving = tasks.leave.enqueue(3)
    flaky = tasks.flaky.enqueue("x")
    _work()
    (error,) = default_task_backend.get_result(boom.id).errors
    # What Django's own backends store: "".join(traceback.format_exception(exc)).
    assert error.traceback.startswith("Traceback (most recent call last):\n")
    assert error.traceback.endswith("ValueError: no luck\n")
    assert "TaskRaised" not in error.traceback
    exited = default_task_backend.get_result(leaving.id)
    assert exited.status == TaskResultStatus.FAILED
    (error,) = exited.errors
    assert error.exception_class is SystemExit and error.traceback.endswith("SystemExit: 3\n")
    # Failed once, then retried by hand and succeeded: the failure stays on record.
    assert default_task_backend.get_result(flaky.id).status == TaskResultStatus.FAILED
    default_task_backend.queue("default").retry_dead(flaky.id)
    _work()
    done = default_task_backend.get_result(flaky.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "x"
    (error,) = done.errors
    assert error.exception_class is ValueError and "x not yet" in error.traceback


def test_run_after_reads_back(tasks: Any) -> None:
    when = timezone.now() + dt.timedelta(hours=2)
    result = tasks.add.using(run_after=when).enqueue(1, 1)
    got = default_task_backend.get_result(result.id).task.run_after
    assert got is not None and abs((got - when).total_seconds()) < 0.001


def test_queues_empty_means_any_queue(tasks: Any) -> None:
    from django.core.management.base import CommandError

    anywhere = tasks.add.using(backend="anyqueue", queue_name="reports")
    result = anywhere.enqueue(4, 5)
    backend = result.task.get_backend()
    assert backend.get_result(result.id).task.queue_name == "reports"
    with pytest.raises(CommandError, match="--queues"):
        _work("--backend", "anyqueue")
    _work("--backend", "anyqueue", "--queues", "reports")
    assert backend.get_result(result.id).return_value == 9


def test_a_job_that_is_no_django_task(tasks: Any) -> None:
    from django.core.exceptions import SuspiciousOperation

    queue = default_task_backend.queue("default")
    plain = queue.enqueue({"args": [], "kwargs": {}}, kind="nope.missing")
    with pytest.raises(SuspiciousOperation, match="cannot be imported"):
        default_task_backend.get_result(plain)
    _work()
    job = queue.get(plain)
    assert job is not None and job.state is leaseq.State.DEAD
    assert "ImportError" in (job.last_error or "") and "nope.missing" in (job.last_error or "")


def test_leaseq_job_options_through_the_task_decorator(tasks: Any) -> None:
    try:
        from django.tasks import task
    except ImportError:
        from django_tasks import task  # type: ignore[no-redef]

    backend = default_task_backend
    result = tasks.careful.using(priority=5).enqueue(7)  # using() keeps them
    job = backend.queue("default").get(result.id)
    assert job is not None and (job.max_attempts, job.timeout, job.group) == (3, 5.0, "tenant-7")
    assert job.priority == 95
    plain = backend.queue("default").get(tasks.add.enqueue(1, 2).id)
    assert plain is not None and (plain.max_attempts, plain.timeout, plain.group) == (1, None, None)
    with pytest.raises(InvalidTask, match="max_attempts"):
        task(max_attempts=0)(tasks.plain)
    with pytest.raises(InvalidTask, match="timeout"):
        task(timeout=float("nan"))(tasks.plain)
    with pytest.raises(TypeError):
        task(retries=3)(tasks.plain)  # not an option: refused as Python refuses a keyword
    costly = task(cost=4000, expires=300.0)(tasks.plain)
    job = backend.queue("default").get(costly.enqueue().id)
    assert job is not None and job.cost == 4000 and job.expires_at is not None
    with pytest.raises(InvalidTask, match="cost"):
        task(cost=-1)(tasks.plain)
    with pytest.raises(InvalidTask, match="expires"):
        task(expires=0)(tasks.plain)


def test_task_finished_is_sent_while_the_tasks_own_exception_is_handled(tasks: Any) -> None:
    import sys

    seen: list[Any] = []

    def receiver(sender: Any, task_result: Any, **kw: Any) -> None:
        seen.append((task_result.status, sys.exc_info()[0]))

    signals.task_finished.connect(receiver)
    try:
        tasks.explode.enqueue("no luck")
        tasks.add.enqueue(1, 1)
        _work()
    finally:
        signals.task_finished.disconnect(receiver)
    # Django's own log line of a failure carries the task's traceback, not leaseq's.
    assert seen == [(TaskResultStatus.FAILED, ValueError), (TaskResultStatus.SUCCESSFUL, None)]


def test_check_warns_when_the_worker_command_is_not_installed(tasks: Any) -> None:
    from django.test import override_settings

    assert list(default_task_backend.check()) == []
    with override_settings(INSTALLED_APPS=[]):
        (warning,) = default_task_backend.check()
    assert warning.id == "leaseq.W001" and "'leaseq.django'" in warning.hint
