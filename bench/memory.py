"""Where a job's bytes go in Redis, key by key, and the floor of this design.

``python -m bench.memory [--jobs N]`` enqueues N jobs (``{"i": n}``) with
the queue's defaults on a throwaway redis-server, and prints per job:

- the ``used_memory`` delta over N pending jobs enqueued one by one, and in
  batches (``enqueue_many``);
- the same split by key (``MEMORY USAGE ... SAMPLES 0``): the median row, the
  pending index, the event stream, the rest; what is left of the delta is
  Redis's own tables (the keyspace's and the index's hash buckets);
- after a drain (claim_many + complete_many), per job: what stays with
  ``keep_succeeded_count`` at its default (the newest rows kept, their
  index, the event and done streams);
- the floor of the design, measured the same way with plain commands: a
  hash holding only the contract's five fields under the same key and id
  length, plus its ``ZADD`` to a pending sorted set — what any queue that
  keeps one hash and one sorted-set entry per job pays on this server.

Never run by the tests. Bytes do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import leaseq
from bench.guard import used
from bench.server import Server


def per_job(r: Any, n: int, fill: Callable[[], object]) -> float:
    before = used(r)
    fill()
    return (used(r) - before) / n


def shown(parts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))


def split(r: Any, q: leaseq.Queue, n: int) -> dict[str, float]:
    """Bytes per job by key (MEMORY USAGE), for the queue's keys as they are."""
    rows = [k for k in r.scan_iter(match=q.keys.job("*"), count=1000)]
    sample = rows[:: max(1, len(rows) // 200)]
    out = {"rows": statistics.median(r.memory_usage(k, samples=0) for k in sample) * len(rows) / n}
    for key in r.scan_iter(match=q.keys.stem + "*", count=1000):
        if key.startswith(q.keys.job("").encode()):
            continue
        name = key.decode()[len(q.keys.stem) :]
        name = name.split(":")[0]  # the history buckets as one
        out[name] = out.get(name, 0.0) + (r.memory_usage(key, samples=0) or 0) / n
    return out


def floor(r: Any, n: int, id_len: int) -> float:
    """Bytes per job of a hash with the contract's fields plus a pending ZADD."""
    r.flushall()

    def fill() -> None:
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            job_id = os.urandom(16).hex()[:id_len]
            pipe.hset(f"leaseq:{{bench}}:job:{job_id}", mapping={
                "state": "pending", "attempts": 0, "max_attempts": 5,
                "payload": f'{{"i":{i}}}', "enqueued_at": 1_796_000_000_000,
            })  # fmt: skip
            pipe.zadd("leaseq:{bench}:pending", {job_id: i})
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()

    return per_job(r, n, fill)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory")
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args(argv)
    n = args.jobs
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r)
        items = [{"i": i} for i in range(n)]
        print(f"{n} jobs {{'i': n}}, queue defaults; bytes per job")
        for how, fill in (
            ("one by one", lambda: [q.enqueue(item) for item in items]),
            ("enqueue_many", lambda: q.enqueue_many(items)),
        ):
            r.flushall()
            q.enqueue(-1)
            q.complete(q.claim())  # type: ignore[arg-type]
            total = per_job(r, n, fill)
            parts = split(r, q, n)
            print(f"pending, {how:<12} {total:6.1f}  ({shown(parts)}; Redis's tables "
                  f"{total - sum(parts.values()):.1f})")  # fmt: skip
            if how == "enqueue_many":
                base = used(r) - total * n
                while leases := q.claim_many(1000, ttl=60.0):
                    q.complete_many(leases)
                done = (used(r) - base) / n
                parts = split(r, q, n)
                print(f"finished (keep_succeeded_count default) {done:6.1f}  ({shown(parts)})")
        for id_len in (20, 8):
            size = floor(r, n, id_len)
            print(f"floor: contract fields only + one ZADD, {id_len}-char ids  {size:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
