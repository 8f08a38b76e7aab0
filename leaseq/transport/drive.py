"""Running the operations of ``leaseq.store`` on a client: the only I/O layer.

An operation yields steps (``leaseq.store.steps``). ``lower``
(``leaseq.transport.lower``) — still without I/O — turns each step into client
invocations: a script ``Call`` becomes an EVALSHA (with the SCRIPT LOAD retry
on NOSCRIPT, after a restart, a flush or a failover to a fresh replica), the
one-time eviction-policy check and, with ``durable=``, a WAIT. A driver then
only invokes: ``SyncDriver`` calls the redis-py client, ``AsyncDriver`` awaits
the ``redis.asyncio`` one, and both feed replies and errors back through the
one ``Pump``. So every operation's control flow — loops, paging, blocking
claims, the errors it steps over — exists once, whatever the transport.

``Operation`` (and ``FeedOperation`` for ``events``) turns an operation into
a public method, declared once for every queue class: a plain method on a
queue whose driver is ``SyncDriver``, an ``async def`` on an ``AsyncDriver``
one, with the operation's signature and docstring.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import redis.exceptions as rex

from leaseq.errors import LeaseqError, ScriptError, ServerUnavailable
from leaseq.store.steps import Call, Feed, Op, one
from leaseq.transport import client as _redis
from leaseq.transport.connect import recheck_primary, recheck_primary_async
from leaseq.transport.lower import PLAIN, Checked, Pump, no_shebang, queue_evalsha, script_load

__all__ = [
    "AsyncDriver",
    "FeedOperation",
    "Operation",
    "SyncDriver",
    "async_feed",
    "async_op",
    "call_many",
    "drive_many",
    "sync_feed",
    "sync_op",
]

P = ParamSpec("P")
R = TypeVar("R")


class SyncDriver(Checked):
    """Runs operations on a redis-py client, ``self.redis``."""

    redis: Any

    def _drive(self, op: Op[R]) -> R:
        pump: Pump[R] = Pump(op, self)
        try:
            while not pump.done:
                step = pump.step
                try:
                    reply = step.finish(step.start(self.redis))
                except Exception as exc:
                    pump.fail(exc)
                else:
                    pump.send(reply)
        except ServerUnavailable:
            recheck_primary(self.redis)  # a failover: the next call finds the new primary
            raise
        result: R = pump.result
        return result

    def _run(self, call: Call[R]) -> R:
        """Run one script call (and what it implies: NOSCRIPT reload, WAIT)."""
        return self._drive(one(call))


def drive_many(client: Any, work: Sequence[tuple[Checked, Op[Any]]]) -> list[Any]:
    """Run many operations (each with the queue that drives it) on ``client``
    together: each round sends the next client call of every unfinished one in
    one pipeline, so N queues' stats cost a few round trips, not N. Per
    operation, in order: its result, or the leaseq error it raised."""
    results: list[Any] = [None] * len(work)
    live: list[tuple[int, Pump[Any]]] = []
    for i, (driver, op) in enumerate(work):
        try:
            live.append((i, Pump(op, driver)))
        except LeaseqError as exc:
            results[i] = exc
    while live:
        _one_round(client, live, results)
        for i, pump in live:
            if pump.done and results[i] is None:
                results[i] = pump.result
        live = [(i, p) for i, p in live if not p.done and not isinstance(results[i], LeaseqError)]
    return results


def _one_round(client: Any, live: list[tuple[int, Pump[Any]]], results: list[Any]) -> None:
    """The next client call of every live operation, in one pipeline. A leaseq
    error an operation raises takes its place in ``results``."""
    pipe = client.pipeline(transaction=False)
    if getattr(client, PLAIN, False):
        setattr(pipe, PLAIN, True)
    queued: list[tuple[int, Pump[Any]]] = []
    for i, pump in live:
        try:
            if _run_local(pump, pipe):
                queued.append((i, pump))
        except LeaseqError as exc:
            results[i] = exc
    if queued:
        with _redis.translate_errors():
            replies = pipe.execute(raise_on_error=False)
        for (i, pump), reply in zip(queued, replies, strict=True):
            try:
                _settle(pump, reply)
            except LeaseqError as exc:
                results[i] = exc
    if getattr(pipe, PLAIN, False):
        setattr(client, PLAIN, True)


def call_many(client: Any, calls: Sequence[Call[Any]]) -> list[Any]:
    """Run many script calls in one pipeline (a read of many queues): the fast
    path of ``drive_many`` for operations that are one ``Call`` each and need
    no per-queue first check or ``WAIT`` (stats). NOSCRIPT loads the scripts
    and sends those calls again; a server without ``#!lua`` gets the plain
    twins. Per call, in order: its parsed reply, or the leaseq error it met."""
    results: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    # Send; on NOSCRIPT load and send again; on a server without '#!lua' the
    # plain twins, loaded in turn: at most four rounds.
    for _ in range(4):
        if not todo:
            break
        plain = bool(getattr(client, PLAIN, False))
        pipe = client.pipeline(transaction=False)
        queue_evalsha(pipe, [calls[i] for i in todo], plain)
        with _redis.translate_errors():
            replies = pipe.execute(raise_on_error=False)
        again: list[int] = []
        for i, reply in zip(todo, replies, strict=True):
            script = calls[i].script
            if isinstance(reply, rex.NoScriptError):
                with _redis.translate_errors(script.name):
                    keys = calls[i].keys
                    script_load(
                        client, script.plain if plain else script.source, keys[0] if keys else None
                    )
                again.append(i)
            elif no_shebang(reply) and not plain:
                setattr(client, PLAIN, True)
                again.append(i)
            elif isinstance(reply, Exception):
                results[i] = _redis.translate(reply, script.name) or reply
            else:
                try:
                    results[i] = calls[i].parse(reply)
                except LeaseqError as exc:
                    results[i] = exc
        todo = again
    for i in todo:
        results[i] = ScriptError(f"{calls[i].script.name}: the server would not run it")
    return results


def _run_local(pump: Pump[Any], pipe: Any) -> bool:
    """Advance ``pump`` through the steps that need no server (True once a call is
    queued on ``pipe``; False when the operation is done)."""
    while not pump.done:
        try:
            raw = pump.step.start(pipe)
        except Exception as exc:  # raised before reaching the server: the op's to see
            _settle(pump, exc)
            continue
        if raw is pipe:
            return True
        _settle(pump, raw)
    return False


def _settle(pump: Pump[Any], reply: Any) -> None:
    """Hand ``reply`` (or the error a pipeline put in its place) to ``pump``."""
    if isinstance(reply, Exception):
        pump.fail(reply)
        return
    if isinstance(reply, BaseException):
        raise reply
    try:
        done = pump.step.finish(reply)
    except Exception as exc:
        pump.fail(exc)
    else:
        pump.send(done)


class AsyncDriver(Checked):
    """Runs operations on a ``redis.asyncio`` client, ``self.redis``."""

    redis: Any

    async def _drive(self, op: Op[R]) -> R:
        pump: Pump[R] = Pump(op, self)
        try:
            while not pump.done:
                step = pump.step
                try:
                    raw = step.start(self.redis)
                    if inspect.isawaitable(raw):
                        raw = await raw
                    elif hasattr(raw, "__aiter__"):  # scan_iter
                        raw = [item async for item in raw]
                    reply = step.finish(raw)
                except Exception as exc:
                    pump.fail(exc)
                else:
                    pump.send(reply)
        except ServerUnavailable:
            await recheck_primary_async(self.redis)  # a failover: see SyncDriver
            raise
        result: R = pump.result
        return result

    async def _run(self, call: Call[R]) -> R:
        """Run one script call (and what it implies: NOSCRIPT reload, WAIT)."""
        return await self._drive(one(call))


def _same_doc(method: Any, op: Any) -> None:
    functools.update_wrapper(
        method, op, assigned=("__module__", "__name__", "__qualname__", "__doc__")
    )


def sync_op(op: Callable[Concatenate[Any, P], Op[R]]) -> Callable[Concatenate[Any, P], R]:
    """A public method that runs the operation named like ``op`` of ``self._ops``
    (a ``QueueOps`` or a ``ShardedOps``: the same names and signatures) on the
    sync driver; typed and documented as ``op``."""
    name = op.__name__

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._drive(getattr(self._ops, name)(*args, **kwargs))
        return result

    _same_doc(method, op)
    return method


def async_op(
    op: Callable[Concatenate[Any, P], Op[R]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """``sync_op`` for the async driver: an ``async def`` method."""
    name = op.__name__

    async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = await self._drive(getattr(self._ops, name)(*args, **kwargs))
        return result

    _same_doc(method, op)
    return method


FEED = "_leaseq_feed"
"""Set on a public method made by ``sync_feed`` / ``async_feed``: it returns an
iterator of items rather than one result."""


def _start(feed: Feed[R]) -> Op[list[R]] | None:
    """The feed's first operation, or None if it ends at once. Run at the call,
    so a bad argument raises there, not at the first item."""
    return next(feed, None)


def sync_feed(
    op: Callable[Concatenate[Any, P], Feed[R]],
) -> Callable[Concatenate[Any, P], Iterator[R]]:
    """A public method that runs the feed named like ``op`` of ``self._ops`` on the
    sync driver: it returns an iterator of the feed's items, each page read as
    the iteration reaches it."""
    name = op.__name__

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[R]:
        feed: Feed[R] = getattr(self._ops, name)(*args, **kwargs)
        first = _start(feed)

        def items() -> Iterator[R]:
            step = first
            while step is not None:
                page = self._drive(step)
                yield from page
                step = next(feed, None)

        return items()

    _same_doc(method, op)
    setattr(method, FEED, True)
    return method


def async_feed(
    op: Callable[Concatenate[Any, P], Feed[R]],
) -> Callable[Concatenate[Any, P], AsyncIterator[R]]:
    """``sync_feed`` for the async driver: the method returns an async iterator
    (``async for event in queue.events(...)``)."""
    name = op.__name__

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[R]:
        feed: Feed[R] = getattr(self._ops, name)(*args, **kwargs)
        first = _start(feed)

        async def items() -> AsyncIterator[R]:
            step = first
            while step is not None:
                page = await self._drive(step)
                for item in page:
                    yield item
                step = next(feed, None)

        return items()

    _same_doc(method, op)
    setattr(method, FEED, True)
    return method


def _for_driver(sync: Any, asynchronous: Any, obj: Any, owner: type[Any] | None) -> Any:
    """The method of ``obj``'s driver kind, bound; read from a class, the function."""
    if obj is None:
        return asynchronous if owner is not None and issubclass(owner, AsyncDriver) else sync
    method = asynchronous if isinstance(obj, AsyncDriver) else sync
    return method.__get__(obj, owner)


class Operation(Generic[P, R]):
    """One public queue method for every queue class, sync and async alike.

    ``enqueue = Operation(QueueOps.enqueue)`` in a class body is the method that
    runs ``self._ops.enqueue`` (a ``QueueOps`` or a ``ShardedOps``: the same
    names and signatures) on the queue's driver: read from a ``SyncDriver`` it
    is a plain method returning the result, from an ``AsyncDriver`` an
    ``async def`` one. Read from the class it is that function itself, so
    ``help()`` and ``inspect`` see the operation's signature and docstring.
    """

    def __init__(self, op: Callable[Concatenate[Any, P], Op[R]]) -> None:
        self._sync = sync_op(op)
        self._async = async_op(op)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, obj: SyncDriver, owner: type[Any] | None = None) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, obj: AsyncDriver, owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, obj: Any, owner: type[Any] | None = None) -> Any:
        return _for_driver(self._sync, self._async, obj, owner)


class FeedOperation(Generic[P, R]):
    """``Operation`` for a feed (``events``): the method returns an iterator of the
    feed's items on a sync queue and an async iterator on an asyncio one."""

    def __init__(self, op: Callable[Concatenate[Any, P], Feed[R]]) -> None:
        self._sync = sync_feed(op)
        self._async = async_feed(op)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(
        self, obj: SyncDriver, owner: type[Any] | None = None
    ) -> Callable[P, Iterator[R]]: ...
    @overload
    def __get__(
        self, obj: AsyncDriver, owner: type[Any] | None = None
    ) -> Callable[P, AsyncIterator[R]]: ...
    def __get__(self, obj: Any, owner: type[Any] | None = None) -> Any:
        return _for_driver(self._sync, self._async, obj, owner)
