"""leaseq: a job store on Redis built on leases and attempts.

Each job is one Redis hash; every state change is one Lua script stamped
by the server's clock; ``attempts`` is the fencing token. See README.md
and docs/design.md.
"""

from .errors import (
    AlreadyFinished,
    DamagedKey,
    DamagedRow,
    InvalidArgument,
    InvalidName,
    InvalidPayload,
    JobNotFound,
    JobStateError,
    LeaseLost,
    LeaseqError,
    LeaseqWarning,
    PayloadTooLarge,
    ScriptError,
    ServerUnavailable,
)
from .keys import QueueKeys
from .queue import Queue
from .types import Backoff, Job, Lease, State, Stats

__all__ = [
    "AlreadyFinished",
    "Backoff",
    "DamagedKey",
    "DamagedRow",
    "InvalidArgument",
    "InvalidName",
    "InvalidPayload",
    "Job",
    "JobNotFound",
    "JobStateError",
    "Lease",
    "LeaseLost",
    "LeaseqError",
    "LeaseqWarning",
    "PayloadTooLarge",
    "Queue",
    "QueueKeys",
    "ScriptError",
    "ServerUnavailable",
    "State",
    "Stats",
]

__version__ = "0.1.0"
