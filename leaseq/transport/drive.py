"""Running the operations of ``leaseq.store`` on a client: the only I/O layer.

An operation yields steps (``leaseq.store.steps``). ``lower`` — still without I/O —
turns each step into client invocations: a script ``Call`` becomes an
EVALSHA (with the SCRIPT LOAD retry on NOSCRIPT, after a restart, a flush
or a failover to a fresh replica), the one-time eviction-policy check and,
with ``durable=``, a WAIT. A driver then only invokes: ``SyncDriver`` calls
the redis-py client, ``AsyncDriver`` awaits the ``redis.asyncio`` one, and
both feed replies and errors back through the one ``Pump``. So every
operation's control flow — loops, paging, blocking claims, the errors it
steps over — exists once, whatever the transport.

``Operation`` (and ``FeedOperation`` for ``events``) turns an operation into
a public method, declared once for every queue class: a plain method on a
queue whose driver is ``SyncDriver``, an ``async def`` on an ``AsyncDriver``
one, with the operation's signature and docstring.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import redis.exceptions as rex

from leaseq.errors import LeaseqError, ScriptError, ServerUnavailable
from leaseq.store.replies import stream_entries
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Feed, Listen, Op, Rows, Scan, Step, Wake, one
from leaseq.transport import client as _redis
from leaseq.transport.connect import recheck_primary, recheck_primary_async

__all__ = [
    "AsyncDriver",
    "FeedOperation",
    "Invoke",
    "Operation",
    "Pump",
    "SyncDriver",
    "async_feed",
    "async_op",
    "call_many",
    "drive_many",
    "lower",
    "sync_feed",
    "sync_op",
]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Invoke:
    """One client call: ``start(client)`` returns redis-py's reply (an awaitable on
    an async client, an async iterator for a scan), ``finish`` shapes it.
    ``script`` names the Lua script for error messages."""

    start: Callable[[Any], Any]
    finish: Callable[[Any], Any] = lambda reply: reply
    script: str = ""


class NoScript(LeaseqError):
    """The server does not have the script cached (internal: ``lower`` loads it)."""


class NoShebang(LeaseqError):
    """The server cannot compile a ``#!lua`` line (internal: ``lower`` falls back
    to the script's plain twin)."""


def _rows(client: Any, keys: Any) -> Any:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    return pipe.execute(raise_on_error=False)


def _config_policy(client: Any) -> Any:
    try:
        return client.config_get("maxmemory-policy")
    except (AttributeError, NotImplementedError):  # a client without CONFIG: cannot tell
        return None


def _invokes(step: Step) -> Generator[Invoke, Any, Any]:
    """The client calls of one non-script step, and its reply."""
    if isinstance(step, Command):
        name, args = step.name, step.args
        return (yield Invoke(lambda c: getattr(c, name)(*args)))
    if isinstance(step, Wake):
        wake_keys, timeout = [step.key, *step.more], step.timeout
        return (
            yield Invoke(
                lambda c: c.blpop(wake_keys, timeout=_redis.wake_timeout(c, timeout)),
                lambda got: got is not None,
            )
        )
    if isinstance(step, Listen):
        stream, after, wait = step.key, step.after, step.timeout
        return (
            yield Invoke(
                lambda c: c.xread(
                    {stream: after},
                    count=1000,
                    block=max(1, int(_redis.wake_timeout(c, wait) * 1000)),  # 0 = forever
                ),
                stream_entries,
            )
        )
    if isinstance(step, Rows):
        keys = step.keys
        return (yield Invoke(lambda c: _rows(c, keys))) if keys else []
    if isinstance(step, Scan):
        match = step.match
        return (yield Invoke(lambda c: c.scan_iter(match=match, count=1000), list))
    raise TypeError(f"not a leaseq step: {step!r}")


class _Checked:
    """What a driver remembers between operations: has the server been looked at."""

    _checked: bool
    _core: QueueSettings

    def _first_checks(self) -> Op[None]:
        """Steps run once, before this driver's first script call (and again after
        one raised): the queue's own checks of the server's state."""
        return
        yield


_PLAIN = "_leaseq_plain_scripts"
"""Set on a client whose server cannot compile a ``#!lua`` line (before Redis 7,
fakeredis): from then on it gets the scripts' plain twins (see ``scripts``)."""


def _evalsha(
    call: Call[Any], plain: bool | None, wait: tuple[int, int] | None = None
) -> Generator[Invoke, Any, Any]:
    """EVALSHA of ``call``'s script (its plain twin if ``plain``; None: as the
    client was marked, read in the same step), loading it on NOSCRIPT.

    ``wait``: (replicas, timeout ms) of ``durable=``: then a ``WAIT`` goes right
    after the EVALSHA in one pipeline, so **on the same connection** — WAIT
    counts only its own connection's writes, and sent as a call of its own,
    redis-py may run it on another pooled connection (another thread's turn),
    one that wrote nothing, which it would acknowledge at once. The reply is
    then (the script's reply, the replicas that acknowledged)."""
    keys, args, script = call.keys, call.args, call.script

    def twin(c: Any) -> bool:
        return bool(getattr(c, _PLAIN, False)) if plain is None else plain

    def evalsha(c: Any) -> Any:
        sha = script.plain_sha if twin(c) else script.sha
        if wait is None:
            return c.evalsha(sha, len(keys), *keys, *args)
        pipe = c.pipeline(transaction=False)
        pipe.evalsha(sha, len(keys), *keys, *args)
        pipe.execute_command("WAIT", *wait)
        return pipe.execute(raise_on_error=False)

    def replies(got: Any) -> Any:
        if wait is None:
            return got
        for item in got:
            if isinstance(item, Exception):
                raise item
        return got[0], int(got[1])

    try:
        return (yield Invoke(evalsha, replies, script=script.name))
    except NoScript:
        yield Invoke(
            lambda c: c.script_load(script.plain if twin(c) else script.source), script=script.name
        )
        return (yield Invoke(evalsha, replies, script=script.name))


def _call(call: Call[R], driver: _Checked) -> Generator[Invoke, Any, R]:
    """The client calls of one script call: EVALSHA (loading the script on
    NOSCRIPT), the eviction check before a queue's first call, the WAIT of
    ``durable=``; returns the parsed reply."""
    core = driver._core
    if not driver._checked:
        driver._checked = True
        try:
            try:
                policy = yield Invoke(_config_policy)
            except LeaseqError:
                policy = None  # CONFIG is often forbidden on managed servers; not fatal
            _redis.check_server_reply(policy)
            yield from lower(driver._first_checks(), driver)
        except BaseException:
            driver._checked = False  # look again at the next call
            raise
    replicas = core.replicas_for(call)
    timeout, key = core.durable_timeout_ms, call.keys[0] if call.keys else ""
    # durable= (docs/scaling.md): the WAIT rides with the EVALSHA on its connection,
    # except on a cluster client, which sends it to the key's node (its pipelines
    # route by key, and a WAIT has none).
    wait = None
    if replicas and not (yield Invoke(lambda c: hasattr(c, "get_node_from_key"))):
        wait = (replicas, timeout)
    try:
        # The twin is chosen inside the EVALSHA step: no step of its own on
        # every call (single enqueues pay each step's Python).
        reply = yield from _evalsha(call, None, wait)
    except NoShebang:
        # Only the shebang source fails so: the server compiled nothing, so it
        # ran nothing; mark the client and send the plain twin.
        yield Invoke(lambda c: setattr(c, _PLAIN, True))
        reply = yield from _evalsha(call, True, wait)
    if wait is not None:
        reply, acked = reply
        return core.check_replicated(call, acked, call.parse(reply))
    result = call.parse(reply)
    if replicas:
        acked = yield Invoke(
            lambda c: c.execute_command("WAIT", replicas, timeout, **_redis._wait_args(c, key)),
            int,
        )
        result = core.check_replicated(call, acked, result)
    return result


def lower(op: Op[R], driver: _Checked) -> Generator[Invoke, Any, R]:
    """``op`` as a sequence of client calls. A leaseq error from a call is thrown
    into ``op`` at the ``yield`` of the step that made it."""
    reply: Any = None
    error: LeaseqError | None = None
    while True:
        try:
            step = op.throw(error) if error is not None else op.send(reply)
        except StopIteration as stop:
            result: R = stop.value
            return result
        try:
            if isinstance(step, Call):
                reply = yield from _call(step, driver)
            else:
                reply = yield from _invokes(step)
            error = None
        except LeaseqError as exc:
            reply, error = None, exc


class Pump(Generic[R]):
    """Steps one lowered operation: ``step`` is the next client call, ``done``
    says it returned ``result``. A driver runs the step and hands back its
    reply or its error."""

    def __init__(self, op: Op[R], driver: _Checked) -> None:
        self._gen = lower(op, driver)
        self.done = False
        self.result: Any = None
        self.step: Invoke = Invoke(lambda c: None)
        self.send(None)

    def send(self, reply: Any) -> None:
        self._advance(lambda: self._gen.send(reply))

    def fail(self, exc: Exception) -> None:
        """The client call of ``step`` raised ``exc``: hand it to the operation as
        a leaseq error (``translate``); anything else is a bug and propagates.
        (A plain method, not a context manager around each call: the single
        enqueue pays every microsecond of this path.)"""
        script = self.step.script
        error: LeaseqError | None
        if isinstance(exc, LeaseqError):
            error = exc
        elif isinstance(exc, rex.NoScriptError):
            error = NoScript(script)
        elif isinstance(exc, rex.ResponseError) and "near '#'" in str(exc):
            error = NoShebang(script)  # Redis before 7, fakeredis
        else:
            error = _redis.translate(exc, script)
            if error is None:
                raise exc
        error.__suppress_context__ = True
        self.throw(error)

    def throw(self, error: LeaseqError) -> None:
        self._advance(lambda: self._gen.throw(error))

    def _advance(self, resume: Callable[[], Invoke]) -> None:
        try:
            self.step = resume()
        except StopIteration as stop:
            self.done, self.result = True, stop.value


class SyncDriver(_Checked):
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


def drive_many(client: Any, work: Sequence[tuple[_Checked, Op[Any]]]) -> list[Any]:
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
        pipe = client.pipeline(transaction=False)
        if getattr(client, _PLAIN, False):
            setattr(pipe, _PLAIN, True)
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
        if getattr(pipe, _PLAIN, False):
            setattr(client, _PLAIN, True)
        for i, pump in live:
            if pump.done and results[i] is None:
                results[i] = pump.result
        live = [(i, p) for i, p in live if not p.done and not isinstance(results[i], LeaseqError)]
    return results


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
        plain = bool(getattr(client, _PLAIN, False))
        pipe = client.pipeline(transaction=False)
        for i in todo:
            c = calls[i]
            sha = c.script.plain_sha if plain else c.script.sha
            pipe.evalsha(sha, len(c.keys), *c.keys, *c.args)
        with _redis.translate_errors():
            replies = pipe.execute(raise_on_error=False)
        again: list[int] = []
        for i, reply in zip(todo, replies, strict=True):
            script = calls[i].script
            if isinstance(reply, rex.NoScriptError):
                with _redis.translate_errors(script.name):
                    client.script_load(script.plain if plain else script.source)
                again.append(i)
            elif isinstance(reply, rex.ResponseError) and "near '#'" in str(reply) and not plain:
                setattr(client, _PLAIN, True)  # Redis before 7, fakeredis
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


class AsyncDriver(_Checked):
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
