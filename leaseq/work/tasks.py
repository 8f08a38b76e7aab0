"""Typed tasks: a function whose calls are jobs, checked against its signature.

``@q.task(...)`` turns a function into a :class:`Task`. Calling the task runs
the function (so it stays testable); ``task.enqueue(*args, **kwargs)`` checks
the arguments and enqueues a job of kind ``task.name`` whose payload is the
call, as readable JSON::

    {"args": [], "kwargs": {"to": "a@b.c", "subject": "hi", "html": true}}

Arguments that can be passed by name are stored by name; positional-only
ones and ``*args`` go in ``args``. Defaults are not stored: the worker's code
applies its own.

**The check** (``Task.payload``), before anything is written: the call must
bind to the signature (a missing argument, an unknown keyword or too many
positional ones is refused), and each value is turned into JSON-able data
(``msgspec.to_builtins``) and converted back to its annotation
(``msgspec.convert``, strict) — exactly what the worker will do. A value that
fails either step raises ``InvalidTaskArgument`` (an ``InvalidArgument``)
naming the argument. An argument without annotation only has to be storable.

**The worker side** (``Task.call``): the stored JSON is bound to the
signature again and each value converted to its annotation (a ``datetime``,
a ``msgspec.Struct``, a dataclass, ...), then the function runs. A payload
that no longer fits (an older job after the signature changed) fails the
attempt with the same error, retried by the usual rules: a rolling deploy's
next worker may take it.

**The result** is stored by the queue's serializer; ``Task.wait`` converts it
back to the return annotation, and raises ``TaskFailed`` for a job that ended
dead or cancelled, ``WaitTimeout`` when it did not finish in time.

Both workers run tasks as the handlers of a handler dict (``q.tasks``, one
handler per task name): an ``async def`` task is an ``async def`` handler.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, overload

import msgspec

from leaseq.errors import (
    InvalidArgument,
    InvalidPayload,
    InvalidTaskArgument,
    TaskFailed,
    WaitTimeout,
)
from leaseq.handler import Handler, current_job, import_user_module
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.settings import CheckedCall
from leaseq.store.steps import Op
from leaseq.types import JOB_OPTIONS, Backoff, Job, Lease, State

__all__ = ["Task", "TaskHost", "queues_of_module", "tasks_of_module"]

P = ParamSpec("P")
R = TypeVar("R")

TASK_OPTIONS = (JOB_OPTIONS - {"kind"}) | {"id", "backoff"}
"""What ``@q.task(...)`` and ``Task.options`` take: the job options of
``enqueue`` (the kind is the task's name), ``id``, and ``backoff`` (the delay
before each retry of a failed run: a ``leaseq.Backoff`` or seconds; None: the
queue's), which the worker applies, not the row."""


class Task(Generic[P, R]):
    """A function whose calls are jobs of kind ``name`` on ``queue``.

    ``task(*args, **kwargs)`` runs the function here and now. ``enqueue``
    checks and enqueues a call (returns the job id; on an asyncio queue, a
    coroutine of it); ``options(...)`` is the same task with other job
    options; ``wait(job_id)`` returns the typed result. Made by ``q.task``.
    """

    def __init__(
        self, fn: Callable[P, R], queue: Any, name: str, options: Mapping[str, Any]
    ) -> None:
        self.fn = fn
        self.queue = queue
        self.name = name
        self.backoff = _backoff(options.get("backoff"))
        """The retry delay of a failed run (None: the queue's ``backoff``)."""
        self.job_options = {k: v for k, v in options.items() if k != "backoff"}
        """The job options every ``enqueue`` of this task passes."""
        self.signature = inspect.signature(fn)
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn, updated=())  # its name and doc, not its attributes

    def __repr__(self) -> str:
        return f"Task({self.name!r}, queue={getattr(self.queue, 'name', self.queue)!r})"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    # -- producing ------------------------------------------------------------

    def options(self, **options: Any) -> Task[P, R]:
        """This task with ``options`` (job options and ``id``) over its own, for
        the next ``enqueue``: ``send.options(delay=60.0, id="welcome-1").enqueue(...)``.
        Raises InvalidArgument for an unknown option."""
        mine = {**self.job_options, "backoff": self.backoff}
        return Task(self.fn, self.queue, self.name, {**mine, **_options(options)})

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Check the call against the signature and enqueue it; return the job id
        (``await`` it on an asyncio queue). Raises InvalidTaskArgument before
        anything is written, and what ``Queue.enqueue`` raises."""
        payload = self.payload(*args, **kwargs)
        return self.queue.enqueue(payload, kind=self.name, **self.job_options)

    def enqueue_many(
        self,
        calls: Iterable[Sequence[Any] | Mapping[str, Any]],
        *,
        ids: Sequence[str] | None = None,
    ) -> Any:
        """Check every call, then enqueue them all in few script calls (as
        ``Queue.enqueue_many``); return the job ids in order (``await`` them on an
        asyncio queue). A call is a tuple (or list) of positional arguments or a
        dict of keyword arguments. One call that does not fit raises
        InvalidTaskArgument naming it and its argument, and nothing is written."""
        payloads = []
        for i, call in enumerate(calls):
            try:
                if isinstance(call, Mapping):
                    payloads.append(self.payload(**call))
                elif isinstance(call, list | tuple):
                    payloads.append(self.payload(*call))
                else:
                    raise InvalidTaskArgument(
                        self.name, None, f"not a tuple of arguments nor a dict: {call!r}"
                    )
            except InvalidTaskArgument as exc:
                raise InvalidTaskArgument(self.name, exc.argument, f"call {i}: {exc.why}") from None
        options = dict(self.job_options)
        if options.pop("id", None) is not None:
            raise InvalidArgument("id= names one job: give enqueue_many ids=[...] instead")
        return self.queue.enqueue_many(payloads, ids=ids, kind=self.name, **options)

    def payload(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The stored form of a call, after the check (see the module doc)."""
        bound = self._bind(args, kwargs)
        types = self._types
        stored: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            try:
                data = msgspec.to_builtins(value)
            except (TypeError, msgspec.EncodeError) as exc:
                raise InvalidTaskArgument(self.name, name, f"cannot be stored: {exc}") from None
            self._convert(name, data, types)
            stored[name] = data
        return self._split(stored)

    # -- running (the worker's side) ----------------------------------------------

    def call(self, lease: Lease) -> Any:
        """Run the function on the arguments stored in ``lease.payload``, converted
        to their annotations; returns what it returns (a coroutine for ``async
        def``). Raises InvalidPayload or InvalidTaskArgument for a payload that
        does not fit."""
        bound = self._stored(lease.payload, f"job {lease.id!r}")
        if self.backoff is not None:
            _context(lease).backoff = self.backoff  # the worker's retry delay for this run
        return self.fn(*bound.args, **bound.kwargs)

    def check(self, payload: Any) -> None:
        """Raise InvalidPayload or InvalidTaskArgument unless ``payload`` is a call
        of this task in its stored form (``{"args": [...], "kwargs": {...}}``) that
        fits the signature: what an edit of one of its jobs (``retry_dead(...,
        payload=)``, ``update``, ``schedule(..., kind=)``) is checked by, before
        anything is written."""
        self._stored(payload, "the payload")

    def _stored(self, payload: Any, what: str) -> inspect.BoundArguments:
        """The arguments of a stored call, bound and converted to their annotations."""
        if (
            not isinstance(payload, dict)
            or not isinstance(payload.get("args", []), list)
            or not isinstance(payload.get("kwargs", {}), dict)
            or set(payload) - {"args", "kwargs"}
        ):
            raise InvalidPayload(
                f"task {self.name!r}: {what} has no call in it "
                '(want {"args": [...], "kwargs": {...}})'
            )
        bound = self._bind(payload.get("args", []), payload.get("kwargs", {}))
        types = self._types
        for name, value in bound.arguments.items():
            bound.arguments[name] = self._convert(name, value, types)
        return bound

    def schedule(
        self,
        name: str,
        *,
        every: float | None = None,
        cron: str | None = None,
        tz: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        """Create or change the schedule ``name`` of calls of this task (timing as
        ``Queue.schedule`` takes it), each ``task(*args, **kwargs)``, checked now:
        ``report.schedule("nightly", cron="0 3 * * *", kwargs={"region": "eu"})``.
        The call is given apart, so a task's own ``tz`` or ``every`` is its own."""
        options = dict(self.job_options)
        if options.pop("id", None) is not None:
            raise InvalidArgument("id= names one job: a schedule makes a job per due time")
        payload = self.payload(*args, **(kwargs or {}))
        return self.queue.schedule(
            name, payload, every=every, cron=cron, tz=tz, kind=self.name, **options
        )

    def retry_dead(self, job_id: str, *args: Any, **kwargs: Any) -> Any:
        """Retry the dead job ``job_id`` of this task with a new call, checked now
        (``Queue.retry_dead(job_id, payload=...)``); returns its new max_attempts.
        Raises InvalidArgument for a job of another kind."""
        payload = self.payload(*args, **kwargs)
        return self.queue.retry_dead(job_id, payload=payload, kind=self.name)

    @property
    def handler(self) -> Handler:
        """The handler a worker runs for this task's jobs (``async def`` for an
        ``async def`` task, so the asyncio worker runs it on its loop)."""
        if self.is_async:

            async def run_async(lease: Lease) -> Any:
                return await self.call(lease)

            return run_async
        return self.call

    # -- results -------------------------------------------------------------

    def wait(self, job_id: str, timeout: float = 30.0) -> Any:
        """The job's result, converted to the return annotation, once it succeeded
        (``await`` it on an asyncio queue). Raises TaskFailed when it ended dead
        or cancelled, WaitTimeout after ``timeout`` seconds, JobNotFound when no
        row has this id, InvalidArgument for a job of another kind."""
        return self.queue._drive(self._wait(job_id, timeout))

    def _wait(self, job_id: str, timeout: float) -> Op[Any]:
        job: Job | None = yield from self.queue._ops.wait(job_id, timeout)
        if job is None:
            raise WaitTimeout(job_id, timeout)
        return self.result(job)

    def result(self, job: Job) -> Any:
        """The typed result of a finished ``job`` of this task (see ``wait``)."""
        if job.kind != self.name:
            raise InvalidArgument(f"job {job.id!r} is of kind {job.kind!r}, not {self.name!r}")
        if job.state is not State.SUCCEEDED:
            raise TaskFailed(job.id, job.state.value, job.last_error)
        want = self._types.get("return", Any)
        if want is Any or job.result is None:
            return job.result
        try:
            return msgspec.convert(job.result, want)
        except msgspec.ValidationError as exc:
            raise InvalidPayload(
                f"task {self.name!r}: the result of job {job.id!r} is not a {want}: {exc}"
            ) from None

    # -- the checks ------------------------------------------------------------

    def _bind(self, args: Any, kwargs: Any) -> inspect.BoundArguments:
        try:
            return self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidTaskArgument(self.name, _named(str(exc)), str(exc)) from None

    @functools.cached_property
    def _hints(self) -> dict[str, Any]:
        try:
            return typing.get_type_hints(self.fn)
        except Exception as exc:  # a forward reference that never resolves
            raise InvalidArgument(
                f"task {self.name!r}: cannot read its annotations: {exc}"
            ) from None

    @functools.cached_property
    def _types(self) -> dict[str, Any]:
        """The type each bound argument converts to, by parameter name
        (``*args: T`` -> ``tuple[T, ...]``, ``**kwargs: T`` -> ``dict[str, T]``)."""
        hints = self._hints
        types: dict[str, Any] = {}
        for name, param in self.signature.parameters.items():
            hint = hints.get(name, Any)
            if param.kind is param.VAR_POSITIONAL:
                hint = tuple[hint, ...]  # type: ignore[valid-type]
            elif param.kind is param.VAR_KEYWORD:
                hint = dict[str, hint]  # type: ignore[valid-type]
            types[name] = hint
        if "return" in hints:
            ret = hints["return"]
            types["return"] = Any if ret is type(None) else ret
        return types

    def _convert(self, name: str, data: Any, types: Mapping[str, Any]) -> Any:
        want = types.get(name, Any)
        if want is Any:
            return data
        try:
            return msgspec.convert(data, want)
        except msgspec.ValidationError as exc:
            raise InvalidTaskArgument(self.name, name, str(exc)) from None

    def _split(self, stored: dict[str, Any]) -> dict[str, Any]:
        """``{"args": [...], "kwargs": {...}}``: by name wherever a call may name it."""
        params = self.signature.parameters
        spread = any(
            p.kind is p.VAR_POSITIONAL and stored.get(n) for n, p in params.items()
        )  # a non-empty *args: what precedes it must stay positional
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, value in stored.items():
            kind = params[name].kind
            if kind is inspect.Parameter.POSITIONAL_ONLY or (
                kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and spread
            ):
                args.append(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                args.extend(value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                kwargs.update(value)
            else:
                kwargs[name] = value
        return CheckedCall(args=args, kwargs=kwargs)


def _named(message: str) -> str | None:
    """The argument a signature's TypeError names (``missing a required argument: 'x'``)."""
    if "'" in message:
        return message.split("'")[1]
    return None


def _backoff(value: Any) -> Backoff | float | None:
    """A task's ``backoff``: a ``leaseq.Backoff``, or seconds (a constant delay)."""
    if value is None or isinstance(value, Backoff):
        return value
    v.delay_ms(value, "backoff")  # finite, >= 0, at most a year
    return float(value)


def _context(lease: Lease) -> Any:
    """The job context of ``lease``'s run (``current_job()``), or a stand-in when the
    task is called outside a worker (``task.call(lease)`` in a test)."""
    try:
        return current_job()
    except LookupError:
        return types.SimpleNamespace()


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - TASK_OPTIONS)
    if unknown:
        known = ", ".join(sorted(TASK_OPTIONS))
        raise InvalidArgument(f"unknown task option {unknown[0]!r} (options: {known})")
    return dict(options)


class TaskHost:
    """``task`` and ``tasks`` for every queue class: the queue's table of tasks."""

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(
        self, *, name: str | None = None, **options: Any
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...
    def task(self, fn: Any = None, /, *, name: str | None = None, **options: Any) -> Any:  # type: ignore[misc]
        """Make ``fn`` a typed task of this queue: ``@q.task`` or ``@q.task(max_attempts=5)``.

        ``name`` is the jobs' kind (default ``module.qualname``: give one for a
        task defined in a script run as ``__main__``, which a worker imports
        under its module name). ``options`` are job options as ``enqueue`` takes
        them, used by every enqueue of the task. Raises InvalidArgument for an
        unknown option, an invalid name, or a name another function already took.
        """
        opts = _options(options)

        def register(func: Callable[P, R]) -> Task[P, R]:
            if not callable(func):
                raise InvalidArgument(f"a task must be a function, not {func!r}")
            kind = name or f"{func.__module__}.{func.__qualname__}"
            check_job_id(kind, "task name")
            table = self._task_table()
            old = table.get(kind)
            if old is not None and (old.fn.__module__, old.fn.__qualname__) != (
                func.__module__,
                func.__qualname__,
            ):
                raise InvalidArgument(f"task name {kind!r} is taken by {old.fn.__qualname__}")
            made: Task[P, R] = Task(func, self, kind, opts)
            table[kind] = made  # a re-import replaces the task of the same function
            return made

        return register if fn is None else register(fn)

    @property
    def tasks(self) -> dict[str, Handler]:
        """The handlers of this queue's tasks by name: ``leaseq.Worker(q, q.tasks)``
        (a handler dict; add plain handlers with ``{**q.tasks, "kind": fn}``)."""
        return {name: task.handler for name, task in self._task_table().items()}

    def _task_table(self) -> dict[str, Task[Any, Any]]:
        # Kept on the queue's settings: the store's edits of a job (retry_dead,
        # update, schedule) check a payload by its kind there (``Task.check``).
        table: dict[str, Task[Any, Any]] = self._core.tasks  # type: ignore[attr-defined]
        return table


def tasks_of_module(module: Any) -> dict[str, Handler]:
    """The handlers of every task a module defines (``leaseq worker QUEUE myapp.tasks``)."""
    found = {obj.name: obj.handler for obj in vars(module).values() if isinstance(obj, Task)}
    return dict(sorted(found.items()))


def tasks_by_queue(modules: Iterable[str]) -> dict[str, dict[str, Task[Any, Any]]]:
    """The typed tasks the named modules define, by queue name, then task name: what
    an operator's process (``leaseq --tasks myapp.tasks retry ...``, ``leaseq web``)
    checks edits of their jobs by. Importing a module runs it, as a worker does: one
    that is not there or breaks raises InvalidArgument (HandlerImportError), as the
    worker's handler module does."""
    found: dict[str, dict[str, Task[Any, Any]]] = {}
    for name in modules:
        module = import_user_module(name)
        for obj in vars(module).values():
            if isinstance(obj, Task) and getattr(obj.queue, "name", None):
                found.setdefault(str(obj.queue.name), {})[obj.name] = obj
    return found


def adopt_tasks(queue: Any, known: Mapping[str, Mapping[str, Task[Any, Any]]]) -> Any:
    """``queue`` (a plain or sharded queue) with the tasks ``known`` for its name in
    its table, so ``retry_dead(..., payload=)``, ``update`` and ``schedule`` check
    a payload of their kind against their signature. Returns the queue."""
    mine = known.get(queue.name)
    if mine:
        queue._core.tasks.update(mine)
    return queue


def queues_of_module(module: Any) -> set[str]:
    """The names of the queues whose typed tasks ``module`` defines."""
    return {
        str(obj.queue.name)
        for obj in vars(module).values()
        if isinstance(obj, Task) and getattr(obj.queue, "name", None)
    }
