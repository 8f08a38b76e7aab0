"""Finding queues without KEYS, also when an operator deleted a queue's meta hash.

``redis-cli DEL 'leaseq:{q}:meta'`` must not hide a queue whose jobs and
indexes remain: not from ``Queue.queues``, ``known_queues``, ``leaseq stats``,
the dashboard, nor from the commands that take a queue name. On fakeredis
and a real server.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from typing import Any

import pytest

import leaseq
import leaseq.aio
from leaseq.sharded import known_queues
from leaseq.store.keys import QueueKeys
from tests.support.backends import async_client
from tests.support.cli import Cli

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


from leaseq.web import create_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _lose_meta(r: Any, q: leaseq.Queue) -> None:
    assert r.delete(q.keys.meta) == 1


def test_a_queue_whose_meta_went_is_still_listed(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(3)])
    leaseq.Queue("other", redis=r).enqueue({})
    _lose_meta(r, q)
    assert leaseq.Queue.queues(r) == ["emails", "other"]
    assert known_queues(r) == {"emails": 0, "other": 0}
    s = q.stats()
    assert (s.pending, s.active) == (3, 0)


@pytest.mark.parametrize("state", ["scheduled", "active", "succeeded", "dead", "cancelled"])
def test_any_one_index_is_enough(q: leaseq.Queue, r: Any, state: str) -> None:
    job = q.enqueue({"n": 1}, delay=600 if state == "scheduled" else None)
    if state in ("active", "succeeded", "dead"):
        lease = q.claim(ttl=60.0)
        assert lease is not None
        if state == "succeeded":
            q.complete(lease)
        elif state == "dead":
            q.fail(lease, "boom", dead=True)
    elif state == "cancelled":
        q.cancel(job)
    _lose_meta(r, q)
    assert r.exists(q.keys.index(state))
    assert leaseq.Queue.queues(r) == ["emails"]


def test_schedules_or_limits_alone_keep_a_queue_listed(q: leaseq.Queue, r: Any) -> None:
    q.schedule("beat", {}, every=60)
    leaseq.Queue("capped", redis=r).set_limits(concurrency=2)
    for name in ("emails", "capped"):
        r.delete(QueueKeys("leaseq", name).meta)
    assert leaseq.Queue.queues(r) == ["capped", "emails"]


def test_job_rows_and_history_are_not_read_to_list(q: leaseq.Queue, r: Any) -> None:
    pattern = QueueKeys.queue_pattern("leaseq")
    q.enqueue_many([{"n": i} for i in range(50)], group="g")
    found = {bytes(k).decode() for k in r.scan_iter(match=pattern, count=1000)}
    assert found and not any(
        k.startswith(("leaseq:{emails}:job:", "leaseq:{emails}:history:", "leaseq:{emails}:group"))
        for k in found
    ), found
    assert len(found) <= 10


def test_a_dropped_queue_is_gone(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(3)])
    q.schedule("beat", {}, every=60)
    q.unschedule("beat")
    q.drop()
    assert leaseq.Queue.queues(r) == []


def test_other_keys_under_the_prefix_are_not_queues(r: Any) -> None:
    for key in ("leaseq:{x}", "leaseq:{}:meta", "leaseq:plain", "other:{y}:meta", "leaseq:{z}"):
        r.set(key, "1")
    assert leaseq.Queue.queues(r) == []
    assert QueueKeys.queue_of_key("leaseq", "leaseq:{a:b.c}:pending") == "a:b.c"
    assert QueueKeys.queue_of_key("leaseq", "leaseq:{a#3}:job:x:y") == "a#3"
    assert QueueKeys.queue_of_key("leaseq", "leaseq:{a}pending") is None


def test_work_goes_on_without_meta(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(3)], ids=["a", "b", "c"])
    _lose_meta(r, q)
    lease = q.claim(ttl=60.0)
    assert lease is not None and lease.id == "a"
    q.complete(lease)
    again = q.enqueue({"n": 9}, id="a")  # still deduplicated by its row
    assert again == "a" and q.stats().succeeded == 1
    assert q.enqueue({"n": 4}, id="d") == "d"
    # (the incarnation counter restarts at server ms x 1000: tests/store/test_fencing.py)
    s = q.stats()
    assert (s.pending, s.succeeded) == (3, 1)
    assert s.totals["enqueued"] == 1  # counters restart with the hash (see docs/design.md)


def test_a_sharded_queue_whose_meta_went_is_still_listed(r: Any) -> None:
    sharded = leaseq.ShardedQueue("hot", shards=4, redis=r)
    sharded.enqueue_many([{"i": i} for i in range(40)])
    for shard in sharded.shards:
        r.delete(shard.keys.meta)  # shard 0's meta held the recorded shard count
    assert known_queues(r) == {"hot": 4}  # found by the shards' pending indexes
    assert sum(s.pending for s in sharded.shard_stats()) == 40


def test_a_sharded_queue_still_refuses_a_plain_queue_whose_meta_went(r: Any) -> None:
    plain = leaseq.Queue("mixed", redis=r)
    plain.enqueue({})
    r.delete(plain.keys.meta)
    with pytest.raises(leaseq.InvalidArgument, match="plain queue"):
        leaseq.ShardedQueue("mixed", shards=2, redis=r).enqueue({})


def test_async_queues_lists_it_too(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({})
    _lose_meta(r, q)
    client = async_client(r)

    async def go() -> list[str]:
        try:
            return await leaseq.aio.Queue.queues(client)
        finally:
            await client.aclose()

    assert asyncio.run(go()) == ["emails"]


def test_dashboard_overview_lists_it(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(4)])
    _lose_meta(r, q)
    html = TestClient(create_app(r)).get("/").text
    assert 'data-queue="emails"' in html
    assert re.search(r'data-count="pending">4<', html)


def test_cli_sees_it(cli: Cli) -> None:
    q = cli.queue("mail")
    q.enqueue_many([{"n": i} for i in range(2)], ids=["j1", "j2"])
    q.redis.delete(q.keys.meta)
    code, out, _ = cli("stats", "--json")
    assert code == 0 and json.loads(out)["mail"]["pending"] == 2
    code, out, _ = cli("stats")
    assert code == 0 and "mail" in out
    code, out, _ = cli("ls", "mail")
    assert code == 0 and "j1" in out and "j2" in out
    code, out, _ = cli("show", "mail", "j1")
    assert code == 0 and "pending" in out
    code, out, _ = cli("enqueue", "mail", "{}", "--id", "j3")  # still the plain queue
    assert code == 0 and q.get("j3") is not None
