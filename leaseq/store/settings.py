"""A queue's settings, checked once, and what follows from them alone.

``QueueSettings`` validates every setting of ``leaseq.Queue`` at construction
(durations in seconds become integer milliseconds) and holds the queue's keys
and payload codec. Nothing extends it: every call builder and operation of
the store takes it as its first argument (``claim.claim_call(queue, ...)``),
and ``leaseq.store.queue_ops.QueueOps`` binds them to the settings it is given.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

from leaseq.errors import (
    InvalidArgument,
    NotReplicated,
)
from leaseq.store import validate as v
from leaseq.store.keys import QueueKeys, check_job_id
from leaseq.store.payloads import Codec
from leaseq.store.steps import Call
from leaseq.types import DEFAULT_BACKOFF, Backoff, Lease, State

__all__ = [
    "CLOCK_HOLD",
    "DEFAULT_KEEP_SUCCEEDED_COUNT",
    "CheckedCall",
    "DEFAULT_MAX_PAYLOAD",
    "QueueSettings",
    "default_worker_id",
    "parse_state",
]

R = TypeVar("R")

DEFAULT_KEEP_SUCCEEDED_COUNT = 1_000_000
"""Most succeeded rows a queue keeps by default: a safety valve (about 540 MB at
~540 B a row) that a queue under ~270 jobs/s never reaches within the default
hour of ``keep_succeeded``; retention is by time (docs/states.md, "Retention")."""
DEFAULT_ENQUEUE_RETRY = 15.0
"""Seconds an enqueue rides out an unavailable server by default: a Sentinel
failover with a 5 s down-after takes ~7 s on loopback (docs/high-availability.md)."""
CLOCK_HOLD = 10.0
"""Longest the clock floor holds a queue's time back behind the server's TIME,
in seconds (lua/lib/now_ms.lua; docs/leases-and-fencing.md, "The server clock")."""
DEFAULT_MAX_PAYLOAD = 1_048_576


def default_worker_id() -> str:
    """host:pid:random — unique per process, readable in ``worker``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _retention(keep_succeeded: float | None, keep_succeeded_count: int | None) -> tuple[int, int]:
    """``(keep_ms, keep_count)`` of succeeded rows, checked; -1 is no bound, and a
    count of 0 keeps none (so no time either)."""
    keep_ms = (
        -1
        if keep_succeeded is None
        else v.seconds_to_ms(
            keep_succeeded, "keep_succeeded", minimum_ms=0, maximum=10 * 366 * 86_400.0
        )
    )
    keep_count = (
        -1
        if keep_succeeded_count is None
        else v.integer(keep_succeeded_count, "keep_succeeded_count", 0, 10**12)
    )
    return (0 if keep_count == 0 else keep_ms), keep_count


class CheckedCall(dict[str, Any]):
    """A typed task's call in its stored form (``{"args": [...], "kwargs": {...}}``),
    built and checked by the task: an enqueue need not check it again. Encodes as
    the plain dict it is."""


class QueueSettings:
    """A queue's validated settings, keys and codec. No I/O."""

    tasks: dict[str, Any]
    """The typed tasks made on this queue, by kind (``leaseq.work.tasks``): an
    edit of a job of such a kind is checked by the task (``check_edit``)."""
    enqueue_retry: float
    """Seconds an enqueue is sent again while the server is unavailable (a
    failover, a restart); 0 = raise at once (``leaseq.transport.lower``)."""

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
        enqueue_retry: float = DEFAULT_ENQUEUE_RETRY,
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
        self.keep_ms, self.keep_count = _retention(keep_succeeded, keep_succeeded_count)
        """How long (ms) and how many succeeded rows are kept (-1: no bound); a
        count of 0 deletes them at completion."""
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
        self.tasks = {}
        retry_ms = v.seconds_to_ms(enqueue_retry, "enqueue_retry", minimum_ms=0, maximum=3600.0)
        self.enqueue_retry = retry_ms / 1000.0

    def check_calls(self, kind: str | None, payloads: Sequence[Any]) -> None:
        """``check_edit`` for the payloads of an enqueue of ``kind``: a plain
        ``q.enqueue(payload, kind=task.name)`` is checked as the task's own enqueue
        is; a call the task built and checked itself (``CheckedCall``) is not again."""
        task = self.tasks.get(kind) if kind else None
        if task is not None:
            for payload in payloads:
                if not isinstance(payload, CheckedCall):
                    task.check(payload)

    def check_edit(self, kind: str | None, payload: Any) -> None:
        """Raise what the typed task of ``kind`` raises for ``payload`` (a call that
        does not fit its signature); nothing for a kind no task of this process has."""
        task = self.tasks.get(kind) if kind else None
        if task is not None:
            task.check(payload)

    def lease_ms(self, ttl: float) -> int:
        """A lease length in ms: finite, > 0, at most MAX_TTL and the queue's lease_cap."""
        ms = v.ttl_ms(ttl)
        if ms > self.lease_cap_ms:
            raise InvalidArgument(
                f"ttl {ttl!r} s is over this queue's lease_cap of {self.lease_cap_ms / 1000:g} s"
            )
        return ms

    def retry_delay_ms(self, lease: Lease, retry_in: float | None) -> int:
        if retry_in is not None:
            return v.delay_ms(retry_in, "retry_in")
        if self.backoff is None:
            return self.constant_backoff_ms
        return round(self.backoff.delay(lease.attempt) * 1000)

    def replicas_for(self, call: Call[Any]) -> int:
        """How many replicas must acknowledge ``call`` before it counts (0: none).

        Only with ``durable=``; the read-only script, stats, never waits, nor
        does a waiter's hold (hold_results): it changes no job, and a hold a
        failover lost only lets the count bound reach that row again.
        """
        return 0 if call.script.name in ("stats", "hold_results") else self.durable

    def check_replicated(self, call: Call[Any], acked: int, result: R) -> R:
        """``result`` if enough replicas acknowledged ``call``; else NotReplicated."""
        if acked < self.durable:
            raise NotReplicated(call.script.name, self.durable, acked, result)
        return result


def parse_state(state: State | str) -> State:
    """A State from a member or its name; InvalidArgument otherwise."""
    try:
        return State(state)
    except ValueError:
        names = ", ".join(s.value for s in State)
        raise InvalidArgument(f"unknown state {state!r}: use one of {names}") from None
