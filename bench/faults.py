"""Fault matrix: drive a producer and worker processes through each fault, record
the run's history, and let the checker (``bench.histories``) prove it.

    python -m bench.faults             # every fault, 3,000 jobs each
    python -m bench.faults --quick     # 400 jobs each: what CI runs
    python -m bench.faults --only worker-kill --dir /tmp/runs

Each fault is one ``bench.chaos`` run on its own redis-server (loopback,
killed by its PID at the end): worker processes complete each job with a
fenced effect (``effects=``: an HINCRBY in the completion script), log every
lease they are handed and every completion the server acknowledged; the
driver logs every enqueue acknowledged and the queue's clock. The checker
then reads the history and the rows the run left and names any violation:
a token handed out twice, a completion acknowledged twice or from a lease
that was not the job's last, an effect applied twice, a job left unfinished,
the clock stepping back, an acknowledged enqueue lost that the run's
settings promise to keep (every fault here: the worker kills touch no data,
and the server runs ``appendfsync always``).

- ``worker-kill``: a worker SIGKILLed every 0.2 s, a fresh one started;
- ``worker-stall``: a worker SIGSTOPped for 0.5 s (past its 0.3 s leases)
  every 0.3 s, then let go, on jobs that take up to 0.2 s: it wakes holding
  leases others hold now, and every write it makes with them must be
  refused;
- ``redis-kill``: the server SIGKILLed twice mid-run and started again from
  its AOF (``appendfsync always``), the producer enqueueing across the
  crashes (its enqueues ride the outages out: ``enqueue_retry``).

The Sentinel faults (a killed primary, ``SENTINEL FAILOVER``) run in
``bench.failover``; the table prints one line per fault and the exit code is
1 when any run broke a check.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

import leaseq
from bench import chaos, cluster_faults, histories
from bench.server import Server


def _rows(r: redis.Redis, queue: str, ids: list[str]) -> dict[str, histories.Row | None]:
    """Every job's row as the run left it (state, attempts, fence)."""
    q = leaseq.Queue(queue, redis=r)
    rows: dict[str, histories.Row | None] = {}
    for job_id in ids:
        job = q.get(job_id)
        rows[job_id] = (
            None
            if job is None
            else histories.Row(job.state.value, job.attempts, job.fence or "", job.last_error or "")
        )
    return rows


def _judge(server: Server, where: Path, report: dict[str, Any]) -> histories.Verdict:
    """Read the history of a run and check it against what the server holds."""
    records = histories.read(sorted(where.glob("*.history")))
    ids = [r["id"] for r in records if r["op"] == "enqueue"]
    client = server.client()
    _, effects_key = chaos.app_keys(chaos.QUEUE)
    effects = {k.decode(): int(v) for k, v in client.hgetall(effects_key).items()}
    verdict = histories.check(records, _rows(client, chaos.QUEUE, ids), effects)
    verdict.counts["kills"] = report["kills"]
    client.close()
    return verdict


def worker_kill(where: Path, jobs: int) -> histories.Verdict:
    with Server() as server:
        report = chaos.drive(server.url, jobs=jobs, workers=4, kill_every=0.2, mode="effects",
                             ttl=0.4, timeout=120.0, acks=str(where))  # fmt: skip
        return _judge(server, where, report)


def worker_stall(where: Path, jobs: int) -> histories.Verdict:
    with Server() as server:
        # Jobs that take up to 0.2 s: a stalled worker wakes while the next
        # holder of its job still works on it, and tries to complete it first.
        report = chaos.drive(server.url, jobs=jobs // 4, workers=4, kill_every=0.3,
                             mode="effects", ttl=0.3, timeout=120.0, acks=str(where),
                             stall=0.5, work=0.2)  # fmt: skip
        return _judge(server, where, report)


def redis_kill(where: Path, jobs: int) -> histories.Verdict:
    with Server("--appendonly", "yes", "--appendfsync", "always") as server:
        producer = leaseq.Queue(chaos.QUEUE, redis=server.client(), max_attempts=chaos.MAX_ATTEMPTS)
        log = (where / "producer.history").open("a", buffering=1)
        crashes: list[float] = []

        def during(elapsed: float) -> bool:
            if elapsed < 3.0:  # late enqueues, across the crashes
                job_id = producer.enqueue({"i": -1}, id=f"late-{int(elapsed * 1000)}")
                log.write(json.dumps({"op": "enqueue", "id": job_id, "kept": True}) + "\n")
            if len(crashes) < 2 and elapsed > 1.0 + len(crashes):
                crashes.append(elapsed)
                server.crash()
            return elapsed < 3.0 or len(crashes) < 2

        report = chaos.drive(server.url, jobs=jobs, workers=3, kill_every=0.4, mode="effects",
                             ttl=0.4, timeout=120.0, during=during, acks=str(where))  # fmt: skip
        log.close()
        verdict = _judge(server, where, report)
        verdict.counts["server_crashes"] = len(crashes)
        return verdict


def cluster_kill(where: Path, jobs: int) -> histories.Verdict:
    return cluster_faults.run("kill", where, jobs // 2)


def cluster_failover(where: Path, jobs: int) -> histories.Verdict:
    return cluster_faults.run("failover", where, jobs // 2)


FAULTS: dict[str, Callable[[Path, int], histories.Verdict]] = {
    "worker-kill": worker_kill,
    "worker-stall": worker_stall,
    "redis-kill": redis_kill,
    "cluster-kill": cluster_kill,
    "cluster-failover": cluster_failover,
}


def table(results: dict[str, histories.Verdict]) -> str:
    """The verdicts as a Markdown table, one line per fault."""
    lines = [
        "| fault | enqueues | leases | completions | faults | reissued | unkept lost | seconds "
        "| violations |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, v in results.items():
        broke = "; ".join(f"{k}: {len(w)}" for k, w in v.violations.items() if w) or "none"
        c = v.counts
        lines.append(
            f"| {name} | {c['enqueue']} | {c['lease']} | {c['complete']} | "
            f"{c['kills'] + c['server_crashes'] + c['failovers']} | {c['attempt_reissued']} | "
            f"{c['lost_unkept']} | {c['seconds']} | {broke} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="400 jobs a fault (what CI runs)")
    p.add_argument("--only", choices=sorted(FAULTS), action="append", help="run only these")
    p.add_argument("--dir", help="where the histories go (default: a new temp dir)")
    args = p.parse_args(argv)
    jobs = 400 if args.quick else 3000
    root = Path(args.dir or tempfile.mkdtemp(prefix="leaseq-faults-"))
    results: dict[str, histories.Verdict] = {}
    for name in args.only or FAULTS:
        where = root / name
        where.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        results[name] = FAULTS[name](where, jobs)
        seconds = time.monotonic() - started
        results[name].counts["seconds"] = round(seconds)
        print(f"{name}: {seconds:.1f}s, histories in {where}", file=sys.stderr)
        for check, what in results[name].violations.items():
            print(f"  {check} ({histories.CHECKS[check]}): {what[:5]}", file=sys.stderr)
    print(table(results))
    return 0 if all(v.ok for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
