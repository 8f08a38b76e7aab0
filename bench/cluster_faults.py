"""The fault matrix's cluster faults (``python -m bench.faults --only cluster-kill``):
a sharded queue on a Redis Cluster of three masters with one replica each,
a master lost mid-drain, every lease, completion and enqueue recorded for
``bench.histories`` to check.

The cluster runs on free loopback ports (``tests/support/cluster.py``), every
node with a password and ``cluster-node-timeout`` 1 s. ``leaseq.ShardedQueue``
spreads the queue over ``SHARDS`` hash tags, so every master holds some.
Two worker processes drain it, a sync one (threads over
``redis.cluster.RedisCluster``) and an asyncio one (tasks over
``redis.asyncio.cluster.RedisCluster``): each claims, logs the lease (id,
attempt, fence, deadline), then fails it (flaky and poison jobs) or completes
it with a fenced effect (an HINCRBY in the completion script), on a
``durable=1`` view of the queue: a completion is logged as acknowledged only
once the master's replica has it too (``NotReplicated`` otherwise), the
promise ``durable=1`` makes across a failover. A producer enqueues one job a
call, plain and ``durable=1`` in turns, all run long; the driver reads each
shard's clock every 50 ms.

Once a quarter of the backlog is done, the fault, on the master that holds
the most shards:

- ``kill``: its replica's link is cut (it can no longer authenticate), the
  master works on alone for ``CUT`` seconds — claims, completions, plain
  enqueues that its replica never sees — then it is SIGKILLed; the replica
  takes over after the node timeout; the killed master is started again
  (empty, with its ``nodes.conf``) and becomes the new master's replica.
  The claims the master took with it are handed out again by the new master
  at the same attempt, under fences of its own: the run counts them
  (``attempt_reissued``), and fencing must refuse every write their first
  holders make;
- ``failover``: ``CLUSTER FAILOVER`` sent to the replica: the master hands
  over once its replica has caught up (nothing acknowledged is lost) and
  goes on as its replica.

``fixed_fence`` makes every claim of the workers use one fence (what the
token was before fences: the attempt alone), so that a run shows the checker
catching the equal tokens a lost claim then hands out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio.cluster
import redis.cluster

import leaseq
import leaseq.aio
from bench import chaos, histories
from bench.chaos import now_ms
from leaseq.errors import LeaseqError
from leaseq.sharded import merge_stats
from leaseq.store import claim as claim_module
from leaseq.work.outage import Backoff, error_kind
from tests.support.cluster import Cluster

QUEUE = chaos.QUEUE
SHARDS = 6
"""Two shards a master on average (their tags hash where they hash: the
fault picks the master with the most)."""
SETTINGS: dict[str, Any] = {
    "max_attempts": chaos.MAX_ATTEMPTS,
    "backoff": 0.0,
    "keep_succeeded": None,
}
DURABLE: dict[str, Any] = {"durable": 1, "durable_timeout": 0.25}
TTL = 0.5
CUT = 0.5
"""Seconds the killed master works alone before its SIGKILL (``kill``)."""
AFTER = 1.0
"""Seconds the producer goes on once the cluster is whole again."""
THREADS, TASKS = 2, 3
"""Claim loops of the sync worker process (threads) and of the aio one (tasks)."""
ROOT = Path(__file__).resolve().parent.parent


def effects_key(sq: Any, job_id: str) -> str:
    """The effect counters (one per job id) of the shard of ``job_id``, in its slot."""
    return chaos.app_keys(sq.shard_for(job_id).keys.tag)[1]


# -- the worker processes -----------------------------------------------------------


def outcome(lease: leaseq.Lease, rng: random.Random) -> tuple[str, Any]:
    """What a claim loop does with a lease: ("fail", error) or ("complete", seconds of work)."""
    if lease.payload.get("poison"):
        return "fail", "poison: this job always fails"
    if lease.payload.get("flaky") and lease.attempt == 1:
        return "fail", "flaky: first attempt fails"
    return "complete", rng.uniform(0, 0.01)


def records(lease: leaseq.Lease, worker: str) -> tuple[str, str]:
    """The lease's history record and the one its acknowledged completion gets."""
    token = {"id": lease.id, "attempt": lease.attempt, "fence": lease.fence}
    deadline = round(lease.deadline * 1000)
    lease_line = json.dumps({"op": "lease", **token, "worker": worker, "deadline": deadline})
    return lease_line + "\n", json.dumps({"op": "complete", **token}) + "\n"


def goes_on(exc: BaseException) -> bool:
    """Whether a claim loop goes on past ``exc``: the lease lost, a change the replica
    did not confirm (``NotReplicated``: not acknowledged, so not logged), the
    cluster down or moving. Anything else ends the worker, loudly."""
    return isinstance(exc, (leaseq.LeaseLost, leaseq.NotReplicated)) or (
        isinstance(exc, LeaseqError) and error_kind(exc) == "transient"
    )


def sync_loop(plain: Any, durable: Any, log: Any, worker: str, seed: int) -> None:
    rng, backoff = random.Random(seed), Backoff()
    while True:
        try:
            lease = plain.claim(ttl=TTL, block=0.5)
            backoff.reset()
        except LeaseqError as exc:
            if not goes_on(exc):
                raise
            time.sleep(backoff.next())
            continue
        if lease is None:
            continue
        leased, done = records(lease, worker)
        log.write(leased)
        what, arg = outcome(lease, rng)
        try:
            if what == "fail":
                durable.fail(lease, arg, retry_in=0)
            else:
                time.sleep(arg)
                key = effects_key(durable, lease.id)
                durable.complete(lease, effects=[("HINCRBY", key, lease.id, 1)])
                log.write(done)
        except LeaseqError as exc:
            if not goes_on(exc):
                raise


async def aio_loop(plain: Any, durable: Any, log: Any, worker: str, seed: int) -> None:
    rng, backoff = random.Random(seed), Backoff()
    while True:
        try:
            lease = await plain.claim(ttl=TTL, block=0.5)
            backoff.reset()
        except LeaseqError as exc:
            if not goes_on(exc):
                raise
            await asyncio.sleep(backoff.next())
            continue
        if lease is None:
            continue
        leased, done = records(lease, worker)
        log.write(leased)
        what, arg = outcome(lease, rng)
        try:
            if what == "fail":
                await durable.fail(lease, arg, retry_in=0)
            else:
                await asyncio.sleep(arg)
                key = effects_key(durable, lease.id)
                await durable.complete(lease, effects=[("HINCRBY", key, lease.id, 1)])
                log.write(done)
        except LeaseqError as exc:
            if not goes_on(exc):
                raise


def fix_fences() -> None:
    """Every claim of this process uses one fence: the token is the attempt alone."""

    class Fixed:
        @staticmethod
        def token_hex(n: int) -> str:
            return "0" * 2 * n

    claim_module.secrets = Fixed  # type: ignore[assignment]


def work(flavour: str, port: int, password: str, history: str, seed: int) -> None:
    """A worker process: ``THREADS`` sync claim loops or ``TASKS`` asyncio ones."""
    log = open(history, "a", buffering=1)  # noqa: SIM115 - lives as long as we do
    pid = os.getpid()
    if flavour == "sync":
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=port, password=password)
        plain = leaseq.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS)
        durable = leaseq.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS, **DURABLE)
        loops = [
            threading.Thread(
                target=sync_loop, args=(plain, durable, log, f"sync-{pid}-{i}", seed + i)
            )
            for i in range(THREADS)
        ]
        for t in loops:
            t.start()
        for t in loops:
            t.join()
        return

    async def main() -> None:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port, password=password)
        plain = leaseq.aio.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS)
        durable = leaseq.aio.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS, **DURABLE)
        await asyncio.gather(
            *(aio_loop(plain, durable, log, f"aio-{pid}-{i}", seed + i) for i in range(TASKS))
        )

    asyncio.run(main())


# -- the driver ---------------------------------------------------------------------


class Producer(threading.Thread):
    """Enqueues one job a call, plain and ``durable=1`` in turns, until stopped;
    logs each the server acknowledged (``kept``: ``durable=1`` and confirmed by
    the replica)."""

    def __init__(self, client: Any, log: Any) -> None:
        super().__init__(daemon=True)
        self.plain = leaseq.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS)
        self.durable = leaseq.ShardedQueue(
            QUEUE, shards=SHARDS, redis=client, **SETTINGS, **DURABLE
        )
        self.log, self.halt = log, threading.Event()

    def stop(self) -> None:
        """Stop enqueueing; returns once the last enqueue has returned."""
        self.halt.set()
        if self.is_alive():
            self.join()
        self.log.close()
        self.plain.redis.close()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            for kind, q in (("p", self.plain), ("d", self.durable)):
                job_id, kept = f"{kind}{i}", kind == "d"
                try:
                    q.enqueue({"i": i}, id=job_id)
                except leaseq.NotReplicated:
                    kept = False  # applied on the master, not confirmed: may be lost
                except leaseq.ServerUnavailable:
                    continue  # not acknowledged
                record = {"op": "enqueue", "id": job_id, "kept": kept, "at": now_ms()}
                self.log.write(json.dumps(record) + "\n")
            i += 1
            self.halt.wait(0.005)


class Clock:
    """Each shard's clock (``Stats.server_time``), read and logged as the run goes."""

    def __init__(self, sq: leaseq.ShardedQueue, log: Any) -> None:
        self.sq, self.log = sq, log

    def tick(self) -> leaseq.Stats | None:
        """One reading of every shard (None while the cluster does not answer)."""
        try:
            parts = self.sq.shard_stats()
        except leaseq.ServerUnavailable:
            time.sleep(0.05)
            return None
        for shard, s in zip(self.sq.shards, parts, strict=True):
            at = round(s.server_time * 1000)
            self.log.write(json.dumps({"op": "clock", "at": at, "of": shard.keys.tag}) + "\n")
        time.sleep(0.05)
        return merge_stats(QUEUE, parts)

    def until(self, done: Callable[[leaseq.Stats], bool], timeout: float, what: str) -> None:
        """Read the clocks until ``done(stats)`` (the queue's, summed) holds."""
        give_up = time.monotonic() + timeout
        while (s := self.tick()) is None or not done(s):
            if time.monotonic() > give_up:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def spawn(
    flavour: str, cluster: Cluster, where: Path, seed: int, fixed_fence: bool
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "bench.cluster_faults", "worker", flavour]
    cmd += ["--port", str(cluster.ports[0]), "--password", cluster.password or ""]
    cmd += ["--history", str(where / f"{flavour}-worker.history"), "--seed", str(seed)]
    cmd += ["--fixed-fence"] if fixed_fence else []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def victim(cluster: Cluster, sq: leaseq.ShardedQueue) -> int:
    """The port of the master that holds the most shards of the queue."""
    client = cluster.client()
    try:
        held = [client.get_node_from_key(shard.keys.pending).port for shard in sq.shards]
    finally:
        client.close()
    return max(set(held), key=held.count)


LAG = 1.0
"""Seconds before the cut in which plain writes the replica had not yet
received may be lost with the master (its lag: milliseconds on loopback)."""


def fault(kind: str, cluster: Cluster, master: int, clock: Clock) -> dict[str, Any]:
    """Take ``master``'s slots away from it (see the module docstring); returns once
    its replica holds them and it replicates that replica, with the fault's
    history record: a kill may lose the plain writes acknowledged from
    ``LAG`` s before the cut until then, a ``CLUSTER FAILOVER`` nothing."""
    replica = cluster.replica_of(master)
    at = now_ms()
    if kind == "kill":
        cluster.cut(replica)
        cut_at = time.monotonic()
        clock.until(lambda _: time.monotonic() - cut_at > CUT, CUT + 30, "the cut")
        cluster.kill(master)
        cluster.mend(replica)
        cluster.wait_promoted(replica)
        cluster.restart(master)
    else:
        cluster.failover(replica)
        cluster.wait_promoted(replica)
    cluster.wait_replica_of(master, replica)
    if kind != "kill":
        return {"op": "fault", "what": "CLUSTER FAILOVER", "at": at}
    window = {"from": at - round(LAG * 1000), "to": now_ms()}
    return {"op": "fault", "what": f"master cut off {CUT:g} s, SIGKILLed", "at": at, **window}


def run(
    kind: str, where: Path, jobs: int, *, fixed_fence: bool = False, timeout: float = 120.0
) -> histories.Verdict:
    """One cluster fault, ``kill`` or ``failover``, on ``jobs`` jobs and what the
    producer adds; its histories go to ``where``. Every process it starts is
    stopped by its PID before it returns."""
    if kind not in ("kill", "failover"):
        raise ValueError(f"kind must be 'kill' or 'failover', not {kind!r}")
    cluster = Cluster(3, replicas=1, node_timeout_ms=1000, auth=True)
    client = cluster.client()
    try:
        sq = leaseq.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS)
        # The first jobs, before any fault: a loaded box may take longer than the
        # workers' durable_timeout to have a fresh replica acknowledge them.
        seeding = {**DURABLE, "durable_timeout": 10.0}
        durable = leaseq.ShardedQueue(QUEUE, shards=SHARDS, redis=client, **SETTINGS, **seeding)
        with (where / "driver.history").open("a", buffering=1) as log:
            ids = chaos.enqueue(durable, jobs, random.Random(1))
            log.writelines(json.dumps({"op": "enqueue", "id": i, "kept": True}) + "\n" for i in ids)
            drive(kind, cluster, Clock(sq, log), where, jobs, fixed_fence, timeout)
        return judge(sq, where)
    finally:
        client.close()
        cluster.stop()


def drive(
    kind: str,
    cluster: Cluster,
    clock: Clock,
    where: Path,
    jobs: int,
    fixed_fence: bool,
    timeout: float,
) -> None:
    """The run: workers and the producer start; once a quarter of the backlog is
    done, the fault; the producer goes on ``AFTER`` seconds; the queue drains."""
    procs = [spawn(f, cluster, where, n, fixed_fence) for n, f in enumerate(("sync", "aio"))]
    producer = Producer(cluster.client(), (where / "producer.history").open("a", buffering=1))
    producer.start()
    try:
        master = victim(cluster, clock.sq)
        clock.until(lambda s: s.succeeded >= jobs // 4, timeout, "a quarter of the jobs done")
        clock.log.write(json.dumps(fault(kind, cluster, master, clock)) + "\n")
        whole = time.monotonic()
        clock.until(lambda _: time.monotonic() - whole > AFTER, AFTER + 30, "the producer")
        producer.stop()
        clock.until(_idle, timeout, "the queue to drain")
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a worker process ended ({proc.returncode}): see its stderr")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        producer.stop()


def _idle(s: leaseq.Stats) -> bool:
    return s.pending + s.scheduled + s.active + s.suspended == 0


def judge(sq: leaseq.ShardedQueue, where: Path) -> histories.Verdict:
    """Read the run's history and check it against what the cluster holds."""
    sq.reap()
    found = histories.read(sorted(where.glob("*.history")))
    rows = {job_id: histories.Row.of(sq.get(job_id)) for job_id in histories.ids(found)}
    effects: dict[str, int] = {}
    for shard in sq.shards:
        for k, v in sq.redis.hgetall(chaos.app_keys(shard.keys.tag)[1]).items():
            effects[k.decode()] = int(v)
    verdict = histories.check(found, rows, effects)
    verdict.counts["failovers"] = 1
    return verdict


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="(internal) one worker process")
    w.add_argument("flavour", choices=["sync", "aio"])
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--password", required=True)
    w.add_argument("--history", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--fixed-fence", action="store_true", help="one fence for every claim")
    args = p.parse_args(argv)
    if args.fixed_fence:
        fix_fences()
    work(args.flavour, args.port, args.password, args.history, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
