"""Claiming: the claim call (``lua/claim.lua``), its reply read by name, and the
operations that lease jobs — one claim, a batch, a blocking claim, the
worker's never-waiting claim — with the wake list that ends a blocked wait.

The lease length travels ``ttl`` (seconds) -> ``QueueSettings.lease_ms`` (checked
against ``lease_cap``) -> ``claim_call``'s ``lease_ms`` ARGV -> ``claim.lua``.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from leaseq.errors import LeaseLost, ScriptError
from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.leases import fail_call
from leaseq.store.replies import as_text, loose_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Op, Wake
from leaseq.types import Lease, State

__all__ = [
    "CLAIM_LIMIT",
    "MAX_BLOCK_SLICE",
    "SWEEP_LIMIT",
    "WAKE_SLICE",
    "Claimed",
    "block_until",
    "block_wait",
    "claim",
    "claim_call",
    "claim_many",
    "claim_now",
    "nudge",
    "settle_calls",
    "wait_for_wake",
]

CLAIM_LIMIT = 1000
"""Most leases one claim call hands out (the script caps it too): a call's
work stays bounded, and its reply (ten values per lease) stays far below
what Redis's Lua 5.1 can unpack."""
SWEEP_LIMIT = 100
"""Most due jobs promoted and expired leases reaped inside one claim."""
MAX_BLOCK_SLICE = 5.0
"""Longest single wait on the wake list: a lost wake-up delays, never loses."""
WAKE_SLICE = 0.1
"""Longest wait on one shard's wake list while a sharded blocking claim sits idle.

Wake lists of different shards are in different slots, so one BLPOP cannot
watch them all on a cluster: an idle claimer watches one shard at a time
and looks at all of them at least every ``WAKE_SLICE * shards`` seconds."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """A claim's reply: the leases, the ones whose payload would not decode,
    and how long until something else can be claimed (None = nothing known)."""

    leases: list[Lease]
    undecodable: list[tuple[Lease, str]]
    wait: float | None
    cut: bool = False
    """The call stopped at its time budget (lua/lib/over_budget.lua): more may be ready."""


# -- the call ------------------------------------------------------------------------


def claim_call(
    queue: QueueSettings, count: int, ttl: float, worker: str | None, started: int | None = None
) -> Call[Claimed]:
    """The one claim script call: up to ``count`` leases of ``ttl`` seconds.
    ``started``: how many of the leases go to a handler at once (None: all);
    the rest are marked prefetched, so a crash refunds their attempt."""
    count = min(v.integer(count, "count", 1, 100_000), CLAIM_LIMIT)
    lease_ms = queue.lease_ms(ttl)
    who = queue.worker_id if worker is None else check_job_id(worker, "worker id")
    first = count if started is None else min(v.integer(started, "started", 0, 10**9), count)
    # The call's own name, stored in every row it leases: a claim that a failover
    # loses leaves a fence the new primary never wrote (lua/lib/lease_check.lua).
    fence = secrets.token_hex(8)
    return SCRIPTS["claim"].call(
        queue.keys,
        lambda reply: parse_claim(queue, reply, who, fence),
        count=count,
        lease_ms=lease_ms,
        worker=who,
        sweep=SWEEP_LIMIT,
        started=first,
        fence=fence,
    )


def parse_claim(queue: QueueSettings, reply: list[Any], worker: str, fence: str) -> Claimed:
    """The leases of a claim reply, read by field name: the reply names the
    fields of a lease once (claim.lua's LEASE), then gives their values."""
    wait_ms, count, cut = int(reply[1]), int(reply[2]), reply[3] == 1
    leases: list[Lease] = []
    bad: list[tuple[Lease, str]] = []
    if count:
        width = int(reply[4])
        at = {as_text(name): i for i, name in enumerate(reply[5 : 5 + width])}
        try:
            o_id, o_attempts, o_incarnation = at["id"], at["attempts"], at["incarnation"]
            o_max, o_until, o_enqueued = (
                at["max_attempts"],
                at["lease_until"],
                at["enqueued_at"],
            )
            o_payload, o_kind, o_timeout = at["payload"], at["kind"], at["timeout_ms"]
            o_trace, o_parents = at["traceparent"], at["depends_on"]
        except KeyError as missing:
            raise ScriptError(f"claim: the reply names no lease field {missing}") from None
        decode = queue.codec.decode_payload
        name = queue.name
        start = 5 + width
        for i in range(start, start + width * count, width):
            raw = reply[i + o_payload]
            try:
                payload = decode(raw)
                error = ""
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                payload, error = raw, f"payload does not decode: {exc}"
            kind, trace, parents = reply[i + o_kind], reply[i + o_trace], reply[i + o_parents]
            lease = Lease(
                id=as_text(reply[i + o_id]),
                queue=name,
                attempt=int(reply[i + o_attempts]),
                incarnation=int(reply[i + o_incarnation]),
                fence=fence,
                max_attempts=int(reply[i + o_max]),
                payload=payload,
                deadline=int(reply[i + o_until]) / 1000.0,
                enqueued_at=int(reply[i + o_enqueued]) / 1000.0,
                worker=worker,
                # Most are empty (b""): read only those that are not.
                kind=(loose_text(kind) or None) if kind else None,
                timeout=(int(reply[i + o_timeout]) / 1000.0) or None,
                traceparent=(loose_text(trace) or None) if trace else None,
                depends_on=tuple(loose_text(parents).split()) if parents else (),
            )
            if error:
                bad.append((lease, error))
            else:
                leases.append(lease)
    return Claimed(leases, bad, None if wait_ms < 0 else wait_ms / 1000.0, cut)


def settle_calls(queue: QueueSettings, claimed: Claimed) -> list[Call[State]]:
    """Calls that dead-letter the leases whose payload would not decode.

    Such a payload can never run: dead-letter it now rather than
    crash-loop a worker on it. The caller runs each call and ignores
    LeaseLost (someone else already moved the job).
    """
    return [fail_call(queue, lease, error, None, dead=True) for lease, error in claimed.undecodable]


def block_until(block: float | None, now: float) -> float | None:
    """When a blocking claim gives up, on the monotonic clock ``now`` comes from.

    ``block`` is seconds (None: do not wait). Raises InvalidArgument.
    """
    if block is None:
        return None
    return now + v.seconds_to_ms(block, "block", minimum_ms=0, maximum=v.MAX_DELAY) / 1000


def block_wait(give_up: float | None, claimed: Claimed, now: float) -> float:
    """Seconds to wait on the wake list before claiming again; <= 0 means return now.

    The claim script says how long until something changes by itself (a
    scheduled job falls due, a lease runs out); enqueues wake waiters sooner.
    Both the sync and the async Queue loop on this.
    """
    if claimed.leases or give_up is None:
        return 0.0
    left = give_up - now
    if left <= 0:
        return 0.0
    hint = claimed.wait if claimed.wait is not None else MAX_BLOCK_SLICE
    return max(min(left, MAX_BLOCK_SLICE, hint), 0.01)


# -- the operations ------------------------------------------------------------------


def claim(
    queue: QueueSettings, ttl: float = 30.0, worker: str | None = None, block: float | None = None
) -> Op[Lease | None]:
    """Lease one job for ``ttl`` seconds, or return None.

    ``block``: seconds to wait for a job (None = do not wait). Before
    leasing, the script promotes due scheduled jobs and reaps a bounded
    number of expired leases.
    """
    leases = yield from claim_many(queue, 1, ttl=ttl, worker=worker, block=block)
    return leases[0] if leases else None


def claim_many(
    queue: QueueSettings,
    count: int,
    ttl: float = 30.0,
    worker: str | None = None,
    block: float | None = None,
) -> Op[list[Lease]]:
    """Lease up to ``count`` jobs (or wait up to ``block`` s for one): one script
    call, and another for the rest each time a call stops at its time budget
    (a short guest on a shared server: docs/limits-and-costs.md)."""
    call = claim_call(queue, count, ttl, worker)
    count = min(count, CLAIM_LIMIT)
    give_up = block_until(block, time.monotonic())
    while True:
        claimed = yield call
        leases = yield from _settle(queue, claimed)
        while claimed.cut and len(leases) < count:
            claimed = yield claim_call(queue, count - len(leases), ttl, worker)
            leases += yield from _settle(queue, claimed)
        wait = block_wait(give_up, claimed, time.monotonic())
        if wait <= 0 or leases:
            return leases
        yield Wake(queue.keys.wake, wait)


def claim_now(
    queue: QueueSettings,
    count: int,
    ttl: float = 30.0,
    worker: str | None = None,
    started: int | None = None,
) -> Op[tuple[list[Lease], float | None]]:
    """A claim that never waits, for loops that block their own way (Worker): one
    script call, and another for the rest each time a call stops at its time
    budget (so a worker's plan is not cut short by a slow server).

    Returns the leases (0..count) and the seconds until something may become
    claimable by itself — the next scheduled job falls due or the earliest
    lease ends (None: nothing is scheduled or leased). ``started``: how many
    leases go to a handler at once (None: all); the rest are prefetched, and
    a crash before their start refunds their attempt.
    """
    claimed = yield claim_call(queue, count, ttl, worker, started)
    leases = yield from _settle(queue, claimed)
    count = min(count, CLAIM_LIMIT)
    while claimed.cut and len(leases) < count:
        first = None if started is None else max(0, started - len(leases))
        claimed = yield claim_call(queue, count - len(leases), ttl, worker, first)
        leases += yield from _settle(queue, claimed)
    return leases, claimed.wait


def _settle(queue: QueueSettings, claimed: Claimed) -> Op[list[Lease]]:
    # A payload that will not decode into the queue's type can never run:
    # dead-letter it now rather than crash-loop a worker on it.
    for call in settle_calls(queue, claimed):
        with contextlib.suppress(LeaseLost):  # someone else already moved the job
            yield call
    return claimed.leases


def nudge(queue: QueueSettings) -> Op[None]:
    """Push one wake-up token, ending one blocked claimer's wait now."""
    yield Command("rpush", (queue.keys.wake, "1"))


def wait_for_wake(queue: QueueSettings, timeout: float) -> Op[bool]:
    """Block up to ``timeout`` seconds on the wake list; True if a token was taken.

    Enqueues push tokens; a claim that empties pending deletes the list.
    Raises ServerUnavailable.
    """
    got = yield Wake(queue.keys.wake, timeout)
    return bool(got)
