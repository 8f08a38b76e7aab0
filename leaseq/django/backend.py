"""``LeaseqBackend``: Django's Tasks framework on leaseq queues.

A Django task's ``enqueue`` becomes one leaseq job: kind = the task's module
path (``myapp.tasks.send_email``), payload = ``{"args": [...], "kwargs":
{...}}`` as JSON, queue = the task's ``queue_name``. ``manage.py
leaseq_worker`` runs a ``leaseq.Worker`` whose handler imports the task by
its kind and calls it. ``get_result(id)`` reads the job back as a
``TaskResult``. The mapping, one line each (docs/django.md has the table):

- ``priority``: Django's -100..100, larger sooner, is leaseq's ``100 - p``
  (0..200, smaller sooner); the default 0 is leaseq priority 100.
- ``run_after``: ``delay`` = seconds from now (this process's clock) to it.
- status: pending, scheduled and waiting are READY; active and suspended are RUNNING;
  succeeded is SUCCESSFUL; dead and cancelled are FAILED.
- ``errors``: the job's last failure, its exception's class path and text.
- ``worker_ids``: the last worker, once per attempt (leaseq keeps the last
  worker only), so ``attempts`` is the job's attempts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import traceback
import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from django.utils.module_loading import import_string

from leaseq.errors import InvalidArgument, InvalidName
from leaseq.handler import UnknownKind
from leaseq.queue import Queue, connect
from leaseq.types import Job, Lease, State

try:  # Django 6.0 and later
    from django.tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
except ImportError:  # the django-tasks backport
    from django_tasks import (  # type: ignore[no-redef]
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[no-redef]
    from django_tasks.base import Task, TaskError  # type: ignore[no-redef]
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[no-redef]
    from django_tasks.signals import (  # type: ignore[no-redef]
        task_enqueued,
        task_finished,
        task_started,
    )
    from django_tasks.utils import normalize_json  # type: ignore[no-redef]

__all__ = ["PRIORITY_ZERO", "LeaseqBackend", "TaskRaised"]

PRIORITY_ZERO = 100
"""leaseq priority = ``PRIORITY_ZERO - django priority``."""

STATUS = {
    State.WAITING: TaskResultStatus.READY,
    State.PENDING: TaskResultStatus.READY,
    State.SCHEDULED: TaskResultStatus.READY,
    State.ACTIVE: TaskResultStatus.RUNNING,
    State.SUSPENDED: TaskResultStatus.RUNNING,  # started, asleep between its steps
    State.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    State.DEAD: TaskResultStatus.FAILED,
    State.CANCELLED: TaskResultStatus.FAILED,
}
"""A job's state as a task's status: every ``State`` is here (a test fails when one is
missing). Django has four statuses; READY is "enqueued, not started yet", which is
what a waiting job (parents unfinished) and a scheduled one (``run_after``, as
Django's own backends report it) are. docs/django.md."""

RAISED = "TaskRaised: "


class TaskRaised(Exception):
    """What the worker's handler raises for a task that raised: its text starts
    with the exception's class path, so ``TaskResult.errors`` can name it."""

    def __init__(self, exc: BaseException) -> None:
        path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        super().__init__(f"{path}: {exc}\n{tb}".rstrip())
        self.path = path


class LeaseqBackend(BaseTaskBackend):  # type: ignore[misc]
    """``TASKS = {"default": {"BACKEND": "leaseq.django.LeaseqBackend", "QUEUES":
    ["default"], "OPTIONS": {"url": "redis://...", ...}}}``.

    OPTIONS: ``url`` (default ``$LEASEQ_URL``, else ``redis://localhost:6379/0``)
    and any ``Queue`` setting (``prefix``, ``keep_succeeded``,
    ``backoff``, ...); ``max_attempts`` defaults to 1 here, as Django runs a
    task once (a worker crash then dead-letters it: raise it to retry).
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        self.queue_names: list[str] = list(params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME]))
        """The queues in the order given (``manage.py leaseq_worker`` serves them so)."""
        options = dict(params.get("OPTIONS", {}))
        url = options.pop("url", None) or os.environ.get("LEASEQ_URL", "redis://localhost:6379/0")
        options.setdefault("max_attempts", 1)
        client = connect(url)
        self._queues = {name: Queue(name, redis=client, **options) for name in self.queue_names}

    def queue(self, name: str) -> Queue:
        """The leaseq queue behind ``queue_name``. Raises InvalidArgument for a
        queue this backend does not list."""
        found = self._queues.get(name)
        if found is None:
            raise InvalidArgument(
                f"queue {name!r} is not one of this backend's QUEUES ({', '.join(self._queues)})"
            )
        return found

    # -- producing ---------------------------------------------------------------

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id=uuid.uuid4().hex,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),  # checked as JSON here, before anything is written
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        delay = None
        if task.run_after is not None:
            delay = max(0.0, (task.run_after - _now()).total_seconds())
        self.queue(task.queue_name).enqueue(
            {"args": result.args, "kwargs": result.kwargs},
            id=result.id,
            kind=task.module_path,
            priority=PRIORITY_ZERO - task.priority,
            delay=delay,
        )
        object.__setattr__(result, "enqueued_at", _now())
        task_enqueued.send(type(self), task_result=result)
        return result

    # -- reading ---------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        for queue in self._queues.values():
            try:
                job = queue.get(result_id)
            except InvalidName:
                break
            if job is not None:
                return self.result(job)
        raise TaskResultDoesNotExist(result_id)

    def result(self, job: Job) -> TaskResult:
        """``job`` as a ``TaskResult`` (see the module doc for the mapping)."""
        task = self._task(job.kind, job.id)
        # A priority set outside Django's range by hand: keep the task's own.
        with contextlib.suppress(Exception):
            task = task.using(queue_name=job.queue, priority=PRIORITY_ZERO - job.priority)
        payload = job.payload if isinstance(job.payload, dict) else {}
        errors = []
        if job.last_error and job.state is not State.SUCCEEDED:
            text = job.last_error
            path = "leaseq.errors.LeaseqError"  # a lease that expired, a cancel, ...
            if text.startswith(RAISED):
                path = text[len(RAISED) :].split(":", 1)[0]
            errors.append(TaskError(exception_class_path=path, traceback=text))
        result = TaskResult(
            task=task,
            id=job.id,
            status=STATUS[job.state],
            enqueued_at=_time(job.enqueued_at),
            started_at=_time(job.claimed_at),
            finished_at=_time(job.finished_at),
            last_attempted_at=_time(job.claimed_at),
            args=payload.get("args", []),
            kwargs=payload.get("kwargs", {}),
            backend=self.alias,
            errors=errors,
            worker_ids=[job.worker] * job.attempts if job.worker else [],
        )
        object.__setattr__(result, "_return_value", job.result)
        return result

    def _task(self, kind: str | None, job_id: str) -> Task:
        try:
            task = import_string(kind or "")
        except ImportError:
            task = None
        if not isinstance(task, Task):
            raise TaskResultDoesNotExist(f"job {job_id!r} has no Django task ({kind!r})")
        return task

    # -- running (the worker's side) -----------------------------------------------

    def handler(self) -> Any:
        """The handler ``manage.py leaseq_worker`` runs: imports the task its job
        names, calls it (with a ``TaskContext`` when it takes one) and stores its
        JSON return value; a task that raised fails the job with ``TaskRaised``.
        Sends Django's ``task_started`` and ``task_finished`` signals. Database
        connections are closed around each task, as Django does around a request."""

        def run(lease: Lease) -> Any:
            try:
                task = self._task(lease.kind, lease.id)
            except TaskResultDoesNotExist:
                raise UnknownKind(lease.kind, []) from None
            result = self._running(lease, task)
            close_old_connections()
            task_started.send(type(self), task_result=result)
            status, value = TaskResultStatus.FAILED, None
            try:
                if task.takes_context:
                    raw = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
                else:
                    raw = task.call(*result.args, **result.kwargs)
                value = normalize_json(raw)
                status = TaskResultStatus.SUCCESSFUL
                return value
            except Exception as exc:
                raised = TaskRaised(exc)
                result.errors.append(
                    TaskError(exception_class_path=raised.path, traceback=str(raised))
                )
                if lease.attempt < lease.max_attempts:
                    status = TaskResultStatus.READY  # it will be retried
                raise raised from exc
            finally:
                object.__setattr__(result, "status", status)
                object.__setattr__(result, "_return_value", value)
                object.__setattr__(result, "finished_at", _now())
                task_finished.send(type(self), task_result=result)
                close_old_connections()

        return run

    def _running(self, lease: Lease, task: Task) -> TaskResult:
        """The ``TaskResult`` of a job a worker starts, from its lease alone."""
        payload = lease.payload if isinstance(lease.payload, dict) else {}
        started = _now()
        return TaskResult(
            task=task,
            id=lease.id,
            status=TaskResultStatus.RUNNING,
            enqueued_at=_time(lease.enqueued_at),
            started_at=started,
            finished_at=None,
            last_attempted_at=started,
            args=payload.get("args", []),
            kwargs=payload.get("kwargs", {}),
            backend=self.alias,
            errors=[],
            worker_ids=[lease.worker] * lease.attempt,
        )


def _now() -> dt.datetime:
    now: dt.datetime = timezone.now()
    return now


def _time(epoch: float | None) -> dt.datetime | None:
    """A server-clock epoch time as Django wants it (aware with USE_TZ, else naive local)."""
    if epoch is None:
        return None
    aware = dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc)
    if settings.USE_TZ:
        return aware
    naive: dt.datetime = timezone.make_naive(aware)
    return naive
