"""Pausing a queue: a flag every claim checks (``lua/pause.lua``), cleared with a
wake-up of blocked claimers (``lua/resume.lua``)."""

from __future__ import annotations

from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = ["pause", "pause_call", "resume", "resume_call"]


def pause_call(queue: QueueSettings) -> Call[bool]:
    """Set the queue's paused flag: claims lease nothing until ``resume``.
    The call's reply is True when it paused now, False when already paused."""
    return SCRIPTS["pause"].call(queue.keys, lambda r: int(r[0]) == 1)


def resume_call(queue: QueueSettings) -> Call[bool]:
    """Clear the paused flag and wake blocked claimers; True when it was paused."""
    return SCRIPTS["resume"].call(queue.keys, lambda r: int(r[0]) == 1)


def pause(queue: QueueSettings) -> Op[bool]:
    """Stop handing out jobs, for every worker at once (the claim script checks
    the flag). Enqueue still works; leases in flight finish. True if paused now,
    False if it already was."""
    paused: bool = yield pause_call(queue)
    return paused


def resume(queue: QueueSettings) -> Op[bool]:
    """Hand out jobs again and wake blocked claimers. True if it was paused."""
    resumed: bool = yield resume_call(queue)
    return resumed
