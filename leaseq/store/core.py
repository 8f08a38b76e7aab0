"""What every script call sends and how its reply reads back, without I/O.

``QueueCore`` holds a queue's validated settings and turns each operation
into a ``Call``: the script, its KEYS and ARGV, and a function that parses
the reply (refusals become exceptions in ``_replies``). ``leaseq.Queue`` runs calls on
``redis.Redis`` and ``leaseq.aio.Queue`` awaits them on ``redis.asyncio``;
the logic exists once, here.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from leaseq.errors import (
    DamagedKey,
    DamagedRow,
    InvalidArgument,
    InvalidPayload,
    LeaseLost,
    NotReplicated,
    PayloadTooLarge,
)
from leaseq.observe.tracing import check_traceparent
from leaseq.store import validate as v
from leaseq.store.effects import encode_effects
from leaseq.store.groups import check_group
from leaseq.store.keys import QueueKeys, check_job_id, new_job_ids
from leaseq.store.payloads import Codec
from leaseq.store.replies import (
    admin_error,
    as_ints,
    as_text,
    loose_text,
    parse_job,
    parse_page,
    refusal,
)
from leaseq.store.scripts import SCRIPTS, Script
from leaseq.types import DEFAULT_BACKOFF, Backoff, Job, Lease, State, Stats

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

ENQUEUE_CHUNK = 1000
"""Jobs per enqueue script call: big enough to amortise the round trip,
small enough that one call never blocks the server for long."""
LEASE_CHUNK = 500
"""Leases per complete or extend call (complete_many, extend_many)."""
CLAIM_LIMIT = 1000
"""Most leases one claim call hands out (the script caps it too): a call's
work stays bounded, and its reply (CLAIM_WIDTH values per lease) stays far
below what Redis's Lua 5.1 can unpack."""
CLAIM_WIDTH = 10
"""Values per lease in claim.lua's reply (its ``WIDTH``): id, attempts,
incarnation, max_attempts, lease_until, enqueued_at, payload, kind, timeout,
traceparent."""
SWEEP_LIMIT = 100
"""Most due jobs promoted and expired leases reaped inside one claim."""
REAP_LIMIT = 1000
PURGE_LIMIT = 1000
"""Index entries one purge or retry-all page looks at."""
DEFAULT_KEEP_SUCCEEDED_COUNT = 10_000
"""Most succeeded rows a queue keeps by default (about 5.4 MB at ~540 B a row)."""
CLOCK_HOLD = 10.0
"""Longest the clock floor holds a queue's time back behind the server's TIME,
in seconds (lua/lib/now_ms.lua; docs/design.md, The server clock)."""
ERROR_LIMIT = 8192
"""Longest last_error kept, in characters."""
DEFAULT_MAX_PAYLOAD = 1_048_576
PROGRESS_BYTES = 4096
"""Longest progress value kept, as JSON text: a small report, not a result channel."""


@dataclass(frozen=True, slots=True)
class Call(Generic[R_co]):
    """One script call: what to send, and how to read what comes back."""

    script: Script
    keys: Sequence[str]
    args: Sequence[str | bytes | int]
    parse: Callable[[Any], R_co]


Cursor = tuple[str, str, int]
"""Where a paged operator run is: (snapshot's top score, cursor score, entries
at the cursor score stepped over). Scores are Redis's own score strings."""
START: Cursor = ("", "-inf", 0)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a purge or retry-all: how many rows it acted on, whether to
    go on and from where, and the jobs it stepped over as damaged."""

    done: int
    more: bool
    cursor: Cursor
    damaged: list[DamagedRow]

    @staticmethod
    def parse(r: list[Any]) -> Page:
        damaged = [
            DamagedRow(as_text(r[i]), as_text(r[i + 1]), as_text(r[i + 2]), "stepped over")
            for i in range(5, len(r) - 2, 3)
        ]
        upto = as_text(r[2])
        cursor = (upto, as_text(r[3]), int(r[4]))
        return Page(int(r[0]), bool(upto) and int(r[1]) == 1, cursor, damaged)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A claim's reply: the leases, the ones whose payload would not decode,
    and how long until something else can be claimed (None = nothing known)."""

    leases: list[Lease]
    undecodable: list[tuple[Lease, str]]
    wait: float | None


def default_worker_id() -> str:
    """host:pid:random — unique per process, readable in ``worker``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class QueueCore:
    """A queue's settings, keys and codec; builds every Call. No I/O."""

    def __init__(
        self,
        name: str,
        *,
        prefix: str = "leaseq",
        max_attempts: int = 5,
        backoff: float | Backoff = DEFAULT_BACKOFF,
        keep_succeeded: float | None = 3600.0,
        keep_succeeded_count: int | None = DEFAULT_KEEP_SUCCEEDED_COUNT,
        serializer: str = "json",
        payload_type: Any = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
        lease_cap: float = 86_400.0,
        worker_id: str | None = None,
        shard: int | None = None,
        durable: int = 0,
        durable_timeout: float = 1.0,
    ) -> None:
        self.keys = QueueKeys(prefix, name, shard)
        self.name = name
        self.max_attempts = v.integer(max_attempts, "max_attempts", 1, v.MAX_ATTEMPTS)
        if isinstance(backoff, Backoff):
            self.backoff: Backoff | None = backoff
            self.constant_backoff_ms = 0
        else:
            self.backoff = None
            self.constant_backoff_ms = v.delay_ms(backoff, "backoff")
        self.keep_ms = (
            -1
            if keep_succeeded is None
            else v.seconds_to_ms(
                keep_succeeded, "keep_succeeded", minimum_ms=0, maximum=10 * 366 * 86_400.0
            )
        )
        self.keep_count = (
            -1
            if keep_succeeded_count is None
            else v.integer(keep_succeeded_count, "keep_succeeded_count", 0, 10**12)
        )
        """Most succeeded rows kept (-1: no bound); 0 deletes at completion."""
        if self.keep_count == 0:
            self.keep_ms = 0
        limit = v.integer(max_payload_bytes, "max_payload_bytes", 1, 512 * 1024 * 1024)
        self.codec = Codec(serializer, payload_type, limit)
        self.lease_cap_ms = v.seconds_to_ms(
            lease_cap, "lease_cap", minimum_ms=1, maximum=30 * 86_400.0
        )
        self.worker_id = check_job_id(worker_id or default_worker_id(), "worker id")
        self.durable = v.integer(durable, "durable", 0, 64)
        """Replicas that must acknowledge each state change (WAIT); 0 = off."""
        self.durable_timeout_ms = v.seconds_to_ms(
            durable_timeout, "durable_timeout", minimum_ms=1, maximum=60.0
        )
        k = self.keys
        self._enqueue_keys = (k.pending, k.scheduled, k.meta, k.wake, k.events)
        self._claim_keys = (
            *(k.pending, k.scheduled, k.active, k.dead, k.meta, k.wake),
            *(k.limits, k.claims, k.done, k.events),
        )
        self._complete_keys = (k.active, k.succeeded, k.meta, k.wake, k.done, k.events)
        self._reap_keys = (k.active, k.pending, k.dead, k.meta, k.wake, k.done, k.events)
        self._stats_keys = (
            k.pending,
            k.scheduled,
            k.active,
            k.succeeded,
            k.dead,
            k.cancelled,
            k.meta,
            k.limits,
            k.claims,
        )

    # -- enqueue ---------------------------------------------------------

    def enqueue_calls(
        self,
        payloads: Sequence[Any],
        ids: Sequence[str | None] | None,
        max_attempts: int | None,
        delay: float | None,
        priority: int,
        group: str | None = None,
        kind: str | None = None,
        timeout: float | None = None,
        traceparent: str = "",
    ) -> tuple[list[str], list[Call[list[int]]]]:
        """The ids and the script calls (chunks of ENQUEUE_CHUNK) that enqueue ``payloads``.

        Everything is validated and encoded here, before any call is made:
        one bad item raises and nothing is written. A missing id is made
        by the client (``new_job_ids``) so a replayed call is deduplicated.
        ``traceparent``: the W3C trace context stored in every row ('' = none;
        ``leaseq.observe.tracing``).
        """
        if ids is not None and len(ids) != len(payloads):
            raise InvalidArgument(f"{len(ids)} ids for {len(payloads)} payloads")
        attempts = (
            self.max_attempts
            if max_attempts is None
            else v.integer(max_attempts, "max_attempts", 1, v.MAX_ATTEMPTS)
        )
        head = (
            self.keys.job_prefix,
            attempts,
            v.delay_ms(delay),
            v.integer(priority, "priority", 0, v.MAX_PRIORITY),
            "" if group is None else check_group(group),
            "" if kind is None else check_job_id(kind, "kind"),
            v.timeout_ms(timeout),
            traceparent and check_traceparent(traceparent),
        )
        fresh = iter(new_job_ids(sum(1 for i in ids if i is None) if ids else len(payloads)))
        job_ids = [
            next(fresh) if ids is None or ids[i] is None else check_job_id(ids[i])
            for i in range(len(payloads))
        ]
        encode = self.codec.encode
        calls: list[Call[list[int]]] = []
        for start in range(0, len(payloads), ENQUEUE_CHUNK):
            args: list[str | bytes | int] = list(head)
            for i in range(start, min(start + ENQUEUE_CHUNK, len(payloads))):
                args += (job_ids[i], encode(payloads[i]))
            calls.append(Call(SCRIPTS["enqueue"], self._enqueue_keys, args, as_ints))
        return job_ids, calls

    # -- claim -----------------------------------------------------------

    def claim(
        self, count: int, ttl: float, worker: str | None, started: int | None = None
    ) -> Call[Claimed]:
        """``started``: how many of the leases go to a handler at once (None: all);
        the rest are marked prefetched, so a crash refunds their attempt."""
        count = min(v.integer(count, "count", 1, 100_000), CLAIM_LIMIT)
        lease_ms = self.lease_ms(ttl)
        who = self.worker_id if worker is None else check_job_id(worker, "worker id")
        first = count if started is None else min(v.integer(started, "started", 0, 10**9), count)
        args = (self.keys.job_prefix, count, lease_ms, who, SWEEP_LIMIT, first)
        return Call(
            SCRIPTS["claim"], self._claim_keys, args, lambda reply: self._parse_claim(reply, who)
        )

    def _parse_claim(self, reply: list[Any], worker: str) -> Claimed:
        wait_ms = int(reply[1])
        leases: list[Lease] = []
        bad: list[tuple[Lease, str]] = []
        decode = self.codec.decode_payload
        queue = self.name
        width = CLAIM_WIDTH
        for i in range(3, 3 + width * int(reply[2]), width):
            raw = reply[i + 6]
            try:
                payload = decode(raw)
                error = ""
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                payload, error = raw, f"payload does not decode: {exc}"
            lease = Lease(
                id=as_text(reply[i]),
                queue=queue,
                attempt=int(reply[i + 1]),
                incarnation=int(reply[i + 2]),
                max_attempts=int(reply[i + 3]),
                payload=payload,
                deadline=int(reply[i + 4]) / 1000.0,
                enqueued_at=int(reply[i + 5]) / 1000.0,
                worker=worker,
                kind=loose_text(reply[i + 7]) or None,
                timeout=(int(reply[i + 8]) / 1000.0) or None,
                traceparent=loose_text(reply[i + 9]) or None,
            )
            if error:
                bad.append((lease, error))
            else:
                leases.append(lease)
        return Claimed(leases, bad, None if wait_ms < 0 else wait_ms / 1000.0)

    def replicas_for(self, call: Call[Any]) -> int:
        """How many replicas must acknowledge ``call`` before it counts (0: none).

        Only with ``durable=``; the one read-only script, stats, never waits.
        """
        return 0 if call.script.name == "stats" else self.durable

    def check_replicated(self, call: Call[Any], acked: int, result: R) -> R:
        """``result`` if enough replicas acknowledged ``call``; else NotReplicated."""
        if acked < self.durable:
            raise NotReplicated(call.script.name, self.durable, acked, result)
        return result

    def settle(self, claimed: Claimed) -> list[Call[State]]:
        """Calls that dead-letter the leases whose payload would not decode.

        Such a payload can never run: dead-letter it now rather than
        crash-loop a worker on it. The caller runs each call and ignores
        LeaseLost (someone else already moved the job).
        """
        return [self.fail(lease, error, None, dead=True) for lease, error in claimed.undecodable]

    # -- lease operations -------------------------------------------------

    def lease_ms(self, ttl: float) -> int:
        """A lease length in ms: finite, > 0, at most MAX_TTL and the queue's lease_cap."""
        ms = v.ttl_ms(ttl)
        if ms > self.lease_cap_ms:
            raise InvalidArgument(
                f"ttl {ttl!r} s is over this queue's lease_cap of {self.lease_cap_ms / 1000:g} s"
            )
        return ms

    def extend(
        self, leases: Sequence[Lease], ttl: float, started: Sequence[bool] | None = None
    ) -> Call[list[Lease | LeaseLost]]:
        """Heartbeat ``leases`` (one call): per lease, the lease with its new
        deadline, or the LeaseLost (LeaseCapReached past the cap) it met.
        ``started[i]``: lease i was prefetched and its handler has now started."""
        lease_ms = self.lease_ms(ttl)
        k = self.keys
        keys = [k.active, k.meta]
        if started is not None and len(started) != len(leases):
            raise InvalidArgument(f"{len(started)} started flags for {len(leases)} leases")
        flags = "" if started is None else "".join("1" if s else "0" for s in started)
        args: list[str | bytes | int] = [lease_ms, self.lease_cap_ms, flags]
        for lease in leases:
            keys.append(k.job(lease.id))
            args += (lease.id, lease.attempt, lease.incarnation)

        def parse(reply: list[Any]) -> list[Lease | LeaseLost]:
            return [
                msgspec.structs.replace(lease, deadline=int(item[1]) / 1000.0)
                if as_text(item[0]) == "OK"
                else refusal("extend", lease.id, lease.attempt, item, lease.incarnation)
                for lease, item in zip(leases, reply, strict=True)
            ]

        return Call(SCRIPTS["extend"], keys, args, parse)

    def extend_calls(
        self, leases: Sequence[Lease], ttl: float, started: Sequence[bool] | None = None
    ) -> list[Call[list[Lease | LeaseLost]]]:
        """``extend`` for any number of leases, LEASE_CHUNK per call."""
        return [
            self.extend(
                leases[start : start + LEASE_CHUNK],
                ttl,
                None if started is None else started[start : start + LEASE_CHUNK],
            )
            for start in range(0, len(leases), LEASE_CHUNK)
        ]

    def complete_calls(
        self, leases: Sequence[Lease], results: Sequence[Any] | None
    ) -> list[Call[list[LeaseLost]]]:
        """``complete`` for any number of leases, LEASE_CHUNK per call. Every result
        is encoded here, so one that will not encode raises before any call runs."""
        if results is not None and len(results) != len(leases):
            raise InvalidArgument(f"{len(results)} results for {len(leases)} leases")
        return [
            self.complete(
                leases[start : start + LEASE_CHUNK],
                None if results is None else results[start : start + LEASE_CHUNK],
            )
            for start in range(0, len(leases), LEASE_CHUNK)
        ]

    def complete(
        self,
        leases: Sequence[Lease],
        results: Sequence[Any] | None,
        effects: Sequence[Sequence[Any] | None] | None = None,
    ) -> Call[list[LeaseLost]]:
        """``effects[i]``: the Redis writes (see ``leaseq.store.effects``) applied with
        item i's completion, in the same script; the reply raises InvalidArgument
        when one cannot apply (that item is then left active, its lease held)."""
        k = self.keys
        keys = list(self._complete_keys)
        args: list[str | bytes | int] = [self.keep_ms, self.keep_count, k.job_prefix, len(leases)]
        effect_keys: list[str] = []
        effect_args: list[str | bytes | int] = []
        encode = self.codec.encode
        for i, lease in enumerate(leases):
            result = None if results is None else results[i]
            e_keys, e_args = encode_effects(None if effects is None else effects[i], k)
            effect_keys += e_keys
            effect_args += e_args
            keys.append(k.job(lease.id))
            args += (
                lease.id,
                lease.attempt,
                lease.incarnation,
                b"" if result is None else encode(result, "result"),
                len(e_keys),
            )
        keys += effect_keys
        args += effect_args

        def parse(reply: list[Any]) -> list[LeaseLost]:
            for lease, item in zip(leases, reply, strict=True):
                if as_text(item[0]) == "EFFECT":
                    raise InvalidArgument(
                        f"effect {int(item[1])} of job {lease.id!r} cannot apply: "
                        f"{as_text(item[2])}; nothing was written and the lease still holds"
                    )
            return [
                refusal("complete", lease.id, lease.attempt, item, lease.incarnation)
                for lease, item in zip(leases, reply, strict=True)
                if as_text(item[0]) != "OK"
            ]

        return Call(SCRIPTS["complete"], keys, args, parse)

    def retry_delay_ms(self, lease: Lease, retry_in: float | None) -> int:
        if retry_in is not None:
            return v.delay_ms(retry_in, "retry_in")
        if self.backoff is None:
            return self.constant_backoff_ms
        return round(self.backoff.delay(lease.attempt) * 1000)

    def fail(self, lease: Lease, error: object, retry_in: float | None, dead: bool) -> Call[State]:
        k = self.keys
        retry_ms = self.retry_delay_ms(lease, retry_in)

        def parse(reply: list[Any]) -> State:
            if as_text(reply[0]) != "OK":
                raise refusal("fail", lease.id, lease.attempt, reply, lease.incarnation)
            return State(as_text(reply[1]))

        args = (
            lease.id,
            lease.attempt,
            lease.incarnation,
            v.text(error, "error", ERROR_LIMIT),
            retry_ms,
            1 if dead else 0,
        )
        return Call(
            SCRIPTS["fail"],
            (
                *(k.job(lease.id), k.active, k.pending, k.scheduled, k.dead, k.meta, k.wake),
                *(k.done, k.events),
            ),
            args,
            parse,
        )

    def release(self, lease: Lease) -> Call[None]:
        k = self.keys

        def parse(reply: list[Any]) -> None:
            if as_text(reply[0]) == "DAMAGED":
                raise DamagedRow(lease.id, as_text(reply[1]), as_text(reply[2]))
            if as_text(reply[0]) != "OK":
                raise refusal("release", lease.id, lease.attempt, reply, lease.incarnation)

        return Call(
            SCRIPTS["release"],
            (k.job(lease.id), k.active, k.pending, k.meta, k.wake, k.events),
            (lease.id, lease.attempt, lease.incarnation),
            parse,
        )

    def once(self, lease: Lease, name: str) -> Call[bool]:
        marker = check_job_id(name, "marker name")

        def parse(reply: list[Any]) -> bool:
            if as_text(reply[0]) != "OK":
                raise refusal("once", lease.id, lease.attempt, reply, lease.incarnation)
            return int(reply[1]) == 1

        return Call(
            SCRIPTS["once"],
            (self.keys.job(lease.id),),
            (lease.attempt, lease.incarnation, marker),
            parse,
        )

    def progress(self, lease: Lease, value: Any) -> Call[None]:
        """Store ``value`` (JSON, at most PROGRESS_BYTES encoded) as the row's progress."""
        try:
            text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidPayload(f"progress must be JSON data (finite numbers): {exc}") from None
        size = len(text.encode())
        if size > PROGRESS_BYTES:
            raise PayloadTooLarge(size, PROGRESS_BYTES)

        def parse(reply: list[Any]) -> None:
            if as_text(reply[0]) != "OK":
                raise refusal("progress", lease.id, lease.attempt, reply, lease.incarnation)

        return Call(
            SCRIPTS["progress"],
            (self.keys.job(lease.id),),
            (lease.attempt, lease.incarnation, text),
            parse,
        )

    # -- maintenance and operators -----------------------------------------

    def reap(self, limit: int = REAP_LIMIT) -> Call[tuple[int, int, bool]]:
        return Call(
            SCRIPTS["reap"],
            self._reap_keys,
            (self.keys.job_prefix, limit),
            lambda r: (int(r[0]), int(r[1]), int(r[2]) == 1),
        )

    def cancel(self, job_id: str) -> Call[bool]:
        job_id = check_job_id(job_id)
        k = self.keys

        def parse(reply: list[Any]) -> bool:
            if as_text(reply[0]) != "OK":
                raise admin_error("cancel", job_id, reply)
            return int(reply[1]) == 1

        return Call(
            SCRIPTS["cancel"],
            (k.job(job_id), k.pending, k.scheduled, k.cancelled, k.meta, k.done, k.events),
            (job_id, self.keep_ms),
            parse,
        )

    def retry(self, job_id: str, attempts: int | None) -> Call[int]:
        job_id = check_job_id(job_id)
        extra = (
            self.max_attempts
            if attempts is None
            else v.integer(attempts, "attempts", 1, v.MAX_ATTEMPTS)
        )
        k = self.keys

        def parse(reply: list[Any]) -> int:
            if as_text(reply[0]) != "OK":
                raise admin_error("retry", job_id, reply)
            return int(reply[1])

        return Call(
            SCRIPTS["retry"],
            (k.job(job_id), k.dead, k.pending, k.meta, k.wake, k.events),
            (job_id, extra),
            parse,
        )

    def purge(
        self, state: State | str, cursor: Cursor = START, limit: int = PURGE_LIMIT
    ) -> Call[Page]:
        """One page of a purge of ``state`` (not active), from ``cursor`` on.

        The first page (``START``) fixes the snapshot: the index's highest
        score at that moment; later pages pass the returned ``Page.cursor``.
        Loop with ``_admin.purge_op``.
        """
        st = parse_state(state)
        if st is State.ACTIVE:
            raise InvalidArgument(
                "active jobs cannot be purged: their leases are held "
                "(let them finish, or reap them once expired)"
            )
        return Call(
            SCRIPTS["purge"],
            (self.keys.index(st.value), self.keys.meta, self.keys.events, self.keys.done),
            (self.keys.job_prefix, st.value, limit, *cursor),
            Page.parse,
        )

    def retry_page(
        self, attempts: int | None, op: str, cursor: Cursor = START, limit: int = PURGE_LIMIT
    ) -> Call[Page]:
        """One page of a retry of every dead job (see ``_admin.retry_all_dead_op``).

        ``op`` is the run's id: a job it already retried that died again is
        not retried a second time by the same run.
        """
        extra = (
            self.max_attempts
            if attempts is None
            else v.integer(attempts, "attempts", 1, v.MAX_ATTEMPTS)
        )
        k = self.keys
        return Call(
            SCRIPTS["retry_all"],
            (k.dead, k.pending, k.meta, k.wake, k.events),
            (k.job_prefix, extra, limit, check_job_id(op, "operation id"), *cursor),
            Page.parse,
        )

    def reset_clock(self) -> Call[tuple[float | None, float]]:
        """Drop the queue's clock floor (after a server clock ran ahead and was
        set back): returns (the floor dropped, or None; the server time), epoch s."""

        def parse(r: list[Any]) -> tuple[float | None, float]:
            floor = int(r[0])
            return (None if floor < 0 else floor / 1000.0), int(r[1]) / 1000.0

        return Call(SCRIPTS["reset_clock"], (self.keys.meta,), (), parse)

    def stats(self, soon: float) -> Call[Stats]:
        soon_ms = v.seconds_to_ms(soon, "soon", minimum_ms=0, maximum=v.MAX_TTL)

        def parse(r: list[Any]) -> Stats:
            now = int(r[0])
            oldest, due = int(r[9]), int(r[10])
            totals = {
                as_text(r[i]): _counter(self.keys.meta, r[i], r[i + 1])
                for i in range(18, len(r) - 1, 2)
            }
            limit = [None if int(x) < 0 else int(x) for x in r[11:15]]
            for hidden in ("seq", "clock", "limit_held", "incarnation", "shards", "gseq", "gturn"):
                totals.pop(hidden, None)
            paused_ms = totals.pop("paused", None)  # the flag of pause.lua, not a counter
            return Stats(
                queue=self.name,
                pending=int(r[1]),
                scheduled=int(r[2]),
                active=int(r[3]),
                succeeded=int(r[4]),
                dead=int(r[5]),
                cancelled=int(r[6]),
                expired=int(r[7]),
                expiring_soon=int(r[8]),
                oldest_pending_age=None if oldest < 0 else max(0, now - oldest) / 1000,
                next_due_in=None if due < 0 else max(0, due - now) / 1000,
                server_time=now / 1000,
                totals=totals,
                paused=paused_ms is not None,
                paused_at=None if paused_ms is None else paused_ms / 1000,
                concurrency_limit=limit[0],
                rate_limit=limit[1],
                rate_per=None if limit[2] is None else limit[2] / 1000,
                recent_claims=limit[3],
                group_concurrency_limit=None if int(r[15]) < 0 else int(r[15]),
                groups_ready=int(r[16]),
                groups_held=int(r[17]),
            )

        return Call(SCRIPTS["stats"], self._stats_keys, (self.keys.job_prefix, soon_ms), parse)

    # -- reading rows -------------------------------------------------------

    def parse_page(
        self, names: Sequence[str], rows: Sequence[Any], damaged: list[DamagedRow] | None
    ) -> list[Job]:
        """The Jobs of one ``ls`` page (see ``_replies.parse_page``)."""
        return parse_page(self.codec, self.name, names, rows, damaged)

    def parse_job(self, job_id: str, raw: dict[Any, Any]) -> Job | None:
        """A job row from HGETALL as a Job; raises DamagedRow naming the field."""
        return parse_job(self.codec, self.name, job_id, raw)


def parse_state(state: State | str) -> State:
    """A State from a member or its name; InvalidArgument otherwise."""
    try:
        return State(state)
    except ValueError:
        names = ", ".join(s.value for s in State)
        raise InvalidArgument(f"unknown state {state!r}: use one of {names}") from None


MAX_BLOCK_SLICE = 5.0
"""Longest single wait on the wake list: a lost wake-up delays, never loses."""


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


def _counter(meta: str, field: Any, value: Any) -> int:
    """A meta hash counter as an int; DamagedKey naming it when it was set by hand
    to something else (``stats`` would otherwise fail with a bare ValueError)."""
    try:
        return int(value)
    except ValueError:
        raise DamagedKey(
            f"{meta} field {as_text(field)!r} is {as_text(value)!r}, not an integer "
            "(set it right with redis-cli HSET, or HDEL it)"
        ) from None
