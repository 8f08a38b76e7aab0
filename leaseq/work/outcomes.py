"""The one outcome policy both workers share.

:func:`decide` is a pure function (no I/O): from what a handler returned or
raised it says whether the job completes, retries (and in how long) or dies,
and what goes in ``last_error``. The worker core (``leaseq.work.writes``) and
``leaseq.aio.Worker`` only carry out the :class:`Outcome` it returns, so the
two drivers cannot drift apart. :func:`completion_batch` is the one rule of
which completions share a ``complete_many`` call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from leaseq.errors import InvalidArgument, InvalidPayload, PayloadTooLarge
from leaseq.handler import (
    Dead,
    Retry,
    Suspend,
    UnknownKind,
    describe_error,
    format_traceback,
)
from leaseq.protocols import members
from leaseq.store import validate as v
from leaseq.types import Lease

WRITE_BATCH = 1000
"""Most completions written in one complete_many call (it chunks further)."""
BACKOFF_START, BACKOFF_CAP = 0.1, 5.0
"""Seconds between attempts to reach a Redis that is down: doubling, capped, jittered."""


def completion_batch(limit: int = WRITE_BATCH) -> Callable[[Lease], bool]:
    """A new ``complete_many`` call, as ``admit(lease)``: True (and the lease
    counted in) while the call has room for it and holds no lease of the same
    job id and attempt yet; False leaves it for a later call.

    Why the pair once: ``complete_many`` names a refused lease by job id and
    attempt only (``LeaseLost.job_id``, ``.token``), and those do not tell every
    lease apart: the queues of a set may hold one id, and a job deleted and
    enqueued again under its id starts over at attempt 1. With each pair once
    in a call, each refusal is its own lease's. Both workers batch through this."""
    named: set[tuple[str, int]] = set()

    def admit(lease: Lease) -> bool:
        name = (lease.id, lease.attempt)
        if len(named) >= limit or name in named:
            return False
        named.add(name)
        return True

    return admit


Encode = Callable[[Any, str], bytes]
"""The queue's encoder (``Codec.encode``): raises InvalidPayload / PayloadTooLarge."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What becomes of a job whose handler finished (or that never started).

    ``kind``: ``complete`` (store ``result``), ``retry`` (``fail``: after
    ``retry_in`` seconds, None = the queue's backoff; dead once attempts are
    used up), ``dead`` (``fail(dead=True)``), ``release`` (back to pending,
    attempt refunded: shutdown only), ``suspend`` (``current_job().sleep`` or
    ``wait_for``: ``error`` names the step, ``result`` the signal key of a wait,
    ``retry_in`` the seconds until it wakes anyway, None for no limit).
    ``error`` is otherwise the ``last_error`` text;
    ``label`` names the cause in log lines.
    """

    kind: Literal["complete", "retry", "dead", "release", "suspend"]
    result: Any = None
    retry_in: float | None = None
    error: str = ""
    label: str = ""
    traceback: str = ""
    """The handler's traceback without leaseq's frames ('' for none): the row's
    ``traceback`` field."""


RELEASE = Outcome("release", label="release")
OVERDUE = Outcome("release", label="overdue", error="waited too long for a handler slot")
"""A spare handed back unstarted, ``Prefetch.overdue`` (the threaded worker's record)."""
DONE = Outcome("complete", label="done")
"""A handler that returned None (the one outcome of most jobs: made once)."""


class HandlerTimeout(Exception):
    """What a worker hands ``decide`` when a handler ran past its time limit."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


def job_timeout(lease: Lease, default: float | None) -> float | None:
    """The time limit of ``lease``'s handler, seconds: the job's own
    (``enqueue(..., timeout=)``), else the worker's ``timeout``; None for none."""
    return lease.timeout if lease.timeout is not None else default


def decide(
    raised: BaseException | None, result: Any = None, encode: Encode | None = None
) -> Outcome:
    """The outcome of a handler that returned ``result`` (``raised`` None) or raised.

    - a return value completes the job, stored as its result — unless it can
      never be stored (``encode`` refuses it: too large, or not data). The
      handler has run to the end and its side effects happened, so running it
      again would repeat them for a result that still would not fit: the job is
      **dead-lettered at once**, ``last_error`` naming the size and the limit
      (or why it does not encode); an operator can fix the handler and retry it;
    - ``leaseq.Retry(in_)`` retries after ``in_`` seconds; an ``in_`` that is
      not a valid delay (negative, NaN, over a year) falls back to the queue's
      backoff, and ``last_error`` says so;
    - ``leaseq.Dead(reason)`` dead-letters at once;
    - ``HandlerTimeout(n)`` (the handler ran past its time limit) fails the attempt
      with ``last_error`` "timed out after n s", retried or dead-lettered by the
      usual rules;
    - anything else (any ``BaseException``: a handler's ``SystemExit`` is its
      own failure, not the worker's) fails the job with ``Type: message`` in
      ``last_error`` and the traceback (minus leaseq's frames) apart;
      cancellation of an async handler reads "cancelled".
    """
    if raised is None:
        return _returned(result, encode)
    if isinstance(raised, Retry):
        text = f"Retry: {raised.reason}"
        try:
            v.delay_ms(raised.in_, "Retry.in_")
        except InvalidArgument as exc:
            return Outcome(
                "retry", error=f"{text} (bad delay, queue backoff used: {exc})", label="retry"
            )
        return Outcome("retry", retry_in=raised.in_, error=text, label="retry")
    return _failed(raised)


def _returned(result: Any, encode: Encode | None) -> Outcome:
    """``decide`` for a handler that returned ``result``."""
    if result is None:
        return DONE
    if encode is not None:
        problem = _unstorable(result, encode)
        if problem:
            return Outcome("dead", error=problem, label="result")
    return Outcome("complete", result=result, label="done")


def _failed(raised: BaseException) -> Outcome:
    """``decide`` for a handler that raised anything but ``Retry``."""
    if isinstance(raised, Suspend):  # not a failure: the handler asked to sleep
        label = "sleep" if raised.key is None else "wait"
        return Outcome(
            "suspend", result=raised.key, retry_in=raised.seconds, error=raised.name, label=label
        )
    if isinstance(raised, Dead):
        return Outcome("dead", error=f"Dead: {raised.reason}", label="dead")
    if isinstance(raised, HandlerTimeout):  # the worker's verdict: an ordinary failure
        return Outcome("retry", error=str(raised), label="timeout")
    if isinstance(raised, UnknownKind):  # not run: retried so a rolling deploy can serve it
        return Outcome("retry", error=str(raised), label="kind")
    if isinstance(raised, asyncio.CancelledError):
        return Outcome("retry", error="CancelledError: the handler was cancelled", label="error")
    return Outcome(
        "retry", error=describe_error(raised), label="error", traceback=format_traceback(raised)
    )


def _unstorable(result: Any, encode: Encode) -> str:
    """Why ``result`` can never be stored ('' if it can)."""
    try:
        encode(result, "result")
    except PayloadTooLarge as exc:
        return (
            f"ResultTooLarge: the handler returned a result of {exc.size} bytes encoded, over "
            f"the queue's max_payload_bytes of {exc.limit}; the handler had finished (its "
            "side effects happened), so the job is dead-lettered, not run again"
        )
    except InvalidPayload as exc:
        return (
            f"InvalidResult: the handler's result (of type {type(result).__qualname__}) cannot "
            f"be stored: {exc}; the handler had finished (its side effects happened), so the "
            "job is dead-lettered, not run again"
        )
    return ""


def check_worker(
    handler: object,
    concurrency: object,
    ttl: object,
    grace: object,
    reap: object,
    prefetch: object = None,
    timeout: object = None,
) -> None:
    """The settings both workers take, checked alike. Raises InvalidArgument."""
    v.worker_settings(concurrency, ttl, grace, reap)
    if not callable(handler):
        raise InvalidArgument(f"handler must be callable, not {handler!r}")
    if prefetch is not None:
        v.integer(prefetch, "prefetch", 0, v.MAX_CONCURRENCY)
    v.timeout_ms(timeout)


def result_encoder(queue: Any) -> Callable[[Lease], Encode | None]:
    """The encoder a lease's result is stored with, by the lease: a plain, async or
    sharded queue has one; each queue of a set its own (their ``max_payload_bytes``
    may differ, and ``decide`` must refuse what the job's own queue will not store)."""
    queues = members(queue)
    if len(queues) > 1:
        by_name = {q.name: _encoder(q) for q in queues}
        first = by_name[queues[0].name]
        return lambda lease: by_name.get(lease.queue, first)
    encode = _encoder(queues[0])
    return lambda lease: encode


def _encoder(queue: Any) -> Encode | None:
    core = getattr(queue, "_core", None)
    if core is None and getattr(queue, "shards", None):
        core = getattr(queue.shards[0], "_core", None)
    codec = getattr(core, "codec", None)
    return None if codec is None else codec.encode
