"""What a handler sees and may raise: its JobContext, Retry, Dead.

A handler is ``def handler(lease: leaseq.Lease) -> result``. While it runs,
``leaseq.current_job()`` returns its :class:`JobContext`, whose ``lost``
event is set when a heartbeat finds the lease gone (reaped, taken over, or
the job cancelled -- then ``cancelled`` is set too): from then on the
handler's outcome is discarded, so a long handler should check ``ctx.lost``
(or call ``ctx.raise_if_lost()``) between steps.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import os
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from leaseq.errors import (
    HandlerImportError,
    InvalidArgument,
    LeaseLost,
    LeaseqError,
    SignalTimeout,
)
from leaseq.types import Lease, TimedOut

T = TypeVar("T")

__all__ = [
    "Dead",
    "Handler",
    "Handlers",
    "JobContext",
    "Kinds",
    "Retry",
    "UnknownKind",
    "as_handler",
    "current_job",
    "load_handler",
]

Handler = Callable[[Lease], Any]
Handlers = Handler | Mapping[str, Handler]
"""What a worker runs: one handler for every job, or a dict of handlers by job kind."""

ERROR_CHARS = 4000
"""Longest ``last_error`` a worker writes (``Type: message``)."""
TRACEBACK_CHARS = 8000
"""Longest ``traceback`` a worker writes: past it the outermost frames go, and
the innermost (where it broke) stay."""
_OWN_FILES = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Retry(LeaseqError):
    """Raise from a handler to retry the job after ``in_`` seconds (None: the queue's backoff).

    The attempt still counts: on the last attempt the job is dead-lettered.
    """

    def __init__(self, in_: float | None = None, reason: str = "") -> None:
        super().__init__(reason or "retry requested")
        self.in_ = in_
        self.reason = reason or "retry requested"


class Dead(LeaseqError):
    """Raise from a handler to dead-letter the job at once, whatever attempts remain."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason or "dead-lettered by the handler")
        self.reason = reason or "dead-lettered by the handler"


class Suspend(BaseException):
    """Raised by ``current_job().sleep`` and ``wait_for`` to end the attempt
    suspended (docs/durable.md). A BaseException, like a cancel: a handler's
    ``except Exception`` must not swallow it and run on as if it had slept.
    ``key``: the signal key of a wait (None: a sleep); ``seconds``: how long
    until it wakes anyway (None: a wait with no timeout)."""

    def __init__(self, name: str, seconds: float | None, key: str | None = None) -> None:
        until = "" if seconds is None else f" for {seconds:g} s"
        super().__init__(f"wait {name!r} for {key!r}{until}" if key else f"sleep {name!r}{until}")
        self.name = name
        self.seconds = seconds
        self.key = key


class UnknownKind(LeaseqError):
    """A job's kind has no handler in this worker's dict (raised instead of running it).

    The worker fails the job with this text and the usual backoff, so it is
    retried: a rolling deploy whose next worker brings the handler runs it,
    and a kind nobody serves ends dead after ``max_attempts`` like any failure.
    """

    def __init__(self, kind: str | None, served: Sequence[str]) -> None:
        what = "the job has no kind" if kind is None else f"no handler for kind {kind!r}"
        listed = ", ".join(repr(k) for k in served) or "none"
        super().__init__(f"UnknownKind: {what}; this worker serves {listed}")
        self.kind = kind
        self.served = tuple(served)


class Kinds:
    """A dict of handlers by job kind, run as one handler: ``lease.kind`` picks it.

    A job without a kind, or of a kind not in the dict, raises ``UnknownKind``.
    """

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        from leaseq.store.keys import check_job_id

        if not handlers:
            raise InvalidArgument("a handler dict needs at least one kind")
        table: dict[str, Handler] = {}
        for kind, fn in handlers.items():
            if not isinstance(kind, str):
                raise InvalidArgument(f"a handler dict's keys are kinds (str), not {kind!r}")
            check_job_id(kind, "kind")
            if not callable(fn):
                raise InvalidArgument(f"the handler of kind {kind!r} must be callable, not {fn!r}")
            table[kind] = fn
        self.handlers = table

    def pick(self, lease: Lease) -> Handler:
        """The handler of ``lease.kind``; raises UnknownKind."""
        fn = self.handlers.get(lease.kind) if lease.kind is not None else None
        if fn is None:
            raise UnknownKind(lease.kind, sorted(self.handlers))
        return fn

    def __call__(self, lease: Lease) -> Any:
        return self.pick(lease)(lease)

    def __repr__(self) -> str:
        return f"Kinds({sorted(self.handlers)})"


def all_async(handler: Handler) -> bool:
    """Whether every handler ``handler`` may call is ``async def`` (a function, a
    partial of one, an object whose ``__call__`` is; each of a ``Kinds``)."""
    fns = handler.handlers.values() if isinstance(handler, Kinds) else (handler,)
    return all(
        inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
        for fn in fns
    )


def as_handler(handler: Handlers) -> Handler:
    """One handler from a handler or a dict of them (``Kinds``)."""
    if isinstance(handler, Mapping):
        return Kinds(handler)
    return handler


_flags = threading.Condition(threading.Lock())
"""The one condition every ``Flag`` waits on (sets and waits are rare; a set wakes
all waiters and each checks its own flag)."""


class Flag(threading.Event):
    """A ``threading.Event`` cheap to make: it shares one condition instead of
    making its own (a worker makes two per job, and almost none is ever waited on).
    Same methods, same meaning."""

    # No __init__ of its own and not Event's (that makes a Condition and a Lock):
    # the state starts as these class attributes, so making one runs no Python.
    _cond = _flags
    _flag = False
    __init__ = object.__init__

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with _flags:
            self._flag = True
            _flags.notify_all()

    def clear(self) -> None:
        with _flags:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with _flags:  # woken by any flag's set: wait for this one's
            return _flags.wait_for(self.is_set, timeout)


@dataclass(eq=False)
class JobContext:
    """The job a handler thread is running, and whether its lease still holds."""

    lease: Lease
    lost: threading.Event = field(default_factory=Flag)
    """Set by the worker when an extend raised LeaseLost or shutdown released
    the job; the handler's outcome will not be written."""
    cancelled: threading.Event = field(default_factory=Flag)
    """Set (with ``lost``) when a heartbeat finds the job cancelled (``Queue.cancel``
    of a running job): stop work. An ``async def`` handler of ``aio.Worker`` is
    cancelled as well; a thread cannot be stopped, so a plain handler should check."""

    report: Callable[[Lease, Any], Any] | None = None
    """How ``progress`` reaches the queue (set by the worker)."""
    queue: Any = None
    """The queue whose calls ``step`` makes, blocking (set by the worker)."""
    aqueue: Any = None
    """Under ``aio.Worker``: its ``aio`` queue, which ``astep`` awaits."""
    _steps: dict[str, Any] | None = None
    """The steps recorded on the job, read at this run's first step."""
    _unread: BaseException | None = None
    """Why the worker could not read them before an async handler started."""
    _names: set[str] | None = None
    """The step names this run has used."""
    spent: float | None = None
    """What this run really spent (``set_cost``), written with its outcome."""
    backoff: Any = None
    """The retry delay of this run's task (``@q.task(backoff=)``: a ``Backoff`` or
    seconds) when it fails; None: the queue's."""

    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """A durable step (docs/durable.md): the result recorded for ``name`` on
        this job if there is one, without calling ``fn``; else ``fn(*args,
        **kwargs)``, its result recorded under this lease's token and returned as
        the queue's codec reads it back. Raises LeaseLost (nothing recorded) once
        the lease is gone, InvalidArgument for a name used twice in one run,
        InvalidPayload or PayloadTooLarge for a result the codec refuses. In an
        ``async def`` handler under ``aio.Worker``, ``await astep(...)``."""
        if self.aqueue is not None and _on_a_loop():
            raise InvalidArgument(f"step {name!r}: in an async def handler, await ctx.astep(...)")
        recorded = self._begin_step(name)
        if recorded is None:
            recorded = self._read_steps_now()
        if name not in recorded:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                close_unawaited(value)
                raise InvalidArgument(f"step {name!r}: {fn!r} is async: await ctx.astep(...)")
            recorded[name] = self._steps_queue().record_step(self.lease, name, value)
        return self._ended_step(name, recorded)  # type: ignore[no-any-return]

    async def astep(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``step`` for an ``async def`` handler: ``fn`` may be plain or ``async def``."""
        recorded = self._begin_step(name)
        if recorded is None:
            recorded = self._steps = await self._acall("recorded_steps", self.lease)
        if name not in recorded:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            recorded[name] = await self._acall("record_step", self.lease, name, value)
        return self._ended_step(name, recorded)

    def sleep(self, name: str, seconds: float) -> None:
        """A durable sleep (docs/durable.md): the first time, end this attempt and
        suspend the job for ``seconds`` on the server clock (state ``suspended``: no
        lease, no worker slot, the attempt refunded); the handler runs again from
        the top once the time has passed, its recorded steps returning their
        results, and this call returns at once. No I/O: the same in plain and
        ``async def`` handlers. Raises InvalidArgument for a bad name or duration."""
        from leaseq.store import validate

        recorded = self._begin_step(name)
        if recorded is None:  # a retry whose steps no one read yet (the worker reads them)
            recorded = self._read_steps_now()
        if name in recorded:
            return self._ended_step(name, recorded)  # type: ignore[no-any-return]
        validate.delay_ms(seconds, "sleep")
        raise Suspend(name, float(seconds))

    def wait_for(self, name: str, key: str, timeout: float | None = None) -> Any:
        """A durable wait for a signal (docs/durable.md): the first time, end this
        attempt and suspend the job until ``q.signal(key, payload)`` (or until
        ``timeout`` seconds pass on the server clock; None: no limit); the handler
        runs again from the top, and this call returns the signal's payload, or
        raises SignalTimeout if the time ran out first. A signal sent before the
        wait is kept (``q.signal``): the wait resumes at once. No I/O, like
        ``sleep``. Raises InvalidArgument for a bad name, key or timeout."""
        from leaseq.store import validate
        from leaseq.store.keys import check_job_id

        recorded = self._begin_step(name)
        if recorded is None:  # a retry whose steps no one read yet (the worker reads them)
            recorded = self._read_steps_now()
        if name in recorded:
            value = self._ended_step(name, recorded)
            if isinstance(value, TimedOut):
                raise SignalTimeout(name, key, timeout)
            return value
        check_job_id(key, "signal key")
        if timeout is not None:
            validate.delay_ms(timeout, "timeout")
        raise Suspend(name, None if timeout is None else float(timeout), key)

    def _begin_step(self, name: str) -> dict[str, Any] | None:
        """Check ``name`` and the lease; returns the steps read so far (None: not
        yet; a first attempt has none: no record outlives its incarnation's claim)."""
        from leaseq.store.keys import check_job_id

        check_job_id(name, "step name")  # here, not at the write: a sleep writes after the handler
        if self._names is not None and name in self._names:
            raise InvalidArgument(
                f"step {name!r} ran twice in one run: each step of a job needs a name of its own"
            )
        self.raise_if_lost()
        if self._steps is None and self.lease.attempt == 1:
            self._steps = {}
        return self._steps

    def _ended_step(self, name: str, recorded: dict[str, Any]) -> Any:
        """Step ``name`` returned (ran and was recorded, or was recorded before):
        its name is used for this run. One that raised may be tried again."""
        if self._names is None:
            self._names = set()
        self._names.add(name)
        return recorded[name]

    def _read_steps_now(self) -> dict[str, Any]:
        """The recorded steps, read now (blocking). On ``aio.Worker``'s loop that
        cannot be: the worker read them before the handler started, and this
        raises why that read failed."""
        if self.aqueue is not None and _on_a_loop():
            raise self._unread or LookupError("the job's recorded steps were not read")
        self._steps = self._steps_queue().recorded_steps(self.lease)
        return self._steps

    def _steps_queue(self) -> Any:
        if self.queue is None:
            raise LookupError("this job context has no queue to record steps in")
        return self.queue

    async def _acall(self, op: str, *args: Any) -> Any:
        if self.aqueue is not None:
            return await getattr(self.aqueue, op)(*args)
        # leaseq.Worker: its queue blocks, so off this handler's loop
        return await asyncio.to_thread(getattr(self._steps_queue(), op), *args)

    def progress(self, value: Any) -> None:
        """Store a small JSON ``value`` as the job's ``progress`` (``Job.progress``),
        fenced by the lease. Raises LeaseLost when the lease is gone."""
        if self.report is None:
            raise LookupError("this job context has no queue to report progress to")
        if self.aqueue is not None and _on_a_loop():
            raise InvalidArgument("progress: in an async def handler, await ctx.aprogress(value)")
        self.report(self.lease, value)

    async def aprogress(self, value: Any) -> None:
        """``progress`` for an ``async def`` handler (awaited, not blocking its loop)."""
        if self.aqueue is not None:
            await self.aqueue.progress(self.lease, value)
        else:
            await asyncio.to_thread(self.progress, value)

    def set_cost(self, actual: float) -> None:
        """Report what this run really spent (a finite number >= 0, in the unit of the
        job's ``cost=``; 0 for nothing, a cache hit say): when the job completes or
        fails, it replaces the estimate in the queue's and its group's cost windows
        (docs/flow-control.md). The last call counts; checked here, sent with the
        outcome (no Redis call now)."""
        from leaseq.store import validate

        validate.spent(actual)
        self.spent = float(actual)

    def parent_results(self) -> list[Any]:
        """The results of this job's parents, in its ``depends_on`` order
        (``Queue.parent_results``): what a fan-in task reads."""
        if self.aqueue is not None and _on_a_loop():
            raise InvalidArgument(
                "parent_results: in an async def handler, await ctx.aparent_results()"
            )
        return list(self._steps_queue().parent_results(self.lease))

    async def aparent_results(self) -> list[Any]:
        """``parent_results`` for an ``async def`` handler (awaited)."""
        return list(await self._acall("parent_results", self.lease))

    def raise_if_lost(self) -> None:
        """Raise LeaseLost if the lease is gone (a cheap local check, no Redis call)."""
        if self.lost.is_set():
            lease = self.lease
            raise LeaseLost(
                lease.id,
                lease.attempt,
                None,
                None,
                "lease was lost",
                queue=lease.queue,
                incarnation=lease.incarnation,
            )


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def close_unawaited(awaitable: Any) -> None:
    """Close a coroutine that will never run, so it does not warn "never awaited"."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


_local = threading.local()
_task_ctx: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "leaseq_job", default=None
)
"""The job of an ``async def`` handler run by ``aio.Worker`` (one task per job)."""


def current_job() -> JobContext:
    """The JobContext of the handler running in this thread (or, for an ``async def``
    handler of ``aio.Worker``, in this task). Raises LookupError outside one."""
    ctx: JobContext | None = getattr(_local, "ctx", None) or _task_ctx.get()
    if ctx is None:
        raise LookupError("no leaseq job is running in this thread")
    return ctx


_set_current: Callable[[JobContext | None], None] = functools.partial(setattr, _local, "ctx")
"""Make ``ctx`` the current job of this thread (None: none): a partial, so the
handler threads' two calls a job run no Python frame."""


def _set_current_task(ctx: JobContext) -> None:
    """Make ``ctx`` the current job of the running asyncio task (its own context)."""
    _task_ctx.set(ctx)


def check_spec(spec: str) -> tuple[str, str, str]:
    """``spec``'s parts (module, ``":"`` or ``""``, attribute) once it looks like a
    handler spec (``module:function`` or a bare ``module`` of tasks); raises
    InvalidArgument. Nothing is imported."""
    module_name, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not module_name or (sep and not attr):
        raise InvalidArgument(
            f"handler must look like module:function (or a module of tasks), not {spec!r}"
        )
    return module_name, sep, attr


def load_handler(spec: str) -> Handler:
    """Import ``module:function`` (dots allowed after the colon): a handler, a
    dict of handlers by kind, or a queue (its typed tasks); or a bare ``module``:
    the typed tasks it defines (``leaseq.work.tasks``).

    Raises InvalidArgument for a malformed spec, a missing module or attribute,
    or a non-callable; HandlerImportError (an InvalidArgument) when the user's
    module itself fails to import (SyntaxError, an ImportError inside it, any
    exception at import), naming the error and its file:line in one line.
    """
    module_name, sep, attr = check_spec(spec)
    module = import_user_module(module_name)
    if not sep:  # a module: the typed tasks it defines
        from leaseq.work.tasks import tasks_of_module

        found = tasks_of_module(module)
        if not found:
            raise InvalidArgument(
                f"module {module_name!r} defines no tasks (@queue.task); "
                "name a handler as module:function"
            )
        return Kinds(found)
    return _handler_in(module, module_name, attr, spec)


def import_user_module(module_name: str) -> Any:
    """The user's module; InvalidArgument when there is none by that name,
    HandlerImportError when it is there and fails to import."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if (
            exc.name is not None
            and module_name.startswith(exc.name)
            and (module_name == exc.name or module_name.startswith(exc.name + "."))
        ):
            raise InvalidArgument(
                f"cannot import handler module {module_name!r}: no module named {exc.name!r} "
                "(looked in the current directory and sys.path)"
            ) from None
        raise _import_failed(module_name, exc) from None
    except (Exception, SystemExit) as exc:  # the user's code ran and broke
        raise _import_failed(module_name, exc) from None


def _handler_in(module: Any, module_name: str, attr: str, spec: str) -> Handler:
    """The handler ``attr`` (dotted) of ``module`` names: a function, a dict of
    handlers by kind, or a queue's typed tasks."""
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InvalidArgument(f"{module_name!r} has no attribute {attr!r}") from None
    return _as_loaded_handler(obj, spec)


def _as_loaded_handler(obj: Any, spec: str) -> Handler:
    """The handler ``spec`` named: a callable, a dict of handlers by kind, or a
    queue's typed tasks. Raises InvalidArgument for anything else."""
    if isinstance(obj, Mapping):
        return Kinds(obj)  # a dict of handlers by kind
    tasks = getattr(obj, "tasks", None)
    if not callable(obj) and isinstance(tasks, Mapping):  # a queue: its typed tasks
        if not tasks:
            raise InvalidArgument(f"{spec!r} is a queue with no tasks (@queue.task)")
        return Kinds(tasks)
    if not callable(obj):
        raise InvalidArgument(f"{spec!r} is not callable (nor a dict of handlers by kind)")
    handler: Handler = obj
    return handler


def _import_failed(module_name: str, exc: BaseException) -> HandlerImportError:
    filename, lineno = _where(exc)
    lines = str(exc.msg if isinstance(exc, SyntaxError) else exc).splitlines()
    detail = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return HandlerImportError(module_name, type(exc).__name__, detail, filename, lineno)


def _where(exc: BaseException) -> tuple[str | None, int | None]:
    """The file and line where the user's import broke: a SyntaxError's own
    position, else the innermost frame outside importlib."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and "importlib" not in f.filename
    ]
    if frames:
        return frames[-1].filename, frames[-1].lineno
    return None, None


def describe_error(exc: BaseException) -> str:
    """``Type: message`` for ``last_error``: the exception's type and its whole
    message, first line first (no source line, no frames: those go in
    :func:`format_traceback`). Bounded to ``ERROR_CHARS``."""
    message = str(exc)
    text = f"{type(exc).__qualname__}: {message}" if message else type(exc).__qualname__
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 15] + " ...[truncated]"


def format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` (with its causes) as Python prints it, minus
    leaseq's own frames (the worker loop that called the handler), bounded to
    ``TRACEBACK_CHARS`` by dropping the outermost lines first. '' when no frame
    is left (an exception raised by leaseq itself, say UnknownKind)."""
    te = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    stack: traceback.TracebackException | None = te
    while stack is not None and id(stack) not in seen:
        seen.add(id(stack))
        stack.stack = traceback.StackSummary.from_list(
            [f for f in stack.stack if not os.path.abspath(f.filename).startswith(_OWN_FILES)]
        )
        stack = stack.__cause__ or stack.__context__
    if not te.stack:
        return ""
    text = "".join(te.format()).rstrip()
    if len(text) <= TRACEBACK_CHARS:
        return text
    lines, kept = text.splitlines(), 0
    tail: list[str] = []
    for line in reversed(lines):
        kept += len(line) + 1
        if kept > TRACEBACK_CHARS - 40:
            break
        tail.append(line)
    return "...[outer frames cut]\n" + "\n".join(reversed(tail))
