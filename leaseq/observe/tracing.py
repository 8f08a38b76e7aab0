"""OpenTelemetry tracing: a job's trace goes from its enqueue to its worker.

Optional (the ``otel`` extra: ``opentelemetry-api`` only; the application
brings the SDK and its exporter). This is the one module that imports
``opentelemetry``, lazily and guarded: leaseq works the same without it, and
then each enqueue pays one cached check and each worker none at all.

- **Enqueue** (``enqueue``, ``enqueue_many``), when a valid span is current:
  a PRODUCER span ``send <queue>`` (child of it) covers the script calls, and
  its W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``) is stored in
  each new row's ``traceparent`` field. No current span: no span, no field.
  Schedules' jobs (``tick``) have no caller and so no traceparent.
- **Workers** (``leaseq.Worker`` and ``leaseq.aio.Worker`` share
  :class:`JobTracer`): a CONSUMER span ``process <queue>`` for each job run,
  current while the handler runs (its own spans nest under it). It *links*
  to the enqueuer's span by default (``trace_parent="link"``: each run is
  its own trace, as the messaging conventions recommend for work that may run
  much later, or several times); ``trace_parent="parent"`` makes it a child
  in the enqueuer's trace instead. Attributes follow the OpenTelemetry
  messaging semantic conventions (``messaging.system`` = ``leaseq``,
  ``messaging.destination.name`` = the queue, ``messaging.message.id`` = the
  job id, ``messaging.operation.type`` = ``process``), plus ``leaseq.attempt``,
  ``leaseq.kind`` and, at the end, ``leaseq.outcome`` (``succeeded``,
  ``retried``, ``dead``, ``lost``, ``released``). A raising handler sets the
  span's status to ERROR and records the exception.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from leaseq.errors import InvalidArgument

if TYPE_CHECKING:
    from leaseq.types import Lease


class Outcome(Protocol):
    """What a span needs of a run's outcome (``leaseq.work.outcomes.Outcome``):
    its kind and its error text. A protocol, so tracing sits below the workers."""

    @property
    def kind(self) -> str: ...
    @property
    def error(self) -> str: ...


__all__ = ["TRACE_PARENT_MODES", "JobSpan", "JobTracer", "Send", "check_traceparent"]

TRACE_PARENT_MODES = ("link", "parent")
"""How a worker's span relates to the enqueuer's: a link (default), or a child."""
SYSTEM = "leaseq"
"""``messaging.system``."""
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")

_otel: Any = None
"""The ``opentelemetry.trace`` module once looked for; False when it is not installed."""
_tracer: Any = None

_NO_PROVIDER: tuple[type, ...] = ()
PROVIDER_LOOK_EVERY = 1.0
"""Seconds between a worker's looks for a tracer provider set after it started."""
"""The API's tracer providers that record nothing (set with ``_otel``)."""


def _trace() -> Any:
    """``opentelemetry.trace``, or None when it is not installed (looked for once)."""
    global _otel, _NO_PROVIDER
    if _otel is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _otel = False
        else:
            _otel = trace
            _NO_PROVIDER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    return _otel or None


def _get_tracer() -> Any:
    global _tracer
    if _tracer is None:
        try:
            from importlib.metadata import version

            ours = version("leaseq")
        except Exception:  # not installed as a distribution (a source checkout)
            ours = None
        _tracer = _otel.get_tracer("leaseq", ours)
    return _tracer


def available() -> bool:
    """True when ``opentelemetry-api`` can be imported."""
    return _trace() is not None


def check_traceparent(value: str) -> str:
    """``value`` if it is a W3C traceparent (version 00, ids not zero); else InvalidArgument."""
    m = _TRACEPARENT.match(value) if isinstance(value, str) else None
    if m is None or not int(m.group(1), 16) or not int(m.group(2), 16):
        raise InvalidArgument(
            f"traceparent must read 00-<32 hex>-<16 hex>-<2 hex> (lower case, ids not all "
            f"zero), not {value!r}"
        )
    return value


def _format(ctx: Any) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _remote(traceparent: str | None) -> Any:
    """The SpanContext a stored traceparent names, or None (absent, or damaged by hand)."""
    m = _TRACEPARENT.match(traceparent) if traceparent else None
    if m is None:
        return None
    trace = _otel
    ctx = trace.SpanContext(
        int(m.group(1), 16),
        int(m.group(2), 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(int(m.group(3), 16)),
    )
    return ctx if ctx.is_valid else None


# -- enqueue ----------------------------------------------------------------------------


class Send:
    """The PRODUCER span of one enqueue call, and the traceparent its rows get."""

    __slots__ = ("_span", "traceparent")

    def __init__(self, span: Any, traceparent: str) -> None:
        self._span = span
        self.traceparent = traceparent

    @staticmethod
    def start(queue: str) -> Send | None:
        """A span for an enqueue into ``queue``, or None (no opentelemetry, or no
        valid current span: then nothing is traced and nothing stored)."""
        trace = _trace()
        if trace is None:
            return None
        current = trace.get_current_span().get_span_context()
        if not current.is_valid:
            return None
        span = _get_tracer().start_span(
            f"send {queue}",
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.destination.name": queue,
                "messaging.operation.type": "send",
                "messaging.operation.name": "send",
            },
        )
        own = span.get_span_context()
        # With the API alone (no SDK) the span is the current one, or invalid.
        return Send(span, _format(own if own.is_valid else current))

    def sent(self, ids: Sequence[str], batch: bool) -> None:
        """The ids the call enqueues (known once validated)."""
        if batch:
            self._span.set_attribute("messaging.batch.message_count", len(ids))
        elif ids:
            self._span.set_attribute("messaging.message.id", ids[0])

    def end(self, error: BaseException | None) -> None:
        if error is not None:
            self._span.record_exception(error)
            self._span.set_status(_otel.Status(_otel.StatusCode.ERROR, str(error)))
            self._span.set_attribute("error.type", type(error).__qualname__)
        self._span.end()


# -- workers ----------------------------------------------------------------------------


def outcome_name(outcome: Outcome | None, lease: Lease, lost: bool) -> str:
    """``leaseq.outcome`` of a run: succeeded, retried, dead, lost, released or
    suspended (``current_job().sleep``)."""
    if lost:
        return "lost"
    if outcome is None or outcome.kind == "release":
        return "released"
    if outcome.kind in ("complete", "suspend"):
        return "succeeded" if outcome.kind == "complete" else "suspended"
    if outcome.kind == "retry" and lease.attempt < lease.max_attempts:
        return "retried"
    return "dead"


class JobSpan:
    """One job's CONSUMER span, current in this thread (or task) from ``start``
    until ``detach``; ``finish`` detaches (if still attached) and ends it."""

    __slots__ = ("_lease", "_span", "_token")

    def __init__(self, span: Any, lease: Lease) -> None:
        self._span = span
        self._lease = lease
        self._token: Any = None

    def attach(self) -> None:
        """Make the span current here (in this thread, or this task's context)."""
        from opentelemetry import context

        self._token = context.attach(_otel.set_span_in_context(self._span))

    def detach(self) -> None:
        if self._token is not None:
            from opentelemetry import context

            context.detach(self._token)
            self._token = None

    def finish(self, outcome: Outcome | None, raised: BaseException | None, lost: bool) -> None:
        """Record how the run ended and end the span."""
        self.detach()
        span = self._span
        name = outcome_name(outcome, self._lease, lost)
        span.set_attribute("leaseq.outcome", name)
        if raised is not None and name != "suspended":  # a sleep raises, but is no error
            span.record_exception(raised)
            span.set_attribute("error.type", type(raised).__qualname__)
        if name in ("retried", "dead", "lost"):
            why = "lease lost" if lost else (outcome.error if outcome else "")
            first = why.splitlines()[0] if why else name
            span.set_status(_otel.Status(_otel.StatusCode.ERROR, first))
        span.end()


class JobTracer:
    """Makes the spans of one worker's jobs: ``start(lease)`` per run."""

    __slots__ = ("_look_at", "mode", "queue", "worker_id")

    def __init__(self, queue: str, worker_id: str, mode: str) -> None:
        self.queue = queue
        self.worker_id = worker_id
        self.mode = mode
        self._look_at = 0.0
        """When to look again for a tracer provider that records (monotonic seconds;
        inf once one is found: a global provider is set once and for good)."""

    @staticmethod
    def make(queue: str, worker_id: str, mode: str) -> JobTracer | None:
        """The worker's tracer, or None when opentelemetry is not installed (then a
        worker does no tracing work at all). Raises InvalidArgument for a bad ``mode``."""
        if mode not in TRACE_PARENT_MODES:
            raise InvalidArgument(f"trace_parent must be 'link' or 'parent', not {mode!r}")
        return JobTracer(queue, worker_id, mode) if _trace() is not None else None

    def _recording(self, now: float) -> bool:
        """Whether a tracer provider that records is set (looked at once a second at
        most: the API's look reads the environment each time)."""
        if now < self._look_at:
            return False
        if isinstance(_otel.get_tracer_provider(), _NO_PROVIDER):
            self._look_at = now + PROVIDER_LOOK_EVERY
            return False
        self._look_at = math.inf
        return True

    def start(self, lease: Lease) -> JobSpan | None:
        """Start the span of ``lease``'s run and make it current here; None when no
        tracer provider is set and spans only link (the API's no-op span would then
        be invalid and change nothing: a job costs no tracing work until an SDK is
        installed; one installed while the worker runs is used within a second)."""
        trace = _otel
        if self.mode == "link" and self._look_at != math.inf:
            now = time.monotonic()
            if now < self._look_at or not self._recording(now):
                return None
        remote = _remote(lease.traceparent)
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": self.queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": lease.id,
            "messaging.client.id": lease.worker or self.worker_id,
            "leaseq.attempt": lease.attempt,
        }
        if lease.kind:
            attributes["leaseq.kind"] = lease.kind
        context = links = None
        if remote is not None:
            if self.mode == "parent":
                context = trace.set_span_in_context(trace.NonRecordingSpan(remote))
            else:
                links = [trace.Link(remote)]
        span = _get_tracer().start_span(
            f"process {self.queue}",
            context=context,
            kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
        )
        job = JobSpan(span, lease)
        job.attach()
        return job
