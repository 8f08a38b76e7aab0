"""leaseq: a job store on Redis built on leases and attempts.

Each job is one Redis hash; every state change is one Lua script stamped
by the server's clock; ``attempts`` is the fencing token. See README.md
and docs/design.md.
"""

from leaseq.errors import (
    AlreadyFinished,
    AuthError,
    DamagedKey,
    DamagedRow,
    HandlerImportError,
    InvalidArgument,
    InvalidName,
    InvalidPayload,
    JobNotFound,
    JobStateError,
    LeaseCapReached,
    LeaseLost,
    LeaseqError,
    LeaseqWarning,
    NotReplicated,
    PayloadTooLarge,
    ScriptError,
    ServerBusy,
    ServerFull,
    ServerUnavailable,
)
from leaseq.handler import Dead, JobContext, Kinds, Retry, UnknownKind, current_job
from leaseq.protocols import AsyncQueueLike, QueueLike
from leaseq.queue import Queue
from leaseq.sharded import ShardedQueue
from leaseq.store.events import Event, EventSettings
from leaseq.store.keys import QueueKeys
from leaseq.store.limits import Limits
from leaseq.store.schedules import Schedule
from leaseq.supervisor import Supervisor
from leaseq.types import Backoff, Failure, Job, Lease, State, Stats
from leaseq.worker import Worker

__all__ = [
    "AlreadyFinished",
    "AsyncQueueLike",
    "AuthError",
    "Backoff",
    "DamagedKey",
    "DamagedRow",
    "Failure",
    "Dead",
    "Event",
    "EventSettings",
    "Kinds",
    "HandlerImportError",
    "InvalidArgument",
    "InvalidName",
    "InvalidPayload",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobStateError",
    "Lease",
    "LeaseCapReached",
    "LeaseLost",
    "LeaseqError",
    "LeaseqWarning",
    "Limits",
    "NotReplicated",
    "PayloadTooLarge",
    "Queue",
    "QueueLike",
    "QueueKeys",
    "Retry",
    "UnknownKind",
    "Schedule",
    "ScriptError",
    "ServerBusy",
    "ServerFull",
    "ServerUnavailable",
    "ShardedQueue",
    "State",
    "Stats",
    "Supervisor",
    "Worker",
    "current_job",
]

__version__ = "0.1.0"
