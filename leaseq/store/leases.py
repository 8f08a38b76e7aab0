"""Leases: claim, extend, complete, fail, release, once, progress and reap calls.

Each builds the one script call of its transition and the parser of its
reply; a refusal (a lost lease, a replay) becomes a ``LeaseLost`` there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from leaseq.errors import (
    DamagedRow,
    InvalidArgument,
    InvalidPayload,
    LeaseLost,
    PayloadTooLarge,
    ScriptError,
)
from leaseq.store import validate as v
from leaseq.store.effects import encode_effects
from leaseq.store.keys import check_job_id
from leaseq.store.replies import as_text, loose_text, refusal
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call
from leaseq.types import Lease, State

__all__ = [
    "CLAIM_LIMIT",
    "LEASE_CHUNK",
    "Claimed",
    "LeaseCalls",
    "block_until",
    "block_wait",
]

LEASE_CHUNK = 500
"""Leases per complete or extend call (complete_many, extend_many)."""
CLAIM_LIMIT = 1000
"""Most leases one claim call hands out (the script caps it too): a call's
work stays bounded, and its reply (ten values per lease) stays far below
what Redis's Lua 5.1 can unpack."""
SWEEP_LIMIT = 100
"""Most due jobs promoted and expired leases reaped inside one claim."""
REAP_LIMIT = 1000
ERROR_LIMIT = 8192
"""Longest last_error kept, in characters."""
TRACEBACK_LIMIT = 16384
"""Longest traceback kept, in characters."""
PROGRESS_BYTES = 4096
"""Longest progress value kept, as JSON text: a small report, not a result channel."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """A claim's reply: the leases, the ones whose payload would not decode,
    and how long until something else can be claimed (None = nothing known)."""

    leases: list[Lease]
    undecodable: list[tuple[Lease, str]]
    wait: float | None


class LeaseCalls(QueueSettings):
    """The calls of a lease's life: claim to complete, fail or reap."""

    def _own(self, leases: Sequence[Lease]) -> None:
        """Raise InvalidArgument, before any call, for a lease claimed from another
        queue. Its token and incarnation are only this queue's to fence: another
        queue may hold a row under the same id, attempt and incarnation (numbers
        are per queue), which the lease must never act on."""
        for lease in leases:
            if lease.queue != self.name:
                raise InvalidArgument(
                    f"a lease of queue {lease.queue!r} (job {lease.id!r}), not of {self.name!r}"
                )

    def claim(
        self, count: int, ttl: float, worker: str | None, started: int | None = None
    ) -> Call[Claimed]:
        """``started``: how many of the leases go to a handler at once (None: all);
        the rest are marked prefetched, so a crash refunds their attempt."""
        count = min(v.integer(count, "count", 1, 100_000), CLAIM_LIMIT)
        lease_ms = self.lease_ms(ttl)
        who = self.worker_id if worker is None else check_job_id(worker, "worker id")
        first = count if started is None else min(v.integer(started, "started", 0, 10**9), count)
        return SCRIPTS["claim"].call(
            self.keys,
            lambda reply: self._parse_claim(reply, who),
            count=count,
            lease_ms=lease_ms,
            worker=who,
            sweep=SWEEP_LIMIT,
            started=first,
        )

    def _parse_claim(self, reply: list[Any], worker: str) -> Claimed:
        """The leases of a claim reply, read by field name: the reply names the
        fields of a lease once (claim.lua's LEASE), then gives their values."""
        wait_ms, count = int(reply[1]), int(reply[2])
        leases: list[Lease] = []
        bad: list[tuple[Lease, str]] = []
        if count:
            width = int(reply[3])
            at = {as_text(name): i for i, name in enumerate(reply[4 : 4 + width])}
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
            decode = self.codec.decode_payload
            queue = self.name
            start = 4 + width
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
                    queue=queue,
                    attempt=int(reply[i + o_attempts]),
                    incarnation=int(reply[i + o_incarnation]),
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
        return Claimed(leases, bad, None if wait_ms < 0 else wait_ms / 1000.0)

    def settle(self, claimed: Claimed) -> list[Call[State]]:
        """Calls that dead-letter the leases whose payload would not decode.

        Such a payload can never run: dead-letter it now rather than
        crash-loop a worker on it. The caller runs each call and ignores
        LeaseLost (someone else already moved the job).
        """
        return [self.fail(lease, error, None, dead=True) for lease, error in claimed.undecodable]

    def extend(
        self, leases: Sequence[Lease], ttl: float, started: Sequence[bool] | None = None
    ) -> Call[list[Lease | LeaseLost]]:
        """Heartbeat ``leases`` (one call): per lease, the lease with its new
        deadline, or the LeaseLost (LeaseCapReached past the cap) it met.
        ``started[i]``: lease i was prefetched and its handler has now started."""
        self._own(leases)
        lease_ms = self.lease_ms(ttl)
        k = self.keys
        if started is not None and len(started) != len(leases):
            raise InvalidArgument(f"{len(started)} started flags for {len(leases)} leases")
        flags = "" if started is None else "".join("1" if s else "0" for s in started)
        jobs: list[str] = []
        items: list[str | bytes | int] = []
        for lease in leases:
            jobs.append(k.job(lease.id))
            items += (lease.id, lease.attempt, lease.incarnation)

        def parse(reply: list[Any]) -> list[Lease | LeaseLost]:
            return [
                msgspec.structs.replace(lease, deadline=int(item[1]) / 1000.0)
                if as_text(item[0]) == "OK"
                else refusal("extend", lease, item)
                for lease, item in zip(leases, reply, strict=True)
            ]

        return SCRIPTS["extend"].call(
            k,
            parse,
            key_tail=jobs,
            arg_tail=items,
            lease_ms=lease_ms,
            cap_ms=self.lease_cap_ms,
            started=flags,
        )

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
        self._own(leases)
        k = self.keys
        # Three values per item; the few with a result or effects add theirs after
        # all the items (complete.lua's ARGV), so a batch of plain completions
        # costs the least to pack and to read.
        args: list[str | bytes | int] = []
        extras: list[str | bytes | int] = []
        effect_keys: list[str] = []
        effect_args: list[str | bytes | int] = []
        encode = self.codec.encode
        for i, lease in enumerate(leases):
            args += (lease.id, lease.attempt, lease.incarnation)
            result = None if results is None else results[i]
            effect = None if effects is None else effects[i]
            if result is None and effect is None:
                continue
            e_keys, e_args = encode_effects(effect, k)
            effect_keys += e_keys
            effect_args += e_args
            extras += (
                i + 1,
                b"" if result is None else encode(result, "result"),
                len(e_keys),
            )
        args += extras
        args += effect_args

        def parse(reply: list[Any]) -> list[LeaseLost]:
            # Only the refused items are listed, each by its place: first EFFECT, then refusals.
            others = [(leases[int(item[0]) - 1], item[1:]) for item in reply]
            for lease, item in others:
                if as_text(item[0]) == "EFFECT":
                    raise InvalidArgument(
                        f"effect {int(item[1])} of job {lease.id!r} cannot apply: "
                        f"{as_text(item[2])}; nothing was written and the lease still holds"
                    )
            return [refusal("complete", lease, item) for lease, item in others]

        return SCRIPTS["complete"].call(
            k,
            parse,
            key_tail=effect_keys,
            arg_tail=args,
            keep_ms=self.keep_ms,
            keep_count=self.keep_count,
            n=len(leases),
            extras=len(extras) // 3,
        )

    def fail(
        self,
        lease: Lease,
        error: object,
        retry_in: float | None,
        dead: bool,
        traceback: str | None = None,
    ) -> Call[State]:
        self._own([lease])
        k = self.keys
        retry_ms = self.retry_delay_ms(lease, retry_in)

        def parse(reply: list[Any]) -> State:
            if as_text(reply[0]) != "OK":
                raise refusal("fail", lease, reply)
            return State(as_text(reply[1]))

        return SCRIPTS["fail"].call(
            k,
            parse,
            at={"id": lease.id},
            id=lease.id,
            token=lease.attempt,
            incarnation=lease.incarnation,
            error=v.text(error, "error", ERROR_LIMIT),
            retry_ms=retry_ms,
            dead_now=1 if dead else 0,
            traceback="" if traceback is None else v.text(traceback, "traceback", TRACEBACK_LIMIT),
        )

    def release(self, lease: Lease) -> Call[None]:
        self._own([lease])
        k = self.keys

        def parse(reply: list[Any]) -> None:
            if as_text(reply[0]) == "DAMAGED":
                raise DamagedRow(lease.id, as_text(reply[1]), as_text(reply[2]))
            if as_text(reply[0]) != "OK":
                raise refusal("release", lease, reply)

        return SCRIPTS["release"].call(
            k,
            parse,
            at={"id": lease.id},
            id=lease.id,
            token=lease.attempt,
            incarnation=lease.incarnation,
        )

    def once(self, lease: Lease, name: str) -> Call[bool]:
        self._own([lease])
        marker = check_job_id(name, "marker name")

        def parse(reply: list[Any]) -> bool:
            if as_text(reply[0]) != "OK":
                raise refusal("once", lease, reply)
            return int(reply[1]) == 1

        return SCRIPTS["once"].call(
            self.keys,
            parse,
            at={"id": lease.id},
            token=lease.attempt,
            incarnation=lease.incarnation,
            name=marker,
        )

    def progress(self, lease: Lease, value: Any) -> Call[None]:
        """Store ``value`` (JSON, at most PROGRESS_BYTES encoded) as the row's progress."""
        self._own([lease])
        try:
            text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidPayload(f"progress must be JSON data (finite numbers): {exc}") from None
        size = len(text.encode())
        if size > PROGRESS_BYTES:
            raise PayloadTooLarge(size, PROGRESS_BYTES)

        def parse(reply: list[Any]) -> None:
            if as_text(reply[0]) != "OK":
                raise refusal("progress", lease, reply)

        return SCRIPTS["progress"].call(
            self.keys,
            parse,
            at={"id": lease.id},
            token=lease.attempt,
            incarnation=lease.incarnation,
            value=text,
        )

    def reap(self, limit: int = REAP_LIMIT) -> Call[tuple[int, int, bool]]:
        return SCRIPTS["reap"].call(
            self.keys, lambda r: (int(r[0]), int(r[1]), int(r[2]) == 1), limit=limit
        )


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
