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
    InvalidTaskArgument,
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
    SignalTimeout,
    TaskFailed,
    WaitTimeout,
)
from leaseq.handler import Dead, JobContext, Kinds, Retry, UnknownKind, current_job
from leaseq.protocols import AsyncQueueLike, QueueLike
from leaseq.queue import Queue
from leaseq.queue_set import QueueSet
from leaseq.sharded import ShardedQueue
from leaseq.store.events import Event, EventSettings
from leaseq.store.keys import QueueKeys
from leaseq.store.limits import GroupLimits, Limits
from leaseq.store.schedules import Schedule
from leaseq.supervisor import Supervisor
from leaseq.types import (
    GONE,
    Backoff,
    Failure,
    Gone,
    Job,
    Lease,
    State,
    Stats,
    Step,
    TimedOut,
    Unique,
)
from leaseq.work.tasks import Task
from leaseq.worker import Worker

__all__ = [
    "AlreadyFinished",
    "AsyncQueueLike",
    "AuthError",
    "Backoff",
    "DamagedKey",
    "DamagedRow",
    "Failure",
    "GONE",
    "Gone",
    "Dead",
    "Event",
    "EventSettings",
    "Kinds",
    "HandlerImportError",
    "InvalidArgument",
    "InvalidName",
    "InvalidPayload",
    "InvalidTaskArgument",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobStateError",
    "Lease",
    "LeaseCapReached",
    "LeaseLost",
    "LeaseqError",
    "LeaseqWarning",
    "GroupLimits",
    "Limits",
    "NotReplicated",
    "PayloadTooLarge",
    "Queue",
    "QueueLike",
    "QueueSet",
    "QueueKeys",
    "Retry",
    "Unique",
    "UnknownKind",
    "Schedule",
    "ScriptError",
    "ServerBusy",
    "ServerFull",
    "ServerUnavailable",
    "ShardedQueue",
    "SignalTimeout",
    "State",
    "Stats",
    "Step",
    "Supervisor",
    "Task",
    "TaskFailed",
    "TimedOut",
    "WaitTimeout",
    "Worker",
    "current_job",
]

__version__ = "0.1.0"
