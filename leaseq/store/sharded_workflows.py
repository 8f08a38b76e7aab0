"""The workflow operations of a sharded queue: placing a workflow on one shard.

A dependency is settled inside the scripts that finish the parent, so a job and
its parents must live in one shard (one hash slot). A job's shard is the CRC32
of its id, so leaseq places a workflow by its ids: ids it makes for a job with
parents land on the parents' shard, and ``enqueue_flow(..., flow=name)`` puts a
flow whose steps have no ids of their own on the shard of ``name``. An explicit
id or a parent on another shard is refused with InvalidArgument before
anything is written (docs/workflows.md, "Sharded queues").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from leaseq.errors import InvalidArgument
from leaseq.store.keys import check_job_id, new_job_ids, shard_of
from leaseq.store.queue_ops import QueueOps
from leaseq.store.steps import Op
from leaseq.store.workflows import check_flow_name, check_steps
from leaseq.types import Job, JobOptions, Lease, Step

__all__ = ["ShardedWorkflows", "ids_on_shard"]


def ids_on_shard(n: int, shard: int, shards: int) -> list[str]:
    """``n`` fresh job ids whose shard is ``shard`` (about ``shards`` draws each)."""
    out: list[str] = []
    while len(out) < n:
        out += [i for i in new_job_ids(max(64, 2 * shards)) if shard_of(i, shards) == shard]
    return out[:n]


class ShardedWorkflows:
    """Workflows over a sharded queue's ``QueueOps``, and where its jobs go
    (``place``). ``ShardedOps`` is given one and names its operations."""

    def __init__(self, shards: Sequence[QueueOps]) -> None:
        self.shards = tuple(shards)

    def shard_for(self, job_id: str) -> QueueOps:
        """The shard that holds (or would hold) ``job_id``."""
        return self.shards[shard_of(check_job_id(job_id), len(self.shards))]

    def _shard_of_all(self, ids: Iterable[str], what: str) -> int | None:
        """The one shard of ``ids`` (None for none); InvalidArgument when they differ."""
        n = len(self.shards)
        where = {i: shard_of(check_job_id(i), n) for i in ids}
        found = set(where.values())
        if len(found) > 1:
            shown = ", ".join(f"{i!r} on shard {s}" for i, s in sorted(where.items())[:4])
            raise InvalidArgument(
                f"{what} span shards ({shown}): a job and its parents must share a shard; "
                "leave the ids out and leaseq places them, or use enqueue_flow(..., flow=name)"
            )
        return found.pop() if found else None

    def place(self, ids: Sequence[str | None], options: JobOptions) -> list[str]:
        """The ids of an enqueue: made where missing, on the parents' shard when the
        jobs have parents (InvalidArgument for a given id or parent elsewhere)."""
        parents = options.get("depends_on")
        if not parents or isinstance(parents, (str, bytes)):
            fresh = iter(new_job_ids(sum(1 for i in ids if i is None)))
            return [next(fresh) if i is None else i for i in ids]
        shard = self._shard_of_all([*parents, *(i for i in ids if i is not None)], "the jobs")
        assert shard is not None
        fresh = iter(ids_on_shard(sum(1 for i in ids if i is None), shard, len(self.shards)))
        return [next(fresh) if i is None else i for i in ids]

    def enqueue_flow(self, steps: Sequence[Step], *, flow: str | None = None) -> Op[list[str]]:
        """As ``Queue.enqueue_flow``, on one shard: that of the steps' given ids and
        outside parents, else of ``flow`` (InvalidArgument when they span shards)."""
        steps = check_steps(steps)
        name = None if flow is None else check_flow_name(flow)
        own = {s.id for s in steps if s.id is not None}
        outside = [p for s in steps for p in s.depends_on if p not in own]
        shard = self._shard_of_all([*own, *outside], "the flow's ids")
        if shard is None:
            shard = (
                shard_of(name, len(self.shards))
                if name
                else shard_of(new_job_ids(1)[0], len(self.shards))
            )
        fresh = iter(ids_on_shard(sum(1 for s in steps if s.id is None), shard, len(self.shards)))
        placed = [
            s if s.id is not None else msgspec.structs.replace(s, id=next(fresh)) for s in steps
        ]
        return (yield from self.shards[shard].enqueue_flow(placed, flow=name))

    def results(self, ids: Sequence[str]) -> Op[list[Any]]:
        """As ``Queue.results``: one pipeline per shard, results in the given order."""
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument(f"results takes a list of job ids, not {ids!r}")
        out: list[Any] = [None] * len(ids)
        by: dict[int, list[int]] = {}
        for pos, job_id in enumerate(ids):
            by.setdefault(shard_of(check_job_id(job_id), len(self.shards)), []).append(pos)
        for index, positions in by.items():
            got = yield from self.shards[index].results([ids[p] for p in positions])
            for p, value in zip(positions, got, strict=True):
                out[p] = value
        return out

    def parent_results(self, lease: Lease | Job) -> Op[list[Any]]:
        """As ``Queue.parent_results``."""
        return (yield from self.results(list(lease.depends_on)))

    def children(self, job_id: str) -> Op[list[str]]:
        """As ``Queue.children``, on the job's shard."""
        return (yield from self.shard_for(job_id).children(job_id))
