"""A lease's life after its claim: extend (heartbeat), complete, fail, release,
once and progress — each the one script call of its transition, the parser of
its reply (a refusal, a lost lease or a replay, becomes a ``LeaseLost`` there),
and the operation a queue runs. The claim itself is ``leaseq.store.claim``; the
hand-back of expired leases ``leaseq.store.reap``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from leaseq.errors import (
    DamagedRow,
    InvalidArgument,
    InvalidPayload,
    LeaseLost,
    PayloadTooLarge,
)
from leaseq.store import validate as v
from leaseq.store.effects import encode_effects
from leaseq.store.keys import check_job_id
from leaseq.store.replies import as_text, refusal
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Batch, Call, Op, Partial, joined
from leaseq.types import Lease, State

R = TypeVar("R")

__all__ = [
    "ERROR_LIMIT",
    "LEASE_CHUNK",
    "PROGRESS_BYTES",
    "TRACEBACK_LIMIT",
    "complete",
    "complete_call",
    "complete_calls",
    "complete_many",
    "extend",
    "extend_call",
    "extend_calls",
    "extend_many",
    "fail",
    "fail_call",
    "once",
    "once_call",
    "progress",
    "progress_call",
    "release",
    "release_call",
]

LEASE_CHUNK = 64
"""Leases sent in one complete or extend call (complete_many, extend_many): a
call that stops at its time budget has the rest sent again, so each call is
sent about what one budget does, not a big batch read again and again."""
ERROR_LIMIT = 8192
"""Longest last_error kept, in characters."""
TRACEBACK_LIMIT = 16384
"""Longest traceback kept, in characters."""
PROGRESS_BYTES = 4096
"""Longest progress value kept, as JSON text: a small report, not a result channel."""


def own(queue: QueueSettings, leases: Sequence[Lease]) -> None:
    """Raise InvalidArgument, before any call, for a lease claimed from another
    queue. Its token and incarnation are only this queue's to fence: another
    queue may hold a row under the same id, attempt and incarnation (numbers
    are per queue), which the lease must never act on."""
    for lease in leases:
        if lease.queue != queue.name:
            raise InvalidArgument(
                f"a lease of queue {lease.queue!r} (job {lease.id!r}), not of {queue.name!r}"
            )


# -- extend ----------------------------------------------------------------------------


def fenced(
    queue: QueueSettings, script: str, lease: Lease, read: Callable[[list[Any]], R], **args: Any
) -> Call[R]:
    """A call of ``script`` on one job under ``lease``'s token (ARGV ``token`` and
    ``incarnation``, the row's key from its id, ``args`` the rest): ``read``
    makes the result of an OK reply; LOST becomes LeaseLost (``refusal``),
    DAMAGED a DamagedRow."""
    own(queue, [lease])

    def parse(reply: list[Any]) -> R:
        code = as_text(reply[0])
        if code == "DAMAGED":
            raise DamagedRow(lease.id, as_text(reply[1]), as_text(reply[2]))
        if code != "OK":
            raise refusal(script, lease, reply)
        return read(reply)

    return SCRIPTS[script].call(
        queue.keys,
        parse,
        at={"id": lease.id},
        token=lease.attempt,
        incarnation=lease.incarnation,
        fence=lease.fence,
        **args,
    )


def _flags(n: int, started: Sequence[bool] | None, waiting: Sequence[bool] | None) -> str:
    """extend.lua's flags: '1' started, '2' still waiting (mark it), '0' no news."""
    for name, given in (("started", started), ("waiting", waiting)):
        if given is not None and len(given) != n:
            raise InvalidArgument(f"{len(given)} {name} flags for {n} leases")
    if started is None and waiting is None:
        return ""
    return "".join(
        "1" if started and started[i] else "2" if waiting and waiting[i] else "0" for i in range(n)
    )


def extend_call(
    queue: QueueSettings,
    leases: Sequence[Lease],
    ttl: float,
    started: Sequence[bool] | None = None,
    waiting: Sequence[bool] | None = None,
) -> Call[Batch[Lease | LeaseLost]]:
    """Heartbeat ``leases`` (one call; past its time budget, its reply is a
    ``Partial`` with the call for the rest): per lease, the lease with its new
    deadline, or the LeaseLost (LeaseCapReached past the cap) it met.
    ``started[i]``: lease i was a marked spare and its handler starts now;
    ``waiting[i]``: lease i is a spare still waiting for a handler: mark it, so
    a crash from now on refunds its attempt (docs/leases-and-fencing.md)."""
    own(queue, leases)
    lease_ms = queue.lease_ms(ttl)
    k = queue.keys
    flags = _flags(len(leases), started, waiting)
    jobs: list[str] = []
    items: list[str | bytes | int] = []
    for lease in leases:
        jobs.append(k.job(lease.id))
        items += (lease.id, lease.attempt, lease.incarnation, lease.fence)

    def parse(reply: list[Any]) -> Batch[Lease | LeaseLost]:
        done: list[Lease | LeaseLost] = [
            msgspec.structs.replace(lease, deadline=int(item[1]) / 1000.0)
            if as_text(item[0]) == "OK"
            else refusal("extend", lease, item)
            for lease, item in zip(leases, reply, strict=False)
        ]
        if len(done) == len(leases):
            return done
        # Stopped at its time budget: the leases past the last reply, again.
        rest, at = leases[len(done) :], len(done)
        more = None if started is None else started[at:]
        wait = None if waiting is None else waiting[at:]
        return Partial(done, extend_call(queue, rest, ttl, more, wait))

    return SCRIPTS["extend"].call(
        k,
        parse,
        key_tail=jobs,
        arg_tail=items,
        lease_ms=lease_ms,
        cap_ms=queue.lease_cap_ms,
        started=flags,
    )


def extend_calls(
    queue: QueueSettings,
    leases: Sequence[Lease],
    ttl: float,
    started: Sequence[bool] | None = None,
    waiting: Sequence[bool] | None = None,
) -> list[Call[Batch[Lease | LeaseLost]]]:
    """``extend_call`` for any number of leases, LEASE_CHUNK per call."""
    calls = []
    for start in range(0, len(leases), LEASE_CHUNK):
        cut = slice(start, start + LEASE_CHUNK)
        more = None if started is None else started[cut]
        wait = None if waiting is None else waiting[cut]
        calls.append(extend_call(queue, leases[cut], ttl, more, wait))
    return calls


def extend(queue: QueueSettings, lease: Lease, ttl: float = 30.0) -> Op[Lease]:
    """Push the deadline to now + ``ttl`` (server clock), within ``lease_cap``
    of the claim; return the lease with its new deadline. Raises LeaseLost."""
    (result,) = yield from joined([extend_call(queue, [lease], ttl)])
    if isinstance(result, LeaseLost):
        raise result
    renewed: Lease = result
    return renewed


def extend_many(
    queue: QueueSettings,
    leases: Sequence[Lease],
    ttl: float = 30.0,
    started: Sequence[bool] | None = None,
    waiting: Sequence[bool] | None = None,
) -> Op[list[Lease | LeaseLost]]:
    """Heartbeat many leases in few calls (chunks of 500). Per lease, in order:
    the lease with its new deadline, or the LeaseLost it met (nothing written
    for that one). A worker's heartbeat for all it holds; ``started[i]`` says a
    marked spare's handler starts now (a crash then charges it), ``waiting[i]``
    that a spare still waits for a handler (mark it: a crash refunds it)."""
    return (yield from joined(extend_calls(queue, leases, ttl, started, waiting)))


# -- complete --------------------------------------------------------------------------


def complete_call(
    queue: QueueSettings,
    leases: Sequence[Lease],
    results: Sequence[Any] | None,
    effects: Sequence[Sequence[Any] | None] | None = None,
    costs: Sequence[float | None] | None = None,
) -> Call[Batch[LeaseLost]]:
    """Complete ``leases`` in one call (past its time budget, its reply is a
    ``Partial`` with the call for the rest). ``effects[i]``: the Redis writes (see
    ``leaseq.store.effects``) applied with item i's completion, in the same
    script; the reply raises InvalidArgument when one cannot apply (that item
    is then left active, its lease held). ``costs[i]``: what item i's run
    really spent, settled in the cost windows (None: its estimate stands)."""
    own(queue, leases)
    args, effect_keys, extras = _complete_args(queue, leases, results, effects, costs)

    def parse(reply: list[Any]) -> Batch[LeaseLost]:
        lost, later = _completed(leases, reply)
        if later is None:
            return lost

        def rest_of(values: Sequence[Any] | None) -> Any:
            return None if values is None else values[later:]

        rest = complete_call(
            queue, leases[later:], rest_of(results), rest_of(effects), rest_of(costs)
        )
        return Partial(lost, rest)

    return SCRIPTS["complete"].call(
        queue.keys,
        parse,
        key_tail=effect_keys,
        arg_tail=args,
        keep_ms=queue.keep_ms,
        keep_count=queue.keep_count,
        n=len(leases),
        extras=extras,
    )


def _complete_args(
    queue: QueueSettings,
    leases: Sequence[Lease],
    results: Sequence[Any] | None,
    effects: Sequence[Sequence[Any] | None] | None,
    costs: Sequence[float | None] | None,
) -> tuple[list[str | bytes | int], list[str], int]:
    """complete.lua's ARGV tail, its effect KEYS, and how many items carry extras.

    Four values per item; the few with a result, effects or a cost add theirs
    after all the items, so a batch of plain completions costs the least to
    pack and to read."""
    args: list[str | bytes | int] = []
    extras: list[str | bytes | int] = []
    effect_keys: list[str] = []
    effect_args: list[str | bytes | int] = []
    encode = queue.codec.encode
    for i, lease in enumerate(leases):
        args += (lease.id, lease.attempt, lease.incarnation, lease.fence)
        result = None if results is None else results[i]
        effect = None if effects is None else effects[i]
        cost = None if costs is None else costs[i]
        if result is None and effect is None and cost is None:
            continue
        e_keys, e_args = encode_effects(effect, queue.keys)
        effect_keys += e_keys
        effect_args += e_args
        extras += (
            i + 1,
            b"" if result is None else encode(result, "result"),
            len(e_keys),
            "" if cost is None else v.spent(cost),
        )
    return args + extras + effect_args, effect_keys, len(extras) // 4


def _completed(leases: Sequence[Lease], reply: list[Any]) -> tuple[list[LeaseLost], int | None]:
    """A complete reply: the refusals, and where the call stopped at its time
    budget (the index of the first lease not looked at; None: it did them all).
    Only the refused items are listed, each by its place: first EFFECT, then
    refusals, and last LATER."""
    later = None
    if reply and as_text(reply[-1][1]) == "LATER":
        later = int(reply.pop()[0]) - 1
    others = [(leases[int(item[0]) - 1], item[1:]) for item in reply]
    for lease, item in others:
        if as_text(item[0]) == "EFFECT":
            raise InvalidArgument(
                f"effect {int(item[1])} of job {lease.id!r} cannot apply: "
                f"{as_text(item[2])}; nothing was written and the lease still holds"
            )
    return [refusal("complete", lease, item) for lease, item in others], later


def complete_calls(
    queue: QueueSettings,
    leases: Sequence[Lease],
    results: Sequence[Any] | None = None,
    costs: Sequence[float | None] | None = None,
) -> list[Call[Batch[LeaseLost]]]:
    """The calls of ``complete_many``, LEASE_CHUNK leases per call. Every result
    is encoded (and every cost checked) here, so a bad one raises before any call runs."""
    for name, values in (("results", results), ("costs", costs)):
        if values is not None and len(values) != len(leases):
            raise InvalidArgument(f"{len(values)} {name} for {len(leases)} leases")

    def cut(values: Sequence[Any] | None, start: int) -> Any:
        return None if values is None else values[start : start + LEASE_CHUNK]

    return [
        complete_call(
            queue, leases[start : start + LEASE_CHUNK], cut(results, start), None, cut(costs, start)
        )
        for start in range(0, len(leases), LEASE_CHUNK)
    ]


def complete(
    queue: QueueSettings,
    lease: Lease,
    result: Any = None,
    *,
    effects: Sequence[Any] | None = None,
    cost: float | None = None,
) -> Op[None]:
    """Mark the job succeeded (storing ``result`` if not None). Raises LeaseLost
    (AlreadyFinished when a replay finds it done under this same token).

    ``cost``: what the run really spent; it replaces the job's ``cost=`` in the
    cost limits' windows (docs/flow-control.md). None: the estimate stands.

    ``effects``: Redis writes such as ``("HINCRBY", "app:{q}:totals", "sent", 1)``
    applied in the same script, only while the lease holds — exactly once or
    not at all. Allowed commands and key rules: ``leaseq.store.effects``. A bad
    effect raises InvalidArgument and nothing is written (the lease holds).
    """
    lost = yield from joined(
        [
            complete_call(
                queue,
                [lease],
                None if result is None else [result],
                None if effects is None else [effects],
                None if cost is None else [cost],
            )
        ]
    )
    if lost:
        raise lost[0]


def complete_many(
    queue: QueueSettings,
    leases: Sequence[Lease],
    results: Sequence[Any] | None = None,
    costs: Sequence[float | None] | None = None,
) -> Op[list[LeaseLost]]:
    """Complete many leases in few calls; return the refusals (empty if all held).
    ``costs[i]``: what lease i's run spent (as ``complete(..., cost=)``)."""
    return (yield from joined(complete_calls(queue, leases, results, costs)))


# -- fail, release, once, progress -----------------------------------------------------


def fail_call(
    queue: QueueSettings,
    lease: Lease,
    error: object,
    retry_in: float | None,
    dead: bool,
    traceback: str | None = None,
    cost: float | None = None,
) -> Call[State]:
    retry_ms = queue.retry_delay_ms(lease, retry_in)
    return fenced(
        queue,
        "fail",
        lease,
        lambda reply: State(as_text(reply[1])),
        id=lease.id,
        error=v.text(error, "error", ERROR_LIMIT),
        retry_ms=retry_ms,
        dead_now=1 if dead else 0,
        traceback="" if traceback is None else v.text(traceback, "traceback", TRACEBACK_LIMIT),
        spent="" if cost is None else v.spent(cost),
    )


def fail(
    queue: QueueSettings,
    lease: Lease,
    error: object,
    retry_in: float | None = None,
    *,
    dead: bool = False,
    traceback: str | None = None,
    cost: float | None = None,
) -> Op[State]:
    """Record a failure. Retry after ``retry_in`` s (default: the queue's backoff)
    while attempts remain, else dead-letter; ``dead=True`` dead-letters at once.
    ``error`` is the ``last_error`` text (``Type: message``), ``traceback`` the
    row's ``traceback`` field (None clears it); the row keeps a bounded log of
    its failed attempts (``Job.failures``). ``cost``: what the run spent (as for
    ``complete``). Returns the job's new state. Raises LeaseLost."""
    state: State = yield fail_call(queue, lease, error, retry_in, dead, traceback, cost)
    return state


def release_call(queue: QueueSettings, lease: Lease, cost: float | None = None) -> Call[None]:
    spent = "" if cost is None else v.spent(cost)
    return fenced(queue, "release", lease, lambda reply: None, id=lease.id, spent=spent)


def release(queue: QueueSettings, lease: Lease, *, cost: float | None = None) -> Op[None]:
    """Put the job back to pending now without spending the attempt (shutdown).
    ``cost``: what the lease spent, settled in the cost windows (a worker passes 0
    for a lease whose handler never began); None: its estimate stands."""
    yield release_call(queue, lease, cost)


def once_call(queue: QueueSettings, lease: Lease, name: str) -> Call[bool]:
    marker = check_job_id(name, "marker name")
    return fenced(queue, "once", lease, lambda reply: int(reply[1]) == 1, name=marker)


def once(queue: QueueSettings, lease: Lease, name: str) -> Op[bool]:
    """True the first time this job reaches the marker ``name`` (any attempt),
    False after. Set before the effect: a crash right after it skips the
    effect on redelivery. Raises LeaseLost."""
    first: bool = yield once_call(queue, lease, name)
    return first


def progress_call(queue: QueueSettings, lease: Lease, value: Any) -> Call[None]:
    """Store ``value`` (JSON, at most PROGRESS_BYTES encoded) as the row's progress."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"progress must be JSON data (finite numbers): {exc}") from None
    size = len(text.encode())
    if size > PROGRESS_BYTES:
        raise PayloadTooLarge(size, PROGRESS_BYTES)

    return fenced(queue, "progress", lease, lambda reply: None, value=text)


def progress(queue: QueueSettings, lease: Lease, value: Any) -> Op[None]:
    """Store a small JSON ``value`` (<= 4096 bytes) as the job's ``progress``,
    fenced like every lease write. Raises LeaseLost, InvalidPayload."""
    yield progress_call(queue, lease, value)
