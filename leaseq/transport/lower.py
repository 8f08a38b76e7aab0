"""Lowering: an operation's steps as client calls, still without I/O.

``lower`` turns each step of an operation (``leaseq.store.steps``) into the
client invocations it implies: a script ``Call`` becomes an EVALSHA (with the
SCRIPT LOAD retry on NOSCRIPT, after a restart, a flush or a failover to a
fresh replica; the plain twin on a server that cannot compile ``#!lua``), the
one-time eviction-policy check and, with ``durable=``, a WAIT. ``Pump`` steps
one lowered operation for a driver (``leaseq.transport.drive``), which only
invokes each call and hands back its reply or its error.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

import redis.exceptions as rex

from leaseq.errors import LeaseqError, ServerFull, ServerUnavailable
from leaseq.store.replies import stream_entries
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Listen, Op, Rows, Scan, Step, Wake
from leaseq.transport import client as _redis
from leaseq.transport.connect import recheck_primary, recheck_primary_async

__all__ = [
    "PLAIN",
    "Checked",
    "Invoke",
    "Pump",
    "lower",
    "no_shebang",
    "queue_evalsha",
    "script_load",
]

R = TypeVar("R")

SCAN_COUNT = 200
"""Keys a SCAN call looks at: a short call on a shared server (about 1 ms over
100,000 keys on a slow box), at the cost of more round trips for discovery."""


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
        # SCAN_COUNT keys a call: 1000 held a shared server ~6 ms over 100,000 job keys.
        return (yield Invoke(lambda c: c.scan_iter(match=match, count=SCAN_COUNT), list))
    raise TypeError(f"not a leaseq step: {step!r}")


class Checked:
    """What a driver remembers between operations: has the server been looked at."""

    _checked: bool
    _core: QueueSettings

    def _first_checks(self) -> Op[None]:
        """Steps run once, before this driver's first script call (and again after
        one raised): the queue's own checks of the server's state."""
        return
        yield


REACHED = "_leaseq_reached"
"""Set on a client once a queue's first checks passed on it: an enqueue on it
then rides out an unavailable server (``_ridden_out``)."""
PLAIN = "_leaseq_plain_scripts"
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
    redis-py may run it on another pooled connection (another thread's or
    task's turn), one whose own writes the replicas already have, which it
    would acknowledge at once (``_script_then_wait``). The reply is then (the
    script's reply, the replicas that acknowledged)."""
    keys, args, script = call.keys, call.args, call.script

    def twin(c: Any) -> bool:
        return bool(getattr(c, PLAIN, False)) if plain is None else plain

    def evalsha(c: Any, chosen: bool | None = None) -> Any:
        sha = script.plain_sha if (twin(c) if chosen is None else chosen) else script.sha
        if wait is None:
            return c.evalsha(sha, len(keys), *keys, *args)
        return _script_then_wait(c, (sha, len(keys), *keys, *args), wait)

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
        # Load and send again the same twin: another thread may mark the client
        # between the two steps, and the retry must call what was loaded.
        chosen = yield Invoke(twin)
        source, key = script.plain if chosen else script.source, keys[0] if keys else None
        yield Invoke(lambda c: script_load(c, source, key), script=script.name)
        return (yield Invoke(lambda c: evalsha(c, chosen), replies, script=script.name))


def script_load(c: Any, source: str, key: str | None) -> Any:
    """SCRIPT LOAD, and on a cluster client on the node that serves ``key`` too: the
    client sends it to the primaries it knows, and just after a failover that
    list may lack the replica promoted in the dead master's place, the node whose
    NOSCRIPT sent us here (the EVALSHA that got it taught the client the slot's
    node). An EVAL of the source would route by key, but the least-privilege
    ACL (docs/reliability.md) has EVALSHA and SCRIPT LOAD, not EVAL."""
    if key is None or not hasattr(c, "get_node_from_key"):
        return c.script_load(source)
    if inspect.iscoroutinefunction(c.execute_command):
        return _script_load_async(c, source, key)
    c.script_load(source)
    return c.execute_command("SCRIPT LOAD", source, target_nodes=c.get_node_from_key(key))


async def _script_load_async(c: Any, source: str, key: str) -> Any:
    await c.script_load(source)
    node = c.get_node_from_key(key)
    return await c.execute_command("SCRIPT LOAD", source, target_nodes=node)


def _script_then_wait(c: Any, evalsha: tuple[Any, ...], wait: tuple[int, int]) -> Any:
    """EVALSHA (its arguments: sha, numkeys, keys, args) then ``WAIT`` in one
    pipeline, on one connection: the replies, an error in place of a failed one.

    On a cluster client, on a connection of the node of the first key: its own
    pipelines route by key (a WAIT has none), and a WAIT sent apart goes out on
    any of the node's pooled connections (the asyncio client hands out the
    oldest idle one). Going to the node directly bypasses the client's
    redirect handling, so when the node fails or says the slot has moved, the
    client is asked to learn the cluster's layout again (``_relearn``) before
    the error is raised: the next call goes to the node that serves the slot."""
    if not hasattr(c, "get_node_from_key"):
        pipe = c.pipeline(transaction=False)
        pipe.evalsha(*evalsha)
        pipe.execute_command("WAIT", *wait)
        return pipe.execute(raise_on_error=False)
    if inspect.iscoroutinefunction(c.execute_command):
        return _script_then_wait_async(c, evalsha, wait)
    key = evalsha[2]
    pipe = c.get_redis_connection(c.get_node_from_key(key)).pipeline(transaction=False)
    pipe.execute_command("EVALSHA", *evalsha)
    pipe.execute_command("WAIT", *wait)
    try:
        replies = pipe.execute(raise_on_error=False)
    except rex.RedisError:
        _relearn(c, key)
        raise
    if any(_redirect(reply) for reply in replies):
        _relearn(c, key)
    return replies


async def _script_then_wait_async(c: Any, evalsha: tuple[Any, ...], wait: tuple[int, int]) -> Any:
    """``_script_then_wait`` on an asyncio cluster client: both commands as one
    batch of the node (``ClusterNode.execute_pipeline``: one connection). The
    client learns the layout at its first command: ``initialize`` (at once
    once done) before the node is looked up."""
    from redis.asyncio.cluster import PipelineCommand

    await c.initialize()
    node = c.get_node_from_key(evalsha[2])
    commands = [PipelineCommand(0, "EVALSHA", *evalsha), PipelineCommand(1, "WAIT", *wait)]
    try:
        await node.execute_pipeline(commands)
    except rex.RedisError:
        await _relearn_async(c, evalsha[2])
        raise
    replies = [command.result for command in commands]
    if any(_redirect(reply) for reply in replies):
        await _relearn_async(c, evalsha[2])
    return replies


def _redirect(reply: Any) -> bool:
    """Whether a node's reply says the slot is served elsewhere (MOVED, ASK) or
    that the node is gone."""
    if isinstance(reply, (rex.ConnectionError, rex.TimeoutError)):
        return True
    return isinstance(reply, rex.ResponseError) and (
        isinstance(reply, (rex.AskError, rex.MovedError)) or str(reply).startswith(("MOVED", "ASK"))
    )


def _relearn(c: Any, key: str) -> None:
    """A read of ``key`` through the cluster client, which follows a MOVED to the
    slot's node (and learns the layout again when a node fails); its own
    failure is the caller's error already, so it is dropped."""
    with contextlib.suppress(rex.RedisError):
        c.exists(key)


async def _relearn_async(c: Any, key: str) -> None:
    with contextlib.suppress(rex.RedisError):
        await c.exists(key)


def _check_first(driver: Checked) -> Generator[Invoke, Any, None]:
    """Before a queue's first script call (and again after one raised): the
    eviction-policy check and the queue's own checks of the server's state."""
    if driver._checked:
        return
    driver._checked = True
    try:
        try:
            policy = yield Invoke(_config_policy)
        except LeaseqError:
            policy = None  # CONFIG is often forbidden on managed servers; not fatal
        _redis.check_server_reply(policy)
        yield from lower(driver._first_checks(), driver)
        yield Invoke(lambda c: setattr(c, REACHED, True))
    except BaseException:
        driver._checked = False  # look again at the next call
        raise


def no_shebang(exc: BaseException) -> bool:
    """Whether ``exc`` says the server cannot compile a ``#!lua`` line (Redis
    before 7, fakeredis): it ran nothing, and its plain twin will run."""
    return isinstance(exc, rex.ResponseError) and "near '#'" in str(exc)


def queue_evalsha(pipe: Any, calls: Sequence[Call[Any]], plain: bool) -> None:
    """Queue an EVALSHA of each call on ``pipe`` (its plain twin if ``plain``)."""
    for call in calls:
        sha = call.script.plain_sha if plain else call.script.sha
        pipe.evalsha(sha, len(call.keys), *call.keys, *call.args)


def _call(call: Call[R], driver: Checked) -> Generator[Invoke, Any, R]:
    """The client calls of one script call: EVALSHA (loading the script on
    NOSCRIPT), the eviction check before a queue's first call, the WAIT of
    ``durable=``; returns the parsed reply."""
    core = driver._core
    yield from _check_first(driver)
    replicas = core.replicas_for(call)
    # durable= (docs/scale-out.md): the WAIT rides with the EVALSHA on its connection.
    wait = (replicas, core.durable_timeout_ms) if replicas else None
    try:
        # The twin is chosen inside the EVALSHA step: no step of its own on
        # every call (single enqueues pay each step's Python).
        reply = yield from _evalsha(call, None, wait)
    except NoShebang:
        # Only the shebang source fails so: the server compiled nothing, so it
        # ran nothing; mark the client and send the plain twin.
        yield Invoke(lambda c: setattr(c, PLAIN, True))
        reply = yield from _evalsha(call, True, wait)
    if wait is not None:
        reply, acked = reply
        return core.check_replicated(call, acked, call.parse(reply))
    return call.parse(reply)


REPLAYABLE = frozenset({"enqueue", "enqueue_flow"})
"""Scripts sent again while the server is unavailable (``enqueue_retry``), when
the failure proves the call did not run (``ServerUnavailable.not_run``). One
whose reply was lost is not: it may have run, and its job may be finished
and deleted by now (``keep_succeeded``), so a replay would make it again."""
FIRST_PAUSE, LONGEST_PAUSE = 0.05, 1.0
"""Seconds between replays: doubling from the first, at most the longest."""


def _pause(client: Any, seconds: float) -> Coroutine[Any, Any, None] | None:
    """Wait ``seconds`` (an awaitable on an async client), after asking Sentinel
    where the primary is now: a failover moves it."""
    if inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
        return _pause_async(client, seconds)
    recheck_primary(client)
    time.sleep(seconds)
    return None


async def _pause_async(client: Any, seconds: float) -> None:
    await recheck_primary_async(client)
    await asyncio.sleep(seconds)


def _ridden_out(call: Call[R], driver: Checked) -> Generator[Invoke, Any, R]:
    """``_call``, sent again while the server is unavailable, for up to the
    queue's ``enqueue_retry`` seconds (for a REPLAYABLE call), when its client
    has reached a server before (a wrong URL or a server never started fails
    at once) and the failure proves the call did not run. A full server
    (ServerFull) is no outage: it raises at once."""
    window = driver._core.enqueue_retry
    if window <= 0:
        return (yield from _call(call, driver))
    give_up, pause = time.monotonic() + window, FIRST_PAUSE
    while True:
        try:
            return (yield from _call(call, driver))
        except ServerUnavailable as exc:
            reached = yield Invoke(lambda c: bool(getattr(c, REACHED, False)))
            late = time.monotonic() + pause > give_up
            if isinstance(exc, ServerFull) or not exc.not_run or not reached or late:
                raise
        yield Invoke(partial(_pause, seconds=pause))
        pause = min(2 * pause, LONGEST_PAUSE)


def lower(op: Op[R], driver: Checked) -> Generator[Invoke, Any, R]:
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
                send = _ridden_out if step.script.name in REPLAYABLE else _call
                reply = yield from send(step, driver)
            else:
                reply = yield from _invokes(step)
            error = None
        except LeaseqError as exc:
            reply, error = None, exc


class Pump(Generic[R]):
    """Steps one lowered operation: ``step`` is the next client call, ``done``
    says it returned ``result``. A driver runs the step and hands back its
    reply or its error."""

    def __init__(self, op: Op[R], driver: Checked) -> None:
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
        elif no_shebang(exc):
            error = NoShebang(script)
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
