"""Calls that steer a whole queue rather than one job: pause, resume, delete.

Each builds a ``Call`` (see ``leaseq.store.core``) from a ``QueueCore``; the sync
and async queues only run it. No I/O here.
"""

from __future__ import annotations

from typing import Any

from leaseq.store.core import QueueCore
from leaseq.store.keys import check_job_id
from leaseq.store.replies import admin_error, as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.steps import Call

__all__ = ["DROP_LIMIT", "delete", "drop", "pause", "resume", "run_now"]

DROP_LIMIT = 1000
"""Most jobs one drop call deletes, so no call blocks the server for long."""


def pause(core: QueueCore) -> Call[bool]:
    """Set the queue's paused flag: claims lease nothing until ``resume``.
    The call's reply is True when it paused now, False when already paused."""
    return SCRIPTS["pause"].call(core.keys, lambda r: int(r[0]) == 1)


def resume(core: QueueCore) -> Call[bool]:
    """Clear the paused flag and wake blocked claimers; True when it was paused."""
    return SCRIPTS["resume"].call(core.keys, lambda r: int(r[0]) == 1)


def delete(core: QueueCore, job_id: str) -> Call[str]:
    """Delete one job row and its index entry, whatever its state but active.

    The reply is the state the job was in. JobNotFound for an unknown id,
    JobStateError for an active job (its lease is held: cancel is not
    possible either; let it finish or expire).
    """
    job_id = check_job_id(job_id)
    k = core.keys

    def parse(reply: Any) -> str:
        if as_text(reply[0]) != "OK":
            raise admin_error("delete", job_id, reply)
        return as_text(reply[1])

    return SCRIPTS["delete"].call(k, parse, at={"id": job_id}, id=job_id)


def drop(core: QueueCore, force: bool, limit: int = DROP_LIMIT) -> Call[tuple[int, int]]:
    """One step of deleting the whole queue: ``(rows deleted, jobs remaining)``.

    Run it until nothing remains; the queue is paused from the first call
    on, and its meta hash (counters, the flag) goes with the last job.
    Without ``force`` a queue with leases in flight is refused (JobStateError
    naming how many), before anything is written.
    """
    k = core.keys

    def parse(reply: Any) -> tuple[int, int]:
        if as_text(reply[0]) != "OK":
            raise admin_error("drop", f"(queue {core.name})", reply)
        return int(reply[1]), int(reply[2])

    return SCRIPTS["drop"].call(k, parse, limit=limit, force=1 if force else 0)


def run_now(core: QueueCore, job_id: str) -> Call[None]:
    """Move a scheduled job to pending now (its due time dropped). JobNotFound
    for an unknown id, JobStateError for a job that is not scheduled."""
    job_id = check_job_id(job_id)
    k = core.keys

    def parse(reply: Any) -> None:
        if as_text(reply[0]) != "OK":
            raise admin_error("run_now", job_id, reply)

    return SCRIPTS["run_now"].call(k, parse, at={"id": job_id}, id=job_id)
