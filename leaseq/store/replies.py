"""Reading what the scripts answer: refusals into exceptions, rows into Jobs.

This is the one place where a script's error codes ({'LOST', ...},
{'CAPPED', ...}, {'GONE'}, {'STATE', ...}, {'DAMAGED', ...}) become leaseq
exceptions, and where a job hash read with HGETALL becomes a typed Job (or a
DamagedRow naming the field that would not convert).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec

from leaseq.errors import (
    AlreadyFinished,
    DamagedRow,
    JobNotFound,
    JobStateError,
    LeaseCapReached,
    LeaseLost,
    ScriptError,
)
from leaseq.store.payloads import Codec
from leaseq.types import TIMED_OUT, TRANSITIONS, Failure, Job, Lease, State

__all__ = [
    "admin_error",
    "as_ints",
    "as_text",
    "decode_steps",
    "loose_text",
    "parse_failures",
    "parse_job",
    "parse_page",
    "read_cost",
    "refusal",
    "stream_entries",
]


def as_ints(reply: list[Any]) -> list[int]:
    return [int(x) for x in reply]


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def loose_text(value: Any) -> str:
    """A stored text field that an operator may have set by hand to bytes that are
    not UTF-8 (a row's ``kind`` or ``traceparent``): undecodable bytes become
    U+FFFD instead of raising, so a claim that already moved its batch to active
    still hands out every lease (such a kind matches no handler; such a
    traceparent is ignored like any malformed one)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def refusal(op: str, lease: Lease, reply: Sequence[Any]) -> LeaseLost:
    """The exception for a {'LOST', state, attempts, incarnation, fence} reply to a call
    on ``lease`` — the only place lease refusals become exceptions, each naming
    the lease's queue and row (``LeaseLost.queue``, ``.incarnation``). Only a row
    of the lease's own incarnation at its own token can be AlreadyFinished; the
    same token on a newer row under the same id is a plain LeaseLost."""
    job_id, token, incarnation = lease.id, lease.attempt, lease.incarnation
    queue = lease.queue
    code = as_text(reply[0])
    if code == "CAPPED":
        return LeaseCapReached(
            job_id, token, int(reply[1]) / 1000.0, queue=queue, incarnation=incarnation
        )
    if code != "LOST":
        raise ScriptError(f"{op}: unexpected reply {reply!r}")
    state, attempts = as_text(reply[1]) or None, as_text(reply[2]) or None
    row_incarnation = as_text(reply[3]) if len(reply) > 3 else "0"
    row_fence = as_text(reply[4]) if len(reply) > 4 else ""
    this_attempt = attempts == str(token) and row_incarnation == str(incarnation)
    mine = this_attempt and row_fence == lease.fence
    # A replay of this very call finds the row where the call moved it: complete
    # to succeeded; fail or release to one of the other states an active job
    # goes to (TRANSITIONS[ACTIVE]).
    if mine and (
        (op == "complete" and state == State.SUCCEEDED.value)
        or (op in ("fail", "release") and state in _LEFT_BY_FAIL)
    ):
        return AlreadyFinished(
            job_id,
            token,
            state,
            attempts,
            f"job {job_id!r} already left attempt {token}: it is {state}",
            queue=queue,
            incarnation=incarnation,
        )
    message = ""
    if this_attempt and not mine:
        # The same attempt of the same row, under another claim's fence: a claim
        # lost to a failover, handed out again (docs/leases-and-fencing.md).
        message = (
            f"lease on job {job_id!r} (attempt {token}) is lost: row is {state} at "
            f"attempts={attempts} under another claim (fence {row_fence or '-'}, "
            f"this lease's {lease.fence or '-'})"
        )
    return LeaseLost(job_id, token, state, attempts, message, queue=queue, incarnation=incarnation)


def admin_error(op: str, job_id: str, reply: Sequence[Any]) -> Exception:
    """The exception for an operator call's refusal (cancel, retry, delete, run_now,
    drop; for drop, ``job_id`` names the queue)."""
    code = as_text(reply[0])
    if code == "GONE":
        return JobNotFound(job_id)
    if code == "STATE":
        wanted = {
            "cancel": "only unfinished jobs can be cancelled",
            "delete": "an active job holds a lease: let it finish or expire first",
            "run_now": "only a scheduled or suspended job can be run now",
            "update": "only a job that has not started (waiting, pending, scheduled) "
            "can be updated; retry_dead(id, payload=...) edits a dead one",
        }.get(op, "only dead jobs can be retried")
        return JobStateError(job_id, as_text(reply[1]), wanted)
    if code == "DAMAGED":
        return DamagedRow(job_id, as_text(reply[1]), as_text(reply[2]))
    if code == "PINNED":  # delete.lua: a finished job children still depend on
        return JobStateError(
            job_id,
            "finished",
            f"{int(reply[1])} unfinished child job(s) still depend on it: delete it once "
            "they finish (docs/workflows.md)",
        )
    if code == "PARKED":  # run_now.lua: a keep-last successor waiting for its key's holder
        return JobStateError(
            job_id,
            "scheduled",
            f"it is parked behind {as_text(reply[1])!r}, the job holding its uniqueness key: "
            "it becomes due when that job finishes",
        )
    if code == "SETTLING":  # retry.lua: a dead job whose children are being settled
        return JobStateError(
            job_id, "dead", "its children are still being settled: retry it in a moment"
        )
    if code == "ACTIVE":  # drop.lua: the queue still has leases in flight
        wanted = "stop its workers first, or drop with force"
        held = f"{job_id} has {int(reply[1])} lease(s) in flight"
        return JobStateError(job_id, "active", wanted, message=f"{held}: {wanted}")
    return ScriptError(f"{op}: unexpected reply {reply!r}")


Ms = Annotated[int, msgspec.Meta(ge=-62_135_596_800_000, le=253_402_300_799_999)]
"""A time field, ms epoch: years 1 to 9999, what a datetime can show. A row
edited by hand to 10^30 is damaged (DamagedRow names the field), not a crash
of whoever formats it."""


def row_number(incarnation: int | None, enqueued_at: int | None) -> int:
    """The number that names a row, as its leases carry it: the ``incarnation``
    field, or for a row under an id leaseq made (which stores none), its
    ``enqueued_at`` (lua/lib/row_number.lua); 0 for one that is not a positive
    number (edited by hand), as claim hands it out."""
    number = incarnation if incarnation is not None else enqueued_at
    return int(number) if number is not None and number > 0 else 0


class _Row(msgspec.Struct, kw_only=True):
    state: State
    attempts: int
    max_attempts: int
    payload: str
    priority: int = 0
    enqueued_at: Ms | None = None
    run_at: Ms | None = None
    incarnation: int | None = None
    fence: str | None = None
    claimed_at: Ms | None = None
    lease_until: Ms | None = None
    finished_at: Ms | None = None
    worker: str | None = None
    last_error: str | None = None
    retry_op: str | None = None
    prefetched: int | None = None
    refunds: int = 0
    group: str | None = None
    kind: str | None = None
    timeout: Annotated[int, msgspec.Meta(ge=0, le=86_400_000)] | None = None
    """ms, at most a day (``_validate.MAX_TIMEOUT``): set by hand below 0 or past
    that it is damaged, as claim.lua reads it (no limit), not a negative time."""
    cost: str | None = None  # decimal text, read as claim reads it (read_cost)
    expires_at: Ms | None = None
    spent: str | None = None
    traceparent: str | None = None
    unique_key: str | None = None
    after: str | None = None
    progress: str | None = None  # JSON text, decoded apart (like result): never set here
    depends_on: str | None = None  # parent ids separated by spaces (docs/workflows.md)
    parents_left: int = 0
    on_parent_failure: Literal["cancel", "run"] = "cancel"
    failed_parents: str | None = None
    children: int = 0
    cancelled_children: int = 0
    flow: str | None = None
    traceback: str | None = None
    failures: str | None = None
    wait_key: str | None = None
    wait_step: str | None = None


_LEFT_BY_FAIL = frozenset(s.value for s in TRANSITIONS[State.ACTIVE] - {State.SUCCEEDED})
"""Where a fail or release moves an active job: retry (pending, scheduled) or dead."""
_FIELD_IN_ERROR = re.compile(r"`\$\.(\w+)`|field `(\w+)`")


_DECIMAL = re.compile(r"[0-9]*\.?[0-9]*(?:[eE][+-]?[0-9]+)?")
"""Plain decimal text, as lua/lib/to_cost.lua takes it: not float()'s ' 5', '1_0' or 'inf'."""


def read_cost(text: str | None, zero: bool = False) -> float | None:
    """A cost field as lua/lib/to_cost.lua reads it: plain decimal text of a finite
    number > 0 (>= 0 with ``zero``: a run's ``spent``), else none."""
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    try:
        value = float(text)
    except ValueError:  # '', '.'
        return None
    return value if math.isfinite(value) and (value > 0 or (zero and value == 0)) else None


def _sec(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000.0


def parse_page(
    codec: Codec,
    queue: str,
    names: Sequence[str],
    rows: Sequence[Any],
    damaged: list[DamagedRow] | None,
) -> list[Job]:
    """The Jobs of one ``ls`` page. A row that will not read raises DamagedRow,
    or, when ``damaged`` is a list, goes there and the page goes on."""
    jobs: list[Job] = []
    for job_id, raw in zip(names, rows, strict=True):
        try:
            if isinstance(raw, Exception):  # the key is not a hash (WRONGTYPE)
                raise DamagedRow(job_id, "<key>", None, str(raw))
            job = parse_job(codec, queue, job_id, raw)
        except DamagedRow as exc:
            if damaged is None:
                raise
            damaged.append(exc)
            continue
        if job is not None:
            jobs.append(job)
    return jobs


def parse_job(codec: Codec, queue: str, job_id: str, raw: dict[Any, Any]) -> Job | None:
    """A job row from HGETALL as a Job; raises DamagedRow naming the field."""
    if not raw:
        return None
    row, once, blobs = _split_row(job_id, raw)
    try:
        r = msgspec.convert(row, _Row, strict=False)
    except msgspec.ValidationError as exc:
        found = _FIELD_IN_ERROR.search(str(exc))
        field = next((g for g in found.groups() if g), "?") if found else "?"
        raise DamagedRow(job_id, field, row.get(field), str(exc)) from None
    decoders: dict[str, Callable[[Any], Any]] = {
        "payload": codec.decode_payload,
        "result": codec.decode_any,
        "progress": msgspec.json.decode,
    }
    decoded: dict[str, Any] = {}
    for field, decode in decoders.items():
        stored = blobs.get(field)
        try:  # a missing payload decodes as the codec says; the others are None
            decoded[field] = decode(stored) if stored is not None or field == "payload" else None
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise DamagedRow(job_id, field, stored, str(exc)) from None
    payload, result, progress = decoded["payload"], decoded["result"], decoded["progress"]
    steps = decode_steps(codec, job_id, blobs.get("steps", {}))
    return _job(queue, job_id, r, once, payload, result, progress, steps)


def decode_steps(codec: Codec, job_id: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A row's ``step:`` fields (by step name) as the values they record: each
    decoded by the queue's codec, an empty one (no codec writes it) as
    ``TIMED_OUT``, a signal wait that ended with no signal. Raises DamagedRow."""
    steps: dict[str, Any] = {}
    for name, value in raw.items():
        if not value:
            steps[name] = TIMED_OUT
            continue
        try:
            steps[name] = codec.decode_any(value)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise DamagedRow(job_id, f"step:{name}", value, str(exc)) from None
    return steps


_BLOBS = ("payload", "result", "progress")
"""Fields decoded by the codec, not converted as text (``payload`` also counts as a
text field present, so a row without one is told apart)."""


def _split_row(
    job_id: str, raw: dict[Any, Any]
) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
    """A raw row as its text fields, its ``once:`` markers and its encoded blobs
    (``steps``: the ``step:`` fields by step name)."""
    row: dict[str, Any] = {}
    once: dict[str, int] = {}
    blobs: dict[str, Any] = {}
    for key, value in raw.items():
        field = as_text(key)
        if field in _BLOBS:
            blobs[field] = value
            if field == "payload":
                row[field] = ""
        elif field.startswith("once:"):
            once[field[5:]] = int(as_text(value)) if as_text(value).isdigit() else 0
        elif field.startswith("step:"):  # a durable step's result, in the codec's bytes
            blobs.setdefault("steps", {})[field[5:]] = value
        else:
            row[field] = _text_field(job_id, field, value)
    return row, once, blobs


def _text_field(job_id: str, field: str, value: Any) -> str:
    try:
        text = as_text(value)
    except UnicodeDecodeError:  # set by hand to bytes that are not UTF-8
        raise DamagedRow(job_id, field, value, "not UTF-8 text") from None
    if field == "timeout" and not (text.isascii() and text.isdigit()):
        # What claim reads as no limit (digits only) must not read as a
        # limit here: msgspec would take "1e3" or "2.5" as a number.
        raise DamagedRow(job_id, field, value, "not a whole number of ms")
    return text


def _job(
    queue: str,
    job_id: str,
    r: _Row,
    once: dict[str, int],
    payload: Any,
    result: Any,
    progress: Any,
    steps: dict[str, Any],
) -> Job:
    return Job(
        id=job_id,
        queue=queue,
        state=r.state,
        attempts=r.attempts,
        max_attempts=r.max_attempts,
        payload=payload,
        priority=r.priority,
        enqueued_at=_sec(r.enqueued_at),
        run_at=_sec(r.run_at),
        claimed_at=_sec(r.claimed_at),
        lease_until=_sec(r.lease_until),
        finished_at=_sec(r.finished_at),
        worker=r.worker,
        last_error=r.last_error,
        result=result,
        once=once,
        steps=steps,
        incarnation=row_number(r.incarnation, r.enqueued_at),
        fence=r.fence,
        prefetched=r.prefetched,
        refunds=r.refunds,
        group=r.group,
        kind=r.kind,
        timeout=None if not r.timeout else r.timeout / 1000.0,
        cost=read_cost(r.cost) or 1.0,
        expires_at=_sec(r.expires_at),
        spent=read_cost(r.spent, zero=True),
        traceparent=r.traceparent,
        unique_key=r.unique_key,
        after=r.after,
        progress=progress,
        depends_on=tuple(r.depends_on.split()) if r.depends_on else (),
        parents_left=r.parents_left,
        on_parent_failure=r.on_parent_failure,
        failed_parents=tuple(r.failed_parents.split()) if r.failed_parents else (),
        children=r.children,
        cancelled_children=r.cancelled_children,
        flow=r.flow,
        traceback=r.traceback,
        failures=parse_failures(r.failures),
        wait_key=r.wait_key,
        wait_step=r.wait_step,
    )


def parse_failures(text: str | None) -> tuple[Failure, ...]:
    """The row's attempt log (lua/lib/note_failure.lua) as Failures, oldest
    first; a line edited out of shape is skipped, never an error."""
    out: list[Failure] = []
    for line in (text or "").split("\n"):
        parts = line.split(" ", 5)
        if len(parts) < 5 or not parts[0].isdigit() or not parts[2].isdigit():
            continue
        claimed = int(parts[1]) if parts[1].isdigit() else None
        out.append(
            Failure(
                attempt=int(parts[0]),
                claimed_at=None if claimed is None else claimed / 1000.0,
                failed_at=int(parts[2]) / 1000.0,
                to=parts[3],
                worker=None if parts[4] == "-" else parts[4],
                error=parts[5] if len(parts) > 5 else "",
            )
        )
    return tuple(out)


def stream_entries(reply: Any) -> list[tuple[str, Any]]:
    """XREAD's reply of one stream as (entry id, fields): RESP2 gives
    ``[[name, entries]]``, RESP3 ``{name: [entries]}``; None when it timed out."""
    if not reply:
        return []
    if isinstance(reply, dict):
        (entries,) = reply.values()
        if entries and isinstance(entries[0], list) and isinstance(entries[0][0], tuple | list):
            entries = entries[0]  # one more level of nesting
    else:
        entries = reply[0][1]
    return [(as_text(entry_id), fields) for entry_id, fields in entries]
