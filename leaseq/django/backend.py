"""``LeaseqBackend``: Django's Tasks framework on leaseq queues.

A Django task's ``enqueue`` becomes one leaseq job: kind = the task's module
path (``myapp.tasks.send_email``), payload = ``{"args": [...], "kwargs":
{...}}`` as JSON, queue = the task's ``queue_name``. ``manage.py
leaseq_worker`` runs a ``leaseq.Worker`` whose handler imports the task by
its kind and calls it. ``get_result(id)`` reads the job back as a
``TaskResult``. The mapping, one line each (docs/django.md has the table):

- ``priority``: Django's -100..100, larger sooner, is leaseq's ``100 - p``
  (0..200, smaller sooner); the default 0 is leaseq priority 100.
- ``run_after``: ``delay`` = seconds from now (this process's clock) to it;
  kept in the payload (``run_after``, epoch seconds) so a result read back has it.
- ``enqueued_at``: the row's, on the server's clock (``enqueue`` reads it back).
- status: pending, scheduled and waiting are READY; active and suspended are RUNNING;
  succeeded is SUCCESSFUL; dead and cancelled are FAILED.
- ``errors``: one per failed attempt the row's log keeps (the newest 10), each
  its exception's class path and traceback (``format_exception``'s text).
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
from dataclasses import dataclass
from typing import Any, cast

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import SuspiciousOperation
from django.db import close_old_connections
from django.utils import timezone
from django.utils.module_loading import import_string

from leaseq.errors import InvalidArgument, InvalidName
from leaseq.queue import Queue, connect
from leaseq.store.enqueue import option_args
from leaseq.types import Job, JobOptions, Lease, State, Unique

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
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
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
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # type: ignore[no-redef]
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[no-redef]
    from django_tasks.signals import (  # type: ignore[no-redef]
        task_enqueued,
        task_finished,
        task_started,
    )
    from django_tasks.utils import normalize_json  # type: ignore[no-redef]

__all__ = ["PRIORITY_ZERO", "LeaseqBackend", "LeaseqTask", "TaskRaised"]

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
        self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        """What Django's own backends store as ``TaskError.traceback``."""
        super().__init__(f"{path}: {exc}\n{self.traceback}".rstrip())
        self.path = path


_TRACEBACK = "\nTraceback (most recent call last):\n"


def _task_error(text: str) -> TaskError:
    """A failure as the row stores it (``last_error``, or one of its log's errors)
    as Django's ``TaskError``: a task's exception (``TaskRaised``) names its class
    path and keeps its traceback; anything else (a lease that ran out, a cancel)
    is a ``LeaseqError`` with the text as its traceback."""
    if not text.startswith(RAISED):
        return TaskError(exception_class_path="leaseq.errors.LeaseqError", traceback=text)
    path = text[len(RAISED) :].split(":", 1)[0]
    at = text.find(_TRACEBACK)
    tb = text[at + 1 :] + "\n" if at >= 0 else text
    return TaskError(exception_class_path=path, traceback=tb)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseqTask(Task):  # type: ignore[misc]
    """A Django task with leaseq's job options, which ``@task(...)`` passes on
    (Django 6.1 and the backport hand the decorator's other keyword arguments to
    the backend's ``task_class``): ``@task(max_attempts=3, timeout=60.0,
    group="tenant-7", cost=4000, expires=300.0)``. None (the default) leaves the
    queue's own; checked when the task is made (``InvalidTask``) and kept by
    ``using()``."""

    max_attempts: int | None = None
    """Attempts before the job is dead-lettered (the backend's default: 1)."""
    timeout: float | None = None
    """Seconds one attempt may run (``enqueue(..., timeout=)``)."""
    group: str | None = None
    """The fair group its jobs take turns in (docs/flow-control.md)."""
    unique: Unique | None = None
    """At most one unfinished job per key (``leaseq.Unique``)."""
    cost: float | None = None
    """What each run counts against the queue's cost limits (docs/flow-control.md)."""
    expires: float | None = None
    """Seconds from the enqueue by which a run must have started, else never."""

    def job_options(self) -> JobOptions:
        """The options given, as ``Queue.enqueue`` takes them."""
        named = ("max_attempts", "timeout", "group", "unique", "cost", "expires")
        return cast(
            JobOptions, {k: getattr(self, k) for k in named if getattr(self, k) is not None}
        )


class LeaseqBackend(BaseTaskBackend):  # type: ignore[misc]
    """``TASKS = {"default": {"BACKEND": "leaseq.django.LeaseqBackend", "QUEUES":
    ["default"], "OPTIONS": {"url": "redis://...", ...}}}``.

    OPTIONS: ``url`` (default ``$LEASEQ_URL``, else ``redis://localhost:6379/0``)
    and any ``Queue`` setting (``prefix``, ``keep_succeeded``,
    ``backoff``, ...); ``max_attempts`` defaults to 1 here, as Django runs a
    task once (a worker crash then dead-letters it: raise it to retry).
    """

    task_class = LeaseqTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        self.queue_names: list[str] = list(params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME]))
        """The queues in the order given (``manage.py leaseq_worker`` serves them so);
        ``[]``: any queue name, as Django reads it."""
        options = dict(params.get("OPTIONS", {}))
        url = options.pop("url", None) or os.environ.get("LEASEQ_URL", "redis://localhost:6379/0")
        options.setdefault("max_attempts", 1)
        self._client, self._options = connect(url), options
        self._queues = {name: self._make(name) for name in self.queue_names}

    def _make(self, name: str) -> Queue:
        return Queue(name, redis=self._client, **self._options)

    def queue(self, name: str) -> Queue:
        """The leaseq queue behind ``queue_name``. Raises InvalidArgument for a
        queue this backend does not list (with ``QUEUES: []``, any valid name)."""
        found = self._queues.get(name)
        if found is None and not self.queue_names:
            found = self._queues[name] = self._make(name)  # InvalidName for a bad one
        if found is None:
            raise InvalidArgument(
                f"queue {name!r} is not one of this backend's QUEUES ({', '.join(self._queues)})"
            )
        return found

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        if isinstance(task, LeaseqTask):
            try:
                option_args(self.queue(task.queue_name)._core, task.job_options(), "task")
            except InvalidArgument as exc:
                raise InvalidTask(f"task {task.module_path}: {exc}") from None

    def check(self, **kwargs: Any) -> list[Any]:
        """Django's system checks (``manage.py check``): a warning when
        ``leaseq.django`` is not in INSTALLED_APPS, which ``manage.py
        leaseq_worker`` needs (enqueueing works without it)."""
        found: list[Any] = list(super().check(**kwargs))
        if not apps.is_installed("leaseq.django"):
            found.append(
                checks.Warning(
                    f"TASKS[{self.alias!r}] is a leaseq backend, but manage.py "
                    "leaseq_worker is not installed",
                    hint="Add 'leaseq.django' to INSTALLED_APPS to run its workers.",
                    id="leaseq.W001",
                )
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
        delay, payload = None, {"args": result.args, "kwargs": result.kwargs}
        if task.run_after is not None:
            delay = max(0.0, (task.run_after - _now()).total_seconds())
            payload["run_after"] = task.run_after.timestamp()
        queue = self.queue(task.queue_name)
        options: JobOptions = task.job_options() if isinstance(task, LeaseqTask) else {}
        options["kind"] = task.module_path
        options["priority"] = PRIORITY_ZERO - task.priority
        options["delay"] = delay
        queue.enqueue(payload, id=result.id, **options)
        # The row's time (the server's clock, ms), so the result read back equals
        # this one: one more round trip, which the reference backends pay too.
        job = queue.get(result.id)
        object.__setattr__(result, "enqueued_at", _time(job.enqueued_at) if job else _now())
        task_enqueued.send(type(self), task_result=result)
        return result

    # -- reading ---------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        queues = list(self._queues.values())
        if not self.queue_names:  # any queue: those the server holds too
            queues += [self.queue(n) for n in Queue.queues(self._client) if n not in self._queues]
        for queue in queues:
            try:
                job = queue.get(result_id)
            except InvalidName:
                break
            if job is not None:
                return self.result(job)
        raise TaskResultDoesNotExist(result_id)

    def result(self, job: Job) -> TaskResult:
        """``job`` as a ``TaskResult`` (see the module doc for the mapping)."""
        try:
            task = self._task(job.kind, job.id)
        except ImportError as exc:
            raise SuspiciousOperation(f"job {job.id!r}: {exc}") from None
        payload = job.payload if isinstance(job.payload, dict) else {}
        # A priority set outside Django's range by hand: keep the task's own.
        with contextlib.suppress(Exception):
            task = task.using(
                backend=self.alias, queue_name=job.queue, priority=PRIORITY_ZERO - job.priority
            )
        with contextlib.suppress(Exception):
            task = task.using(run_after=_time(payload["run_after"]))
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
            errors=[_task_error(text) for text in _failures(job)],
            worker_ids=[job.worker] * job.attempts if job.worker else [],
        )
        object.__setattr__(result, "_return_value", job.result)
        return result

    def _task(self, kind: str | None, job_id: str) -> Task:
        """The Django task a job names; ImportError when its kind names none (a
        job that is not a Django task, or whose module or function is gone)."""
        try:
            task = import_string(kind or "")
        except ImportError as exc:
            raise ImportError(f"its task {kind!r} cannot be imported: {exc}") from None
        if not isinstance(task, Task):
            raise ImportError(f"{kind!r} is not a Django task")
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
            except ImportError as exc:
                raise TaskRaised(exc) from None  # an attempt failed: the row says why
            result = self._running(lease, task)
            close_old_connections()
            task_started.send(type(self), task_result=result)
            try:
                if task.takes_context:
                    raw = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
                else:
                    raw = task.call(*result.args, **result.kwargs)
                value = normalize_json(raw)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt too: the task's end
                raised = TaskRaised(exc)
                result.errors.append(
                    TaskError(exception_class_path=raised.path, traceback=raised.traceback)
                )
                retried = lease.attempt < lease.max_attempts  # READY: it will be retried
                # Sent here, so a receiver (Django's log) sees the task's exception.
                _finished(self, result, _READY_OR_FAILED[retried])
                raise raised from exc
            else:
                _finished(self, result, TaskResultStatus.SUCCESSFUL, value)
                return value
            finally:
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


_READY_OR_FAILED = {True: TaskResultStatus.READY, False: TaskResultStatus.FAILED}


def _finished(
    backend: LeaseqBackend, result: TaskResult, status: TaskResultStatus, value: Any = None
) -> None:
    """Mark a running task's result finished and send ``task_finished`` (READY: a
    failure that will be retried)."""
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "_return_value", value)
    object.__setattr__(result, "finished_at", _now())
    task_finished.send(type(backend), task_result=result)


def _failures(job: Job) -> list[str]:
    """The texts of the job's failures, oldest first: its attempt log (the newest
    10, 300 characters each), the newest in full (``last_error``); a cancel's
    reason after them."""
    texts = [f.error for f in sorted(job.failures, key=lambda f: f.attempt)]
    if job.last_error and job.state is State.CANCELLED:
        texts.append(job.last_error)
    elif job.last_error and texts:
        texts[-1] = job.last_error
    elif job.last_error and job.state is not State.SUCCEEDED:
        texts.append(job.last_error)
    return texts


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
