"""The workflow operations, written once without I/O: flows, parents' results, children.

Dependencies themselves are job options (``depends_on=``, ``on_parent_failure=``
on ``enqueue``/``enqueue_many``, ``leaseq.JobOptions``); a job's release,
cancellation and pinning happen inside the scripts that finish its parents
(``lua/lib/job_finished.lua``). ``FlowOps`` is the third part of
``leaseq.store.ops.QueueOps``: a whole workflow in one call, and what a handler
or an operator reads of the graph. docs/workflows.md has the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument
from leaseq.store.core import QueueCore
from leaseq.store.keys import QueueKeys, check_job_id
from leaseq.store.produce import enqueue_traced
from leaseq.store.replies import as_text
from leaseq.store.steps import Command, Op, Rows
from leaseq.types import Job, Lease, State, Step

__all__ = ["FlowOps", "check_flow_name"]


def check_flow_name(flow: object) -> str:
    """A flow name: the job-id rules (it is stored in every row of the flow)."""
    return check_job_id(flow, "flow name")


class FlowOps:
    """The workflow operations of one queue (or one shard), over its ``QueueCore``."""

    core: QueueCore
    keys: QueueKeys

    def enqueue_flow(self, steps: Sequence[Step], *, flow: str | None = None) -> Op[list[str]]:
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
        core = self.core
        name = None if flow is None else check_flow_name(flow)
        ids = yield from enqueue_traced(
            core.name, True, lambda tp: core.flow_calls(steps, tp, name)
        )
        return ids

    def results(self, ids: Sequence[str]) -> Op[list[Any]]:
        """The results of the jobs ``ids``, in order (one pipeline): a job's ``result``
        once it succeeded, else None (not finished, failed, or its row gone)."""
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument(f"results takes a list of job ids, not {ids!r}")
        names = [check_job_id(i) for i in ids]
        if not names:
            return []
        rows = yield Rows([self.keys.job(name) for name in names])
        out: list[Any] = []
        for name, raw in zip(names, rows, strict=True):
            if isinstance(raw, Exception):
                raise DamagedRow(name, "<key>", None, "not a hash")
            job = self.core.parse_job(name, raw)
            out.append(job.result if job is not None and job.state is State.SUCCEEDED else None)
        return out

    def parent_results(self, lease: Lease | Job) -> Op[list[Any]]:
        """The results of a job's parents, in its ``depends_on`` order (see ``results``).
        While a job is unfinished its parents' rows are kept (pinned), so each
        parent that succeeded has its result here. InvalidArgument for a job of
        another queue (its parents are in its own queue)."""
        if lease.queue != self.core.name:
            raise InvalidArgument(
                f"job {lease.id!r} is of queue {lease.queue!r}, not {self.core.name!r}: "
                "read its parents' results on its own queue"
            )
        return (yield from self.results(list(lease.depends_on)))

    def children(self, job_id: str) -> Op[list[str]]:
        """The ids of the children still waiting for ``job_id`` to settle them (sorted):
        before it finishes, and after, until its last ones are settled (over 1,000)."""
        members = yield Command("smembers", (self.keys.graph(check_job_id(job_id)),))
        return sorted(as_text(m) for m in members)
