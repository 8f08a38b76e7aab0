"""``QueueCore``: a queue's settings and every script call it builds, without I/O.

``QueueCore`` turns each operation into a ``Call``: the script, its KEYS and
ARGV, and a function that parses the reply (refusals become exceptions in
``leaseq.store.replies``). Its parts live by concern: ``settings`` (what the
queue was made with), ``produce`` (enqueue), ``leases`` (claim to complete),
``admin`` (operator calls) and ``reads`` (stats and rows). ``leaseq.Queue``
runs the calls on ``redis.Redis`` and ``leaseq.aio.Queue`` awaits them on
``redis.asyncio``; the logic exists once, here.
"""

from __future__ import annotations

from leaseq.store.admin import AdminCalls
from leaseq.store.leases import LeaseCalls
from leaseq.store.produce import EnqueueCalls
from leaseq.store.reads import ReadCalls

__all__ = ["QueueCore"]


class QueueCore(EnqueueCalls, LeaseCalls, AdminCalls, ReadCalls):
    """A queue's settings, keys and codec; builds every Call. No I/O."""
