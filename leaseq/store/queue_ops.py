"""``QueueOps``: one queue's operations by name, each the function of its concern.

An operation is a generator: it yields *steps* (a script ``Call``, or one of
the few plain commands of ``leaseq.store.steps``) and receives each step's
reply through ``send()``; its return value is the operation's result. A
leaseq error raised by a step is thrown back into the generator at the
``yield``, so an operation catches what it can step over (a damaged row in
``retry_all_dead``) exactly as if the call had been made inline.

Every operation is a function of the module named for its concern, taking the
queue's ``QueueSettings`` first: ``claim.claim_now(queue, count, ttl, ...)``
builds ``claim.claim_call`` and yields it. ``QueueOps`` is only the table that
gives those functions the public names, bound to the settings it is given
(composition: nothing is inherited). ``leaseq.queue.QueueAPI`` turns each
entry into a public method; a sharded queue's table is
``leaseq.store.sharded_ops.ShardedOps``, with the same names and signatures.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from leaseq.store import cancel as _cancel
from leaseq.store import claim as _claim
from leaseq.store import clock as _clock
from leaseq.store import durable as _durable
from leaseq.store import edit as _edit
from leaseq.store import enqueue as _enqueue
from leaseq.store import events as _events
from leaseq.store import filters as _filters
from leaseq.store import history as _history
from leaseq.store import leases as _leases
from leaseq.store import limits as _limits
from leaseq.store import pause as _pause
from leaseq.store import purge as _purge
from leaseq.store import reads as _reads
from leaseq.store import reap as _reap
from leaseq.store import registry as _registry
from leaseq.store import retry as _retry
from leaseq.store import schedules as _schedules
from leaseq.store import wait as _wait
from leaseq.store import workflows as _workflows
from leaseq.store.keys import QueueKeys
from leaseq.store.replies import as_text
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Op, Scan

__all__ = ["QueueOps", "list_queues", "on_settings", "through"]

P = ParamSpec("P")
R = TypeVar("R")


def list_queues(prefix: str) -> Op[list[str]]:
    """Names (hash tags) of the queues under ``prefix``: one SCAN for the keys a
    queue keeps besides its job rows (``QueueKeys.queue_pattern``), so a queue
    whose meta hash went is still listed while any index of it is left."""
    keys = yield Scan(QueueKeys.queue_pattern(prefix))
    found = {QueueKeys.queue_of_key(prefix, as_text(key)) for key in keys}
    return sorted(name for name in found if name)


class through(Generic[P, R]):
    """A table entry: ``fn(part, ...)``, where ``part`` is the attribute ``attr``
    of the table it is read from (its settings, or a component it is made of).

    Read from an instance it is ``fn`` with that part given. Read from the
    class it is a method-shaped twin of ``fn`` (``self`` in place of the part;
    ``fn``'s name, doc and other parameters), so a table is documented,
    compared and wrapped (``leaseq.transport.drive``) like a class of methods.
    """

    def __init__(self, attr: str, fn: Callable[Concatenate[Any, P], R]) -> None:
        self.attr = attr
        self.fn = fn
        self.name = fn.__name__
        self.method = _method_of(attr, fn)

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name
        self.method.__qualname__ = f"{owner.__name__}.{name}"

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[Concatenate[Any, P], R]: ...
    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Callable[P, R]: ...
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Any:
        if obj is None:
            return self.method
        bound = functools.partial(self.fn, getattr(obj, self.attr))
        # Kept on the instance, which a descriptor without __set__ gives way to:
        # the next read is a plain attribute (a worker reads these in its loop).
        obj.__dict__[self.name] = bound
        return bound


def on_settings(fn: Callable[Concatenate[QueueSettings, P], R]) -> through[P, R]:
    """A ``QueueOps`` entry: ``fn(settings, ...)`` run on the table's settings."""
    return through("settings", fn)


def _method_of(attr: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(part, ...)`` as ``method(self, ...)`` that passes ``self.<attr>``: a
    generator function if ``fn`` is one, with ``fn``'s signature past its first
    parameter."""
    if inspect.isgeneratorfunction(fn):

        def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return (yield from fn(getattr(self, attr), *args, **kwargs))
    else:

        def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return fn(getattr(self, attr), *args, **kwargs)

    functools.update_wrapper(method, fn, assigned=("__module__", "__name__", "__doc__"))
    signature = inspect.signature(fn)
    first = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    rest = list(signature.parameters.values())[1:]
    method.__signature__ = signature.replace(parameters=[first, *rest])  # type: ignore[attr-defined]
    return method


class QueueOps:
    """Every operation of one queue (or one shard) over the settings it is given,
    by name: each entry names the module that holds the operation."""

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings
        self.keys = settings.keys

    # producing: leaseq.store.enqueue, leaseq.store.workflows
    enqueue = on_settings(_enqueue.enqueue)
    enqueue_many = on_settings(_enqueue.enqueue_many)
    enqueue_flow = on_settings(_workflows.enqueue_flow)
    results = on_settings(_workflows.results)
    parent_results = on_settings(_workflows.parent_results)
    children = on_settings(_workflows.children)
    # consuming: leaseq.store.claim, leaseq.store.leases, leaseq.store.durable, leaseq.store.reap
    claim = on_settings(_claim.claim)
    claim_many = on_settings(_claim.claim_many)
    claim_now = on_settings(_claim.claim_now)
    nudge = on_settings(_claim.nudge)
    wait_for_wake = on_settings(_claim.wait_for_wake)
    extend = on_settings(_leases.extend)
    extend_many = on_settings(_leases.extend_many)
    complete = on_settings(_leases.complete)
    complete_many = on_settings(_leases.complete_many)
    complete_calls = on_settings(_leases.complete_calls)
    fail = on_settings(_leases.fail)
    release = on_settings(_leases.release)
    once = on_settings(_leases.once)
    progress = on_settings(_leases.progress)
    record_step = on_settings(_durable.record_step)
    recorded_steps = on_settings(_durable.recorded_steps)
    suspend = on_settings(_durable.suspend)
    signal = on_settings(_durable.signal)
    reap = on_settings(_reap.reap)
    # reading: leaseq.store.reads, leaseq.store.filters, leaseq.store.wait
    get = on_settings(_reads.get)
    ls = on_settings(_reads.ls)
    find = on_settings(_filters.find)
    stats = on_settings(_reads.stats)
    wait = on_settings(_wait.wait)
    wait_many = on_settings(_wait.wait_many)
    # operators: cancel, retry, edit, purge, clock
    cancel = on_settings(_cancel.cancel)
    retry_dead = on_settings(_retry.retry_dead)
    retry_all_dead = on_settings(_retry.retry_all_dead)
    update = on_settings(_edit.update)
    run_now = on_settings(_edit.run_now)
    purge = on_settings(_purge.purge)
    delete = on_settings(_purge.delete)
    drop = on_settings(_purge.drop)
    reset_clock = on_settings(_clock.reset_clock)
    # steering the queue: pause, schedules, limits
    pause = on_settings(_pause.pause)
    resume = on_settings(_pause.resume)
    schedule = on_settings(_schedules.schedule)
    unschedule = on_settings(_schedules.unschedule)
    schedules = on_settings(_schedules.schedules)
    tick = on_settings(_schedules.tick)
    set_limits = on_settings(_limits.set_limits)
    set_group_limits = on_settings(_limits.set_group_limits)
    limits = on_settings(_limits.limits)
    # workers, history, events: registry, history, events
    register_worker = on_settings(_registry.register_worker)
    unregister_worker = on_settings(_registry.unregister_worker)
    workers = on_settings(_registry.workers)
    history = on_settings(_history.history)
    events = on_settings(_events.events)
    set_events = on_settings(_events.set_events)
    event_settings = on_settings(_events.event_settings)
