"""Enqueue with parents: the ``depends_on`` checks and the calls of
``enqueue_flow.lua``, which writes a job with its parents' edges.

The script takes the distinct option sets of a call once, as *profiles*, and
four values per job (id, payload, profile, parents), so a 10,000-step flow
sends 40,000 values, not 100,000. ``enqueue(..., depends_on=)`` and
``enqueue_many(..., depends_on=)`` (every item the same parents: a fan-out,
one call per 1,000 jobs) send ``dependent_calls``; a whole graph is
``leaseq.store.workflows``. docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument, JobNotFound, ScriptError
from leaseq.store.keys import check_job_id
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call

__all__ = [
    "MAX_PARENTS",
    "Head",
    "check_parents",
    "check_policy",
    "dependent_calls",
    "flow_call",
    "option_profile",
]

MAX_PARENTS = 100_000
"""Most parents one job may name (a fan-in)."""
CHUNK = 1000
"""Jobs per call of an ``enqueue_many`` with parents (as for plain enqueues)."""
MAX_EDGES = 20_000
"""Most parent-child edges one call of an ``enqueue_many`` with parents writes
(200 children of 10,000 parents each: one child a call)."""

Head = tuple[Any, ...]
"""A step's checked options in the script's profile order: max_attempts,
delay_ms, priority, group, kind, timeout_ms, on_parent_failure, cost, expires."""


def check_parents(depends_on: object, children: Sequence[str]) -> list[str] | None:
    """``depends_on`` as a list of distinct ids in the order given (None for none).

    A single string is refused (it would read as its characters), and so is a
    job that names itself: a job never depends on itself, and since a parent
    must exist before its child, no cycle can be built.
    """
    if depends_on is None:
        return None
    if isinstance(depends_on, (str, bytes)) or not isinstance(
        depends_on, Sequence | set | frozenset
    ):
        raise InvalidArgument(f"depends_on must be a list of job ids, not {depends_on!r}")
    parents = list(dict.fromkeys(depends_on))
    for parent in parents:
        check_job_id(parent, "parent id")
    if len(parents) > MAX_PARENTS:
        raise InvalidArgument(f"a job may depend on at most {MAX_PARENTS} jobs, not {len(parents)}")
    mine = set(parents).intersection(children)
    if mine:
        raise InvalidArgument(f"job {min(mine)!r} cannot depend on itself")
    return parents or None


def check_policy(value: object) -> str:
    """``on_parent_failure``: ``"cancel"`` or ``"run"``."""
    if value not in ("cancel", "run"):
        raise InvalidArgument(f'on_parent_failure must be "cancel" or "run", not {value!r}')
    return str(value)


def dependent_calls(
    queue: QueueSettings,
    job_ids: Sequence[str],
    payloads: Sequence[bytes],
    head: dict[str, Any],
    policy: str,
    parents: Sequence[str],
    traceparent: str,
    chosen: Sequence[bool],
) -> list[Call[list[int | str]]]:
    """The calls of an enqueue whose jobs all have ``parents`` (checked by the
    caller): one call per CHUNK jobs; an id that exists is left alone.
    ``chosen``: per job, whether its caller chose the id (a chunk holding one
    numbers its rows; lua/lib/row_number.lua)."""
    profile = option_profile(head, policy)
    joined = " ".join(parents)
    calls = []
    # A call writes about one edge per parent per job: bound the edges, not
    # only the jobs, so no call holds the server for long (MAX_EDGES).
    chunk = max(1, min(CHUNK, MAX_EDGES // max(1, len(parents))))
    for start in range(0, len(job_ids), chunk):
        tail: list[str | bytes | int] = [*profile]
        end = min(start + chunk, len(job_ids))
        for i in range(start, end):
            tail += (job_ids[i], payloads[i], 1, joined)
        numbered = any(chosen[start:end])
        calls.append(flow_call(queue, tail, 1, traceparent, "", dedup=True, numbered=numbered))
    return calls


def flow_call(
    queue: QueueSettings,
    tail: list[str | bytes | int],
    profiles: int,
    traceparent: str,
    flow: str,
    *,
    dedup: bool,
    numbered: bool,
) -> Call[list[int | str]]:
    """The call of ``enqueue_flow.lua``: ``tail`` holds the profiles, then four
    values per job (id, payload, profile, parents)."""
    return SCRIPTS["enqueue_flow"].call(
        queue.keys,
        flow_reply,
        arg_tail=tail,
        traceparent=traceparent,
        flow=flow,
        dedup=1 if dedup else 0,
        profiles=profiles,
        numbered=1 if numbered else 0,
    )


def option_profile(head: dict[str, Any], policy: str) -> Head:
    """A step's options in the script's profile order (enqueue_flow.lua's header)."""
    return (
        head["max_attempts"],
        head["delay_ms"],
        head["priority"],
        head["group"],
        head["kind"],
        head["timeout_ms"],
        policy,
        head["cost"],
        head["expires"],
    )


def flow_reply(reply: list[Any]) -> list[int | str]:
    """enqueue_flow.lua's answer: created flags, or the refusal as an exception."""
    if reply and isinstance(reply[0], (bytes, str)):
        code = as_text(reply[0])
        if code == "GONE":
            raise JobNotFound(as_text(reply[1]))
        if code == "COST":
            raise InvalidArgument(f"{as_text(reply[1])}: nothing was enqueued")
        if code == "USED":
            raise InvalidArgument(
                f"step id {as_text(reply[1])!r} is already in use: nothing was enqueued"
            )
        if code == "DAMAGED":
            why = as_text(reply[2])
            raise DamagedRow(as_text(reply[1]), "<key>" if "hash" in why else "state", None, why)
        raise ScriptError(f"enqueue_flow: unexpected reply {reply!r}")
    return [int(x) for x in reply]  # 1 created, 0 left alone (an id, or a replay)
