"""The issue 9 operator runs and clock reset on leaseq.aio, driven by the
same sans-I/O generators as the sync queue (``leaseq.store.admin``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import leaseq
import leaseq.aio
from tests.support.backends import async_client


def test_aio_retry_all_dead_purge_and_reset_clock(r: Any) -> None:
    async def scenario() -> None:
        q = leaseq.aio.Queue("emails", redis=async_client(r), keep_succeeded=0)
        ids = await q.enqueue_many(range(5), ids=[f"j{i}" for i in range(5)])
        for lease in await q.claim_many(5):
            await q.fail(lease, "boom", dead=True)
        r.set(q.keys.job("not-a-hash"), "x")
        r.zadd(q.keys.dead, {"not-a-hash": 1})
        damaged: list[leaseq.DamagedRow] = []
        assert await q.retry_all_dead(damaged=damaged) == 5
        assert [d.job_id for d in damaged] == ["not-a-hash"]
        assert (await q.stats()).pending == 5
        damaged.clear()
        assert await q.purge("pending") == 5
        assert await q.purge("dead", damaged=damaged) == 0
        assert [d.job_id for d in damaged] == ["not-a-hash"]
        floor, now = await q.reset_clock()
        assert floor is not None and now > 0
        assert len(ids) == 5

    asyncio.run(scenario())
