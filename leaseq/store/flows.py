"""Enqueue with parents: the calls of ``enqueue_flow.lua``, validated before any is made.

``FlowCalls`` builds the calls of ``enqueue(..., depends_on=)``,
``enqueue_many(..., depends_on=)`` (every item the same parents: a fan-out,
one call per 1,000 jobs) and ``enqueue_flow`` (a whole graph in one call, all
or nothing). The script takes the distinct option sets of a call once, as
*profiles*, and four values per step (id, payload, profile, parents), so a
10,000-step flow sends 40,000 values, not 100,000. docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument, JobNotFound, ScriptError
from leaseq.observe.tracing import check_traceparent
from leaseq.store.keys import check_job_id, new_job_ids
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call
from leaseq.types import JobOptions, Step

__all__ = [
    "MAX_FLOW_STEPS",
    "MAX_PARENTS",
    "FlowCalls",
    "check_parents",
    "check_policy",
    "check_steps",
]

MAX_FLOW_STEPS = 100_000
"""Most steps one ``enqueue_flow`` call takes: one script call, all or nothing."""
MAX_PARENTS = 100_000
"""Most parents one job may name (a fan-in)."""
CHUNK = 1000
"""Jobs per call of an ``enqueue_many`` with parents (as for plain enqueues)."""
MAX_EDGES = 20_000
"""Most parent-child edges one call of an ``enqueue_many`` with parents writes
(200 children of 10,000 parents each: one child a call)."""

Head = tuple[Any, ...]
"""A step's checked options in the script's profile order: max_attempts,
delay_ms, priority, group, kind, timeout_ms, on_parent_failure."""


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


def check_steps(steps: object) -> list[Step]:
    """``enqueue_flow``'s steps as a list: a sequence of at most MAX_FLOW_STEPS
    ``leaseq.Step`` (InvalidArgument naming the first that is not)."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise InvalidArgument(f"enqueue_flow takes a list of leaseq.Step, not {steps!r}")
    if len(steps) > MAX_FLOW_STEPS:
        raise InvalidArgument(
            f"enqueue_flow takes at most {MAX_FLOW_STEPS} steps, not {len(steps)}"
        )
    for n, step in enumerate(steps):
        if not isinstance(step, Step):
            raise InvalidArgument(f"step {n} is {type(step).__name__}, not a leaseq.Step")
    return list(steps)


def check_policy(value: object) -> str:
    """``on_parent_failure``: ``"cancel"`` or ``"run"``."""
    if value not in ("cancel", "run"):
        raise InvalidArgument(f'on_parent_failure must be "cancel" or "run", not {value!r}')
    return str(value)


class FlowCalls(QueueSettings):
    """The calls that enqueue jobs with parents (mixed into ``QueueCore``)."""

    def option_args(self, options: JobOptions, caller: str) -> dict[str, Any]:
        raise NotImplementedError  # EnqueueCalls gives it: the one check of job options

    def dependent_calls(
        self,
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
        profile = _profile(head, policy)
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
            calls.append(self._flow_call(tail, 1, traceparent, "", dedup=True, numbered=numbered))
        return calls

    def flow_calls(
        self, steps: Sequence[Step], traceparent: str = "", flow: str | None = None
    ) -> tuple[list[str], list[Call[list[int | str]]]]:
        """The ids and the one script call that enqueue a workflow (``enqueue_flow``);
        ``flow``: its name, stored in every row (None: a fresh one).

        Every step is validated and encoded here: a bad payload or option, a
        repeated id, a step naming itself or a later step raise before any call;
        the script refuses the whole call, writing nothing, when a parent does
        not exist or a step's id is taken (``JobNotFound``, ``InvalidArgument``).
        """
        steps = check_steps(steps)
        if not steps:
            return [], []
        fresh = iter(new_job_ids(sum(1 for step in steps if step.id is None)))
        job_ids = [next(fresh) if step.id is None else check_job_id(step.id) for step in steps]
        seen: dict[str, int] = {}
        for n, job_id in enumerate(job_ids):
            if job_id in seen:
                raise InvalidArgument(f"steps {seen[job_id]} and {n} have the same id {job_id!r}")
            seen[job_id] = n
        encode = self.codec.encode
        traceparent = traceparent and check_traceparent(traceparent)
        profiles: dict[Head, int] = {}  # checked options -> their number (1-based)
        heads: dict[tuple[Any, ...], Head] = {}  # options as given -> checked
        body: list[str | bytes | int] = []
        for n, step in enumerate(steps):
            parents = check_parents(step.depends_on, (job_ids[n],)) or []
            for parent in parents:
                if seen.get(parent, -1) > n:
                    raise InvalidArgument(
                        f"step {n} ({job_ids[n]!r}) depends on {parent!r}, a later step: "
                        "list every step after its parents"
                    )
            given = (
                step.max_attempts,
                step.delay,
                step.priority,
                step.group,
                step.kind,
                step.timeout,
                step.on_parent_failure,
            )
            head = heads.get(given)
            if head is None:
                options: JobOptions = {
                    "max_attempts": step.max_attempts,
                    "delay": step.delay,
                    "priority": step.priority,
                    "group": step.group,
                    "kind": step.kind,
                    "timeout": step.timeout,
                }
                head = _profile(
                    self.option_args(options, "enqueue_flow"), check_policy(step.on_parent_failure)
                )
                heads[given] = head
            number = profiles.setdefault(head, len(profiles) + 1)
            body += (job_ids[n], encode(step.payload), number, " ".join(parents))
        tail: list[str | bytes | int] = [value for head in profiles for value in head]
        name = new_job_ids(1)[0] if flow is None else flow
        numbered = any(step.id is not None for step in steps)
        return job_ids, [
            self._flow_call(
                tail + body, len(profiles), traceparent, name, dedup=False, numbered=numbered
            )
        ]

    def _flow_call(
        self,
        tail: list[str | bytes | int],
        profiles: int,
        traceparent: str,
        flow: str,
        *,
        dedup: bool,
        numbered: bool,
    ) -> Call[list[int | str]]:
        return SCRIPTS["enqueue_flow"].call(
            self.keys,
            _flow_reply,
            arg_tail=tail,
            traceparent=traceparent,
            flow=flow,
            dedup=1 if dedup else 0,
            profiles=profiles,
            numbered=1 if numbered else 0,
        )


def _profile(head: dict[str, Any], policy: str) -> Head:
    """A step's options in the script's profile order (enqueue_flow.lua's header)."""
    return (
        head["max_attempts"],
        head["delay_ms"],
        head["priority"],
        head["group"],
        head["kind"],
        head["timeout_ms"],
        policy,
    )


def _flow_reply(reply: list[Any]) -> list[int | str]:
    """enqueue_flow.lua's answer: created flags, or the refusal as an exception."""
    if reply and isinstance(reply[0], (bytes, str)):
        code = as_text(reply[0])
        if code == "GONE":
            raise JobNotFound(as_text(reply[1]))
        if code == "USED":
            raise InvalidArgument(
                f"step id {as_text(reply[1])!r} is already in use: nothing was enqueued"
            )
        if code == "DAMAGED":
            why = as_text(reply[2])
            raise DamagedRow(as_text(reply[1]), "<key>" if "hash" in why else "state", None, why)
        raise ScriptError(f"enqueue_flow: unexpected reply {reply!r}")
    return [int(x) for x in reply]  # 1 created, 0 left alone (an id, or a replay)
