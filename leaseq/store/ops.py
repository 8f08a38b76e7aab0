"""Every queue operation, written once, without I/O.

An operation is a generator: it yields *steps* (a script ``Call``, or one of
the few plain commands below) and receives each step's reply through
``send()``; its return value is the operation's result. A leaseq error
raised by a step is thrown back into the generator at the ``yield``, so an
operation catches what it can step over (a damaged row in ``retry_all_dead``)
exactly as if the call had been made inline.

``QueueOps`` holds one queue's operations; ``leaseq.store.sharded_ops.ShardedOps``
those of a queue spread over hash tags, built from its shards' ``QueueOps``. The public
classes (``leaseq.Queue``, ``leaseq.aio.Queue``, ``leaseq.ShardedQueue``,
``leaseq.aio.ShardedQueue``) only run these generators on their client
(``leaseq.transport.drive``): one implementation of each operation, many
transports. ``leaseq.queue.QueueAPI`` lists them once as public methods, each
typed and documented exactly as written here. The operations live in three
parts: ``job_ops`` (produce, consume, wait, read), ``operator_ops``
(queue-wide: reap, purge, retry, flow control, workers, history, events) and
``flow_ops`` (workflows: a flow in one call, parents' results, children).
"""

from __future__ import annotations

from leaseq.store.core import QueueCore
from leaseq.store.flow_ops import FlowOps
from leaseq.store.job_ops import JobOps
from leaseq.store.keys import QueueKeys
from leaseq.store.operator_ops import OperatorOps
from leaseq.store.replies import as_text
from leaseq.store.steps import Op, Scan

__all__ = ["WAKE_SLICE", "QueueOps", "list_queues"]


WAKE_SLICE = 0.1
"""Longest wait on one shard's wake list while a sharded blocking claim sits idle.

Wake lists of different shards are in different slots, so one BLPOP cannot
watch them all on a cluster: an idle claimer watches one shard at a time
and looks at all of them at least every ``WAKE_SLICE * shards`` seconds."""


def list_queues(prefix: str) -> Op[list[str]]:
    """Names (hash tags) of the queues under ``prefix``: one SCAN for the keys a
    queue keeps besides its job rows (``QueueKeys.queue_pattern``), so a queue
    whose meta hash went is still listed while any index of it is left."""
    keys = yield Scan(QueueKeys.queue_pattern(prefix))
    found = {QueueKeys.queue_of_key(prefix, as_text(key)) for key in keys}
    return sorted(name for name in found if name)


class QueueOps(JobOps, OperatorOps, FlowOps):
    """Every operation of one queue (or one shard), over its ``QueueCore``."""

    def __init__(self, core: QueueCore) -> None:
        self.core = core
        self.keys = core.keys
