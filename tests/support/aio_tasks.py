"""Typed tasks declared on a ``leaseq.aio.Queue``, for ``leaseq worker QUEUE
tests.support.aio_tasks --asyncio``: their handlers await the module's own aio
queue, which only works when they run on the loop that queue's client is used
on. The queue's URL comes from ``LEASEQ_TEST_URL`` (a throwaway server's)."""

from __future__ import annotations

import os

import leaseq.aio

queue = leaseq.aio.Queue.from_url(
    os.environ.get("LEASEQ_TEST_URL", "redis://127.0.0.1:1/0"), "aiojobs"
)


@queue.task(name="fan")
async def fan(n: int) -> int:
    """Enqueues ``n`` children through the module's aio queue; returns how many."""
    for i in range(n):
        await leaf.enqueue(i)
    return n


@queue.task(name="leaf")
async def leaf(i: int) -> int:
    return i * 10
