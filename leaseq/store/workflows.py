"""Workflows: a whole graph of jobs in one script call (``enqueue_flow``, all or
nothing), and what a handler or an operator reads of the graph: results, a
job's parents' results, its children.

Dependencies themselves are job options (``depends_on=``, ``on_parent_failure=``
on ``enqueue``/``enqueue_many``, ``leaseq.JobOptions``: ``leaseq.store.parents``);
a job's release, cancellation and pinning happen inside the scripts that finish
its parents (``lua/lib/job_finished.lua``). docs/workflows.md has the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument
from leaseq.observe.tracing import check_traceparent
from leaseq.store.enqueue import enqueue_traced, option_args
from leaseq.store.keys import check_job_id, new_job_ids
from leaseq.store.parents import Head, check_parents, check_policy, flow_call, option_profile
from leaseq.store.reads import parse_job
from leaseq.store.replies import as_text
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Command, Op, read_rows
from leaseq.types import GONE, Job, JobOptions, Lease, State, Step

__all__ = [
    "MAX_FLOW_STEPS",
    "check_flow_name",
    "check_steps",
    "children",
    "enqueue_flow",
    "flow_calls",
    "parent_results",
    "results",
]

MAX_FLOW_STEPS = 100_000
"""Most steps one ``enqueue_flow`` call takes: one script call, all or nothing."""


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


def check_flow_name(flow: object) -> str:
    """A flow name: the job-id rules (it is stored in every row of the flow)."""
    return check_job_id(flow, "flow name")


def flow_calls(
    queue: QueueSettings, steps: Sequence[Step], traceparent: str = "", flow: str | None = None
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
    encode = queue.codec.encode
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
        head = _step_profile(queue, step, heads)
        queue.check_calls(step.kind, (step.payload,))  # a typed task's call must fit it
        number = profiles.setdefault(head, len(profiles) + 1)
        body += (job_ids[n], encode(step.payload), number, " ".join(parents))
    tail: list[str | bytes | int] = [value for head in profiles for value in head]
    name = new_job_ids(1)[0] if flow is None else flow
    numbered = any(step.id is not None for step in steps)
    return job_ids, [
        flow_call(
            queue, tail + body, len(profiles), traceparent, name, dedup=False, numbered=numbered
        )
    ]


def enqueue_flow(
    queue: QueueSettings, steps: Sequence[Step], *, flow: str | None = None
) -> Op[list[str]]:
    """Enqueue a whole workflow in one script call, all or nothing; return the ids in order.

    Each ``leaseq.Step`` carries a payload, an id (None: a fresh one) and job
    options; its ``depends_on`` names earlier steps of this call or jobs that
    already exist. Raises before anything is written: InvalidArgument for a
    bad step, a repeated id, a step naming itself or a later step, or an id
    already in use; JobNotFound for a parent that does not exist. ``flow``
    names the workflow (stored in every row as ``flow``; default: a fresh
    name); calling again with the same name and steps is a replay that
    creates nothing. docs/workflows.md.
    """
    name = None if flow is None else check_flow_name(flow)
    ids = yield from enqueue_traced(queue.name, True, lambda tp: flow_calls(queue, steps, tp, name))
    return ids


def _step_profile(queue: QueueSettings, step: Step, heads: dict[tuple[Any, ...], Head]) -> Head:
    """A step's checked options in the script's profile order; ``heads`` keeps
    those already checked by the options as given, so each set is checked once."""
    given = (
        step.max_attempts,
        step.delay,
        step.priority,
        step.group,
        step.kind,
        step.timeout,
        step.on_parent_failure,
        step.cost,
        step.expires,
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
            "cost": step.cost,
            "expires": step.expires,
        }
        head = option_profile(
            option_args(queue, options, "enqueue_flow"),
            check_policy(step.on_parent_failure),
        )
        heads[given] = head
    return head


def results(queue: QueueSettings, ids: Sequence[str]) -> Op[list[Any]]:
    """The results of the jobs ``ids``, in order (pipelines of 1,000 rows): a job's ``result``
    once it succeeded (None if it returned None), None while it has not
    finished or when it ended dead or cancelled, and ``leaseq.GONE`` where no
    row has the id (never enqueued, deleted, or its retention passed)."""
    if isinstance(ids, (str, bytes)):
        raise InvalidArgument(f"results takes a list of job ids, not {ids!r}")
    names = [check_job_id(i) for i in ids]
    if not names:
        return []
    rows = yield from read_rows([queue.keys.job(name) for name in names])
    out: list[Any] = []
    for name, raw in zip(names, rows, strict=True):
        if isinstance(raw, Exception):
            raise DamagedRow(name, "<key>", None, "not a hash")
        job = parse_job(queue, name, raw)
        if job is None:
            out.append(GONE)
        else:
            out.append(job.result if job.state is State.SUCCEEDED else None)
    return out


def parent_results(queue: QueueSettings, lease: Lease | Job) -> Op[list[Any]]:
    """The results of a job's parents, in its ``depends_on`` order (see ``results``).
    While a job is unfinished its parents' rows are kept (pinned), so each
    parent that succeeded has its result here. InvalidArgument for a job of
    another queue (its parents are in its own queue)."""
    if lease.queue != queue.name:
        raise InvalidArgument(
            f"job {lease.id!r} is of queue {lease.queue!r}, not {queue.name!r}: "
            "read its parents' results on its own queue"
        )
    return (yield from results(queue, list(lease.depends_on)))


def children(queue: QueueSettings, job_id: str) -> Op[list[str]]:
    """The ids of the children still waiting for ``job_id`` to settle them (sorted):
    before it finishes, and after, until its last ones are settled (over 1,000)."""
    members = yield Command("smembers", (queue.keys.graph(check_job_id(job_id)),))
    return sorted(as_text(m) for m in members)
