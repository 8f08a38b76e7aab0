"""leaseq as a guest on a shared Redis: how long its calls hold the server, and
what another client's latency is meanwhile.

``python -m bench.neighbour [--jobs N] [--only a,b]`` runs each scenario on a
fresh throwaway redis-server (bench/server.py) at leaseq's default settings:

- **drain**: ``leaseq worker Q bench.peer_tasks:handler --burst`` on N jobs
  (an INCR a job), and the same with ``--processes 2``; huey's consumer
  (4 threads) on N jobs beside them, measured by the same probe;
- **enqueue_many**: one call of N jobs;
- **retry_all_dead**, **purge** (dead), **drop**, **stats** and the dashboard
  **overview** at N jobs;
- **release**: a parent whose completion releases N/10 children, and the
  claims that follow;
- **tick**: 1,000 schedules falling due at once;
- **groups**: N jobs over 1,000 fair groups, drained by one worker.

Two figures per scenario, taken while the measured step runs and nothing else:

- **longest call** and **calls over 2 ms**, from ``SLOWLOG`` (threshold
  250 µs, so a figure under it prints as "<0.25"); the slowest script by name;
- **another client's latency**: a separate process sending ``PING`` on its own
  connection every millisecond; p50, p99 and max in ms.

``--split`` puts the server and the probe on the last CPU and the clients
(workers, the producer) on the others, as when the workers run on other
machines: what is left of the probe's wait is the time leaseq's calls hold the
server, not the time the probe waits for a core.

Ratios and medians only travel between machines; the good-neighbour targets are
no call past 2 ms and a probe p99 <= 1 ms, max <= 3 ms. Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import redis

from bench.probe import SLOW_US, Holds, Probe, probing, watching
from bench.server import Server, machine

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "nb"


# -- scenarios ----------------------------------------------------------------------


class Run(NamedTuple):
    name: str
    holds: Holds
    probe: Probe | None
    wall: float


Scenario = Callable[[Server, int, Callable[[Callable[[], object]], Run]], Run]


def _queue(r: redis.Redis, name: str = QUEUE) -> Any:
    import leaseq

    return leaseq.Queue(name, redis=r)


def _worker(url: str, jobs: int, *extra: str, handler: str = "bench.peer_tasks:handler") -> None:
    """Run a burst worker over the queue and wait for it to exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_REDIS_URL": url}
    cmd = [sys.executable, "-m", "leaseq.cli", "--url", url, "worker", QUEUE, handler, "--burst"]
    subprocess.run([*cmd, *extra], env=env, check=True, stdout=subprocess.DEVNULL, timeout=900)


def boom(lease: Any) -> None:
    """A handler that fails: for dead jobs."""
    raise RuntimeError("boom")


def _filled(srv: Server, jobs: int, **options: Any) -> Any:
    q = _queue(srv.client())
    for i in range(0, jobs, 10_000):
        q.enqueue_many([{"i": j} for j in range(i, min(jobs, i + 10_000))], **options)
    return q


def _dead(srv: Server, jobs: int) -> Any:
    q = _filled(srv, jobs, max_attempts=1)
    _worker(srv.url, jobs, "--concurrency", "8", handler="bench.neighbour:boom")
    assert q.stats().dead == jobs, q.stats()
    return q


def drain(srv: Server, jobs: int, measure: Any, *extra: str) -> Run:
    _filled(srv, jobs)
    return measure(lambda: _worker(srv.url, jobs, *extra))


def drain_2(srv: Server, jobs: int, measure: Any) -> Run:
    return drain(srv, jobs, measure, "--processes", "2")


def huey_drain(srv: Server, jobs: int, measure: Any) -> Run:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_REDIS_URL": srv.url}
    setup = f"import bench.peer_tasks as p\nfor _ in range({jobs}): p.incr()"
    subprocess.run([sys.executable, "-c", setup], env=env, check=True)
    r = srv.client()
    cmd = [sys.executable, "-m", "huey.bin.huey_consumer", "bench.peer_tasks.huey", "-w", "4"]

    def run() -> None:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            give_up = time.monotonic() + 600
            while int(r.get("bench:done") or 0) < jobs and time.monotonic() < give_up:
                time.sleep(0.01)
        finally:
            proc.terminate()
            proc.wait(10)

    return measure(run)


def enqueue_many(srv: Server, jobs: int, measure: Any) -> Run:
    q = _queue(srv.client())
    q.enqueue({"warm": 1})
    payloads = [{"i": i} for i in range(jobs)]
    return measure(lambda: q.enqueue_many(payloads))


def retry_all_dead(srv: Server, jobs: int, measure: Any) -> Run:
    q = _dead(srv, jobs)
    return measure(q.retry_all_dead)


def purge(srv: Server, jobs: int, measure: Any) -> Run:
    q = _dead(srv, jobs)
    return measure(lambda: q.purge("dead"))


def drop(srv: Server, jobs: int, measure: Any) -> Run:
    q = _filled(srv, jobs)
    return measure(q.drop)


def stats(srv: Server, jobs: int, measure: Any) -> Run:
    q = _filled(srv, jobs)
    return measure(lambda: [q.stats() for _ in range(20)])


def overview(srv: Server, jobs: int, measure: Any) -> Run:
    from leaseq.web._source import Source

    _filled(srv, jobs)
    source = Source(srv.client())
    return measure(lambda: [source.overview() for _ in range(20)])


def release(srv: Server, jobs: int, measure: Any) -> Run:
    q = _queue(srv.client())
    parent = q.enqueue({"parent": True})
    children = jobs // 10
    for i in range(0, children, 5_000):
        q.enqueue_many([{"i": j} for j in range(i, i + 5_000)], depends_on=[parent])
    (lease,) = q.claim_many(1)

    def run() -> None:
        q.complete(lease)
        while q.claim_many(100):  # the deferred children settle under later claims
            pass

    return measure(run)


def tick(srv: Server, jobs: int, measure: Any) -> Run:
    q = _queue(srv.client())
    for i in range(1_000):
        q.schedule(f"s{i}", {"i": i}, every=1.0)
    time.sleep(1.1)
    return measure(q.tick)


def groups(srv: Server, jobs: int, measure: Any) -> Run:
    q = _queue(srv.client())
    per = max(1, jobs // 1_000)
    for g in range(1_000):
        q.enqueue_many([{"i": i} for i in range(per)], group=f"g{g}")
    return measure(lambda: _worker(srv.url, per * 1_000))


SCENARIOS: dict[str, Scenario] = {
    "drain": drain,
    "drain_2": drain_2,
    "huey_drain": huey_drain,
    "enqueue_many": enqueue_many,
    "retry_all_dead": retry_all_dead,
    "purge": purge,
    "drop": drop,
    "stats": stats,
    "overview": overview,
    "release": release,
    "tick": tick,
    "groups": groups,
}


def run_one(name: str, jobs: int, server_cpus: set[int] | None = None) -> Run:
    """One scenario on a fresh server; with ``server_cpus`` (``--split``) the server
    and the probe run there, while this process and its workers keep the rest."""
    with Server() as srv:
        r = srv.client()
        if server_cpus is not None:
            os.sched_setaffinity(srv.proc.pid, server_cpus)

        def measure(step: Callable[[], object]) -> Run:
            h: list[Holds] = []
            p: list[Probe] = []
            with watching(r, h), probing(srv.url, p, server_cpus):
                t0 = time.perf_counter()
                step()
                wall = time.perf_counter() - t0
            return Run(name, h[0], p[0] if p else None, wall)

        return SCENARIOS[name](srv, jobs, measure)


def table(runs: list[Run]) -> str:
    lines = [
        "| scenario | wall s | longest call ms | calls > 2 ms | slowest "
        "| probe p50 / p99 / max ms |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for run in runs:
        h, p = run.holds, run.probe
        longest = f"{h.longest_us / 1e3:.2f}" if h.longest_us else f"<{SLOW_US / 1e3:.2f}"
        probe = f"{p.p50:.2f} / {p.p99:.2f} / {p.max:.2f}" if p else "-"
        lines.append(
            f"| {run.name} | {run.wall:.2f} | {longest} | {h.over} | {h.slowest or '-'} | {probe} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.neighbour", description=__doc__)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument(
        "--split",
        action="store_true",
        help="the server and the probe on the last CPU, the clients (workers, producer)"
        " on the others: the time a call holds the server, without the wait for a core",
    )
    args = ap.parse_args(argv)
    server_cpus = None
    if args.split:
        cpus = os.sched_getaffinity(0)
        server_cpus = {max(cpus)}
        os.sched_setaffinity(0, cpus - server_cpus)
    names = args.only.split(",")
    for name in names:
        if name not in SCENARIOS:
            ap.error(f"no scenario {name!r}: {', '.join(SCENARIOS)}")
    with Server() as srv:
        print(
            f"{time.strftime('%Y-%m-%d')}, {machine(srv.client())}, load {os.getloadavg()[0]:.2f}"
        )
    runs = []
    for _ in range(args.rounds):
        for name in names:
            runs.append(run_one(name, args.jobs, server_cpus))
            print(table(runs[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(runs))
    print()
    for run in runs:
        parts = sorted(run.holds.by_script.items(), key=lambda kv: -kv[1][1])
        text = ", ".join(f"{k} {n} over / {top / 1e3:.2f} ms" for k, (n, top) in parts[:6])
        print(f"- {run.name}: {text}")
    if args.rounds > 1:
        for name in names:
            p99s = [r.probe.p99 for r in runs if r.name == name and r.probe]
            print(f"{name}: probe p99 median {statistics.median(p99s):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
