"""End-to-end jobs/s: one queue (one master) vs a ShardedQueue over 3 masters.

    python -m bench.cluster_bench [--jobs 20000] [--batch 50] [--consumers 2]

Starts its own 3-master Redis Cluster on free loopback ports (tests/support/cluster.py),
then for each layout runs producer and consumer processes at once: producers
``enqueue_many`` in batches, consumers ``claim_many`` + ``complete_many``
until every job succeeded. The rate is jobs / (first enqueue .. last
completion). It also prints where the CPU went (each redis-server's and the
client processes' user+sys seconds), because on a small machine the clients
and the three servers share the same cores and that bounds the ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import time
from typing import Any

import redis.cluster

import leaseq
from tests.support.cluster import Cluster

TICK = os.sysconf("SC_CLK_TCK")


def server_cpu(pids: list[int]) -> list[float]:
    """user+sys CPU seconds of each process so far (Linux /proc)."""
    out = []
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out.append((int(fields[11]) + int(fields[12])) / TICK)
    return out


def make_queue(port: int, shards: int) -> Any:
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=port)
    if shards == 0:
        return leaseq.Queue("bench", redis=client)
    return leaseq.ShardedQueue("bench", shards=shards, redis=client)


def produce(port: int, shards: int, jobs: int, batch: int) -> None:
    q = make_queue(port, shards)
    for start in range(0, jobs, batch):
        q.enqueue_many([{"n": i} for i in range(start, min(jobs, start + batch))])


def consume(port: int, shards: int, batch: int, total: int, done: Any) -> None:
    q = make_queue(port, shards)
    while done.value < total:
        # A short block, not a spin: idle consumers must not steal the cores
        # the producer and the servers need.
        leases = q.claim_many(batch, ttl=60.0, block=0.02)
        if leases:
            q.complete_many(leases)
            with done.get_lock():
                done.value += len(leases)


def run_phase(
    cluster: Cluster,
    pids: list[int],
    shards: int,
    phase: str,
    jobs: int,
    batch: int,
    consumers: int,
) -> dict[str, Any]:
    """One timed phase: 'fill' (producer only), 'drain' (consumers only, on the
    backlog that fill left) or 'e2e' (both at once, from empty)."""
    port = cluster.ports[0]
    if phase != "drain":
        flush = cluster.client()
        flush.flushall()
        flush.close()
    ctx = mp.get_context("fork")
    done = ctx.Value("q", 0)
    procs = []
    if phase in ("fill", "e2e"):
        procs.append(ctx.Process(target=produce, args=(port, shards, jobs, batch)))
    if phase in ("drain", "e2e"):
        procs += [
            ctx.Process(target=consume, args=(port, shards, batch, jobs, done))
            for _ in range(consumers)
        ]
    cpu0 = server_cpu(pids)
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    took = time.perf_counter() - started
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1 = server_cpu(pids)
    stats = make_queue(port, shards).stats()
    got = stats.pending if phase == "fill" else stats.succeeded
    assert got == jobs, f"{phase}: {got} of {jobs} jobs"
    client_cpu = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    return {
        "rate": jobs / took,
        "seconds": took,
        "server_cpu": [round(b - a, 2) for a, b in zip(cpu0, cpu1, strict=True)],
        "client_cpu": round(client_cpu, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=6)
    args = parser.parse_args(argv)
    cluster = Cluster()
    try:
        pids = [p.pid for p in cluster.procs]
        probe = cluster.client()
        shard_nodes = [
            probe.get_node_from_key(s.keys.pending).port
            for s in leaseq.ShardedQueue("bench", shards=args.shards, redis=probe).shards
        ]
        plain_node = probe.get_node_from_key(leaseq.Queue("bench", redis=probe).keys.pending).port
        probe.close()
        print(
            f"cpus={os.cpu_count()} jobs={args.jobs} batch={args.batch} "
            f"consumers={args.consumers} producers=1 masters={cluster.ports}"
        )
        print(f"plain queue on master {plain_node}; shards on masters {shard_nodes}")
        layouts = (("1 queue, 1 master", 0), (f"sharded x{args.shards}", args.shards))
        for phase in ("fill", "drain", "e2e"):
            for label, shards in layouts:
                if phase == "drain":  # drain needs the backlog of this layout's fill
                    run_phase(cluster, pids, shards, "fill", args.jobs, args.batch, 0)
                r = run_phase(cluster, pids, shards, phase, args.jobs, args.batch, args.consumers)
                print(
                    f"{phase:>5} {label:>18}: {r['rate']:8.0f} jobs/s ({r['seconds']:5.2f} s)"
                    f"  server cpu s {r['server_cpu']}  client cpu s {r['client_cpu']}",
                    flush=True,
                )
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
