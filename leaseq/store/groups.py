"""Fair groups: names, and what the scripts keep per group.

``enqueue(..., group="tenant-42")`` stores the name in the row's ``group``
field; the scripts keep one ready ZSET per group and rotate claims between
the groups that have ready jobs (``lua/lib/rotate_groups.lua``), and
``set_limits(group_concurrency=N)`` caps each group's active leases. The keys
are in ``leaseq/store/keys.py``; the rules are in docs/flow-control.md, "Fair groups".
"""

from __future__ import annotations

from leaseq.errors import InvalidName
from leaseq.store.keys import check_job_id

__all__ = ["check_group"]


def check_group(group: object) -> str:
    """Return ``group`` if it is a valid group name (the rules of a job id), else raise.

    ``None`` means no group and is handled by the callers; an empty string or
    any other type is an error (InvalidName, a ValueError), raised before any write.
    """
    if not isinstance(group, str):
        raise InvalidName(f"group must be a string, not {type(group).__name__}")
    return check_job_id(group, "group")
