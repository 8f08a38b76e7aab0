"""Changing a job that has not started: its payload (``lua/update.lua``), or its
due time, to now (``lua/run_now.lua``)."""

from __future__ import annotations

from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.store.keys import check_job_id
from leaseq.store.replies import admin_error, as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Op

__all__ = ["checked_edit", "run_now", "run_now_call", "update", "update_call"]


def update_call(queue: QueueSettings, job_id: str, payload: Any) -> Call[None]:
    """Replace the payload of a job that has not started (encoded and size-checked
    here, before the call)."""
    job_id = check_job_id(job_id)
    body = queue.codec.encode(payload)

    def parse(reply: list[Any]) -> None:
        if as_text(reply[0]) != "OK":
            raise admin_error("update", job_id, reply)

    return SCRIPTS["update"].call(queue.keys, parse, at={"id": job_id}, id=job_id, payload=body)


def update(queue: QueueSettings, job_id: str, *, payload: Any) -> Op[None]:
    """Replace the payload of a job that has not started (waiting, pending or
    scheduled); the old one goes to the event stream entry of the change.
    Checked as ``enqueue`` checks a payload, before anything is written.
    Raises JobNotFound, JobStateError (active or finished), InvalidPayload,
    PayloadTooLarge, and what a typed task of the job's kind raises for a call
    that does not fit it (``QueueSettings.check_edit``)."""
    call = update_call(queue, job_id, payload)
    yield from checked_edit(queue, job_id, payload)
    yield call


def checked_edit(
    queue: QueueSettings,
    job_id: str,
    payload: Any,
    kind: str | None = None,
    new_payload: bool = True,
) -> Op[None]:
    """Check a new payload of ``job_id`` (``new_payload``) against the typed task
    of its kind, when this process made typed tasks on the queue, and that the
    job is of ``kind`` when one is given (one HGET of the kind; none else)."""
    if queue.tasks or kind is not None:
        raw = yield Command("hget", (queue.keys.job(job_id), "kind"))
        found = None if raw is None else as_text(raw)
        if kind is not None and found is not None and found != kind:
            raise InvalidArgument(f"job {job_id!r} is of kind {found!r}, not {kind!r}")
        if new_payload:
            queue.check_edit(found, payload)


def run_now_call(queue: QueueSettings, job_id: str) -> Call[None]:
    """Move a scheduled job to pending now (its due time dropped). JobNotFound
    for an unknown id, JobStateError for a job that is not scheduled."""
    job_id = check_job_id(job_id)

    def parse(reply: Any) -> None:
        if as_text(reply[0]) != "OK":
            raise admin_error("run_now", job_id, reply)

    return SCRIPTS["run_now"].call(queue.keys, parse, at={"id": job_id}, id=job_id)


def run_now(queue: QueueSettings, job_id: str) -> Op[None]:
    """Make a scheduled job (a delay or a retry's backoff) claimable now.
    Raises JobNotFound, or JobStateError when it is not scheduled."""
    yield run_now_call(queue, job_id)
