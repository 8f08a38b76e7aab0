"""Durable jobs (docs/durable.md): a job's recorded steps, and suspending it asleep
or waiting for a signal, fenced like every lease write (``lua/step.lua``,
``lua/suspend.lua``), and signals that resume the waiters (``lua/signal.lua``)."""

from __future__ import annotations

from typing import Any

from leaseq.store import validate as v
from leaseq.store.keys import check_job_id
from leaseq.store.leases import fenced
from leaseq.store.replies import as_text, decode_steps
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Op
from leaseq.types import Lease

__all__ = [
    "SIGNAL_KEEP",
    "SIGNAL_PAGE",
    "record_step",
    "record_step_call",
    "recorded_steps",
    "signal",
    "signal_call",
    "suspend",
    "suspend_call",
]

SIGNAL_KEEP = 86_400.0
"""How long ``q.signal`` keeps a signal for jobs that wait for it later: a day."""
SIGNAL_PAGE = 64
"""Most waiters one signal call resumes; it also stops after 0.75 ms of work by the
server's ``TIME`` (lua/signal.lua), usually first: about 30 here. The count is what
bounds a call on a server whose ``TIME`` stands still inside a script (Valkey 8
returns the call's start), where 64 resumes take about 2 ms. The rest follow in
the next calls of the same ``signal``."""


def record_step_call(queue: QueueSettings, lease: Lease, name: str, value: Any) -> Call[Any]:
    """Record ``value`` as the result of the job's step ``name`` (row field
    ``step:<name>``), encoded by the queue's codec; the call's result is the
    step's recorded value as the codec reads it back (the earlier record's,
    if there was one). Raises InvalidArgument, InvalidPayload, PayloadTooLarge
    before anything is sent."""
    step = check_job_id(name, "step name")
    data = queue.codec.encode(value, f"the result of step {step!r}")

    def read(reply: list[Any]) -> Any:
        stored = data if int(reply[1]) == 1 else reply[2]
        return decode_steps(queue.codec, lease.id, {step: stored})[step]

    return fenced(queue, "step", lease, read, name=step, value=data)


def record_step(queue: QueueSettings, lease: Lease, name: str, value: Any) -> Op[Any]:
    """Record the result of the job's durable step ``name`` under ``lease``'s
    token; the first record of a name stands. Returns the recorded value as it
    reads back (what a later run's ``step`` returns). Raises LeaseLost (nothing
    recorded), InvalidArgument, InvalidPayload, PayloadTooLarge."""
    recorded: Any = yield record_step_call(queue, lease, name, value)
    return recorded


def recorded_steps(queue: QueueSettings, lease: Lease) -> Op[dict[str, Any]]:
    """The results recorded for the job's durable steps, by step name (one read of
    its row; empty if it has none, or no row). A wait that ended with no signal
    reads as ``TIMED_OUT``. A read: it needs no lease held. Raises DamagedRow."""
    raw = yield Command("hgetall", (queue.keys.job(lease.id),))
    fields = {as_text(k): value for k, value in (raw or {}).items()}
    steps = {k[5:]: value for k, value in fields.items() if k.startswith("step:")}
    return decode_steps(queue.codec, lease.id, steps)


def suspend_call(
    queue: QueueSettings, lease: Lease, name: str, seconds: float | None, key: str | None = None
) -> Call[float | None]:
    """End the attempt of ``lease`` suspended: asleep for ``seconds``
    (``current_job().sleep``, the step ``name`` recorded now so the run that
    resumes passes it), or, with ``key``, waiting for ``q.signal(key)`` for at
    most ``seconds`` (None: no limit; the step is recorded when the wait ends).
    The call's result is when it wakes (epoch seconds, server clock; None: only
    a signal wakes it; 0.0: a kept signal resumed it at once, the job is
    pending). Raises InvalidArgument before anything is sent."""
    step = check_job_id(name, "step name")
    if key is None:
        sleep_ms = v.delay_ms(seconds, "sleep")
    else:
        check_job_id(key, "signal key")
        sleep_ms = -1 if seconds is None else v.delay_ms(seconds, "timeout")

    def read(reply: list[Any]) -> float | None:
        at = int(reply[1])
        return None if at < 0 else at / 1000.0

    return fenced(
        queue,
        "suspend",
        lease,
        read,
        id=lease.id,
        name=step,
        value=b"" if key is not None else queue.codec.encode(None, f"the record of {step!r}"),
        sleep_ms=sleep_ms,
        key=key or "",
    )


def suspend(
    queue: QueueSettings, lease: Lease, name: str, seconds: float | None, key: str | None = None
) -> Op[float | None]:
    """Suspend the job of ``lease`` (see ``suspend_call``): its attempt ends
    (refunded, not a failure) and it holds no lease nor worker slot; a claim
    promotes it to pending once its time has passed, a signal on ``key`` at
    once (docs/durable.md). Returns when it wakes. Raises LeaseLost,
    InvalidArgument."""
    wakes: float | None = yield suspend_call(queue, lease, name, seconds, key)
    return wakes


def signal_call(
    queue: QueueSettings, key: str, data: bytes, keep_ms: int, limit: int
) -> Call[tuple[int, bool]]:
    """One call of ``signal``: resume up to ``limit`` waiters of ``key``; the
    result is how many it resumed and whether more may wait."""

    def read(reply: list[Any]) -> tuple[int, bool]:
        return int(reply[1]), int(reply[2]) == 1

    return SCRIPTS["signal"].call(
        queue.keys, read, key=key, payload=data, keep_ms=keep_ms, limit=limit
    )


def signal(
    queue: QueueSettings, key: str, payload: Any = None, *, keep: float = SIGNAL_KEEP
) -> Op[int]:
    """Resume every job waiting in ``current_job().wait_for`` on ``key`` now, its
    ``wait_for`` returning ``payload``, and keep the signal ``keep`` seconds (a
    day by default) for jobs that wait on ``key`` later: they resume at once.
    The newest signal of a key is the one kept: ``keep=0`` keeps nothing and
    withdraws one kept before. Returns how many jobs it resumed, at most
    ``SIGNAL_PAGE`` a script call. The payload is recorded in each resumed
    job's row (its step): a signal to N waiters stores it N times.
    ``payload`` is checked as an enqueue's. Raises InvalidArgument,
    InvalidPayload, PayloadTooLarge before anything is sent."""
    key = check_job_id(key, "signal key")
    data = queue.codec.encode(payload, "the signal's payload")
    keep_ms = v.delay_ms(keep, "keep")
    total = 0
    while True:
        page: tuple[int, bool] = yield signal_call(queue, key, data, keep_ms, SIGNAL_PAGE)
        resumed, more = page
        total += resumed
        keep_ms = -1  # the later calls leave the kept signal as the first one set it
        if not more:
            return total
