"""Cancelling a job that has not finished (``lua/cancel.lua``): its row is kept,
marked cancelled; an active job's lease is lost at once."""

from __future__ import annotations

from typing import Any

from leaseq.store.keys import check_job_id
from leaseq.store.replies import admin_error, as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = ["cancel", "cancel_call"]


def cancel_call(queue: QueueSettings, job_id: str) -> Call[bool]:
    job_id = check_job_id(job_id)

    def parse(reply: list[Any]) -> bool:
        if as_text(reply[0]) != "OK":
            raise admin_error("cancel", job_id, reply)
        return int(reply[1]) == 1

    return SCRIPTS["cancel"].call(
        queue.keys, parse, at={"id": job_id}, id=job_id, keep_ms=queue.keep_ms
    )


def cancel(queue: QueueSettings, job_id: str) -> Op[bool]:
    """Cancel a waiting, pending, scheduled or active job: True if cancelled now,
    False if it already was. An active job's running attempt loses its lease at
    once (its complete, fail and extend raise LeaseLost; its worker learns at its
    next heartbeat and cancels an async handler). A job's waiting children follow
    their ``on_parent_failure``. Raises JobNotFound, or JobStateError once it has
    finished."""
    done: bool = yield cancel_call(queue, job_id)
    return done
