"""``python -m bench.drain_profile``: where a job's time goes in one worker's drain.

The peer harness's shape (bench/peer_tasks.py: one Redis ``INCR`` per job),
one ``leaseq.Worker`` with its defaults, in this process, over N jobs
enqueued with ``enqueue_many``. It prints, per job:

- wall time and the process's CPU time (all of the worker's threads; the
  GIL makes CPU time the bound of one worker process on a busy core);
- server time by command (``INFO commandstats``, reset before the drain) and
  commands per job (each one a round trip unless pipelined);
- server time of each worker script alone: ``claim_many(500)`` over N jobs,
  then ``complete_many(500)`` over those leases;
- with ``--yappi`` (``pip install yappi``): a second drain under yappi's CPU
  clock, own time per function summed over the worker's threads, by thread
  kind (claimer, handler, reporter). yappi slows everything several times:
  read its shares, not its absolute figures.

Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import leaseq
from bench.guard import peer_drain as timed_drain
from bench.server import Server

N = 20_000
ROOT = Path(__file__).resolve().parent.parent
COUNTER = "bench:done"
"""The key the handler INCRs (bench/peer_tasks.py)."""


def drain(q: leaseq.Queue, handler: Any) -> leaseq.Worker:
    w = leaseq.Worker(q, handler, handle_signals=False)
    w.run(burst=True)
    return w


def commands(r: Any) -> dict[str, tuple[int, float]]:
    """(calls, usec) per command since the last CONFIG RESETSTAT (but INFO itself)."""
    got = {}
    for name, stat in r.info("commandstats").items():
        cmd = name.removeprefix("cmdstat_")
        if cmd not in ("info", "config|resetstat"):
            got[cmd] = (int(stat["calls"]), float(stat["usec"]))
    return got


TOP_LEVEL = {"evalsha", "eval", "incr", "incrby", "blpop", "llen", "ping", "del", "rpush"}
"""Commands the worker and its handler send themselves (the rest run inside scripts)."""


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.drain_profile", description=__doc__)
    parser.add_argument("-n", type=int, default=N, help="jobs")
    parser.add_argument("--rounds", type=int, default=5, help="drains timed (medians)")
    parser.add_argument(
        "--processes",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[],
        help="also drain with `leaseq worker --processes N --burst` for each N (e.g. 1,2)",
    )
    parser.add_argument("--yappi", action="store_true", help="also profile the threads")
    parser.add_argument("--top", type=int, default=25, help="functions to list with --yappi")
    args = parser.parse_args(argv)
    n = args.n
    with Server() as server:
        os.environ["BENCH_REDIS_URL"] = server.url  # read by bench.peer_tasks at import
        from bench import peer_tasks

        r = server.client()
        q = leaseq.Queue("bench", redis=r)

        def fill() -> None:
            r.flushall()
            q.enqueue_many([{"i": i} for i in range(n)])

        fill()
        drain(q, peer_tasks.handler)  # warm: scripts loaded, imports done
        walls, cpus, servers = [], [], []
        for _ in range(args.rounds):  # keeps the commandstats of the last round
            fill()
            r.config_resetstat()
            wall, cpu, busy = time.perf_counter(), time.process_time(), cpu_of(server.proc.pid)
            w = drain(q, peer_tasks.handler)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            servers.append(cpu_of(server.proc.pid) - busy)
            assert w.counts["succeeded"] == n, w.counts
        stats = commands(r)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"{n} jobs, one Worker with defaults, handler = one INCR, {args.rounds} rounds")
        print(
            f"wall {wall * 1e6 / n:.1f} µs/job median ({n / wall:,.0f} jobs/s; "
            f"best {n / min(walls):,.0f})"
        )
        print(
            f"worker CPU {cpu * 1e6 / n:.1f} µs/job median (best {min(cpus) * 1e6 / n:.1f}; "
            "all threads, user+sys)"
        )
        print(
            f"redis-server process CPU {statistics.median(servers) * 1e6 / n:.1f} µs/job median "
            "(commands, syscalls, loopback)"
        )
        top = {c: s for c, s in stats.items() if c in TOP_LEVEL}
        print(
            f"round trips {sum(c for c, _ in top.values()) / n:.3f} per job, in commands "
            f"{sum(u for _, u in top.values()) / n:.1f} µs/job of server time; by command "
            "(a script's own calls count in it and again on their own lines):"
        )
        for cmd, (calls, usec) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
            print(f"  {cmd:<20} {calls / n:8.3f} calls/job {usec / n:7.2f} µs/job")

        fill()
        r.config_resetstat()
        held = []
        while got := q.claim_many(500, ttl=60.0):
            held.extend(got)
        claim = commands(r).get("evalsha", (0, 0.0))
        r.config_resetstat()
        for start in range(0, len(held), 500):
            q.complete_many(held[start : start + 500])
        done = commands(r).get("evalsha", (0, 0.0))
        print(f"claim_many(500) alone: {claim[1] / n:.2f} µs/job server ({claim[0]} calls)")
        print(f"complete_many(500) alone: {done[1] / n:.2f} µs/job server ({done[0]} calls)")

        for procs in args.processes:
            processes(r, server, q, fill, n, procs, args.rounds)
        if args.yappi:
            profile(q, peer_tasks.handler, fill, n, args.top)
    return 0


def processes(r: Any, server: Server, q: Any, fill: Any, n: int, procs: int, rounds: int) -> None:
    """``leaseq worker --processes procs --burst``: jobs/s first to last completion,
    CPU per job of the workers (with their supervisor) and of redis-server."""
    exe = str(Path(sys.executable).parent / "leaseq")
    command = [exe, "--url", server.url, "worker", "bench", "bench.peer_tasks:handler", "--burst"]
    command += ["--processes", str(procs)]
    r.flushall()  # the CPU of starting and stopping with nothing to do, taken off below
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    usage = os.wait4(proc.pid, 0)[2]
    fixed = usage.ru_utime + usage.ru_stime
    rates, workers, servers = [], [], []
    for _ in range(rounds):
        fill()
        busy = cpu_of(server.proc.pid)
        used: list[float] = []
        rates.append(timed_drain(r, server.url, n, command, used))
        servers.append(cpu_of(server.proc.pid) - busy)
        workers.append(used[0] - fixed)
    print(
        f"--processes {procs}: {statistics.median(rates):,.0f} jobs/s median "
        f"(best {max(rates):,.0f}); workers' CPU {statistics.median(workers) * 1e6 / n:.1f} "
        f"µs/job (less {fixed:.2f} s to start and stop), redis-server "
        f"{statistics.median(servers) * 1e6 / n:.1f} µs/job"
    )


def profile(q: leaseq.Queue, handler: Any, fill: Any, n: int, top: int) -> None:
    import threading

    import yappi

    fill()
    yappi.set_context_name_callback(lambda: threading.current_thread().name)
    yappi.set_clock_type("cpu")
    yappi.start()
    drain(q, handler)
    yappi.stop()
    names = {t.id: t.name for t in yappi.get_thread_stats()}  # the threads' own names
    kind = {
        tid: ("handler" if "handler" in nm else "claimer" if "claimer" in nm else "reporter")
        for tid, nm in names.items()
    }
    own: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for tid in names:
        for f in yappi.get_func_stats(filter={"ctx_id": tid}):
            where = f"{os.path.basename(f.module)}:{f.lineno} {f.name}"
            own[kind[tid]][where] += f.tsub
    grand = sum(sum(d.values()) for d in own.values())
    print(f"\nyappi CPU clock, own time per function, {n} jobs (shares of {grand:.2f} s)")
    for k, funcs in sorted(own.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(funcs.values())
        print(f"\n{k}: {100 * total / grand:.0f}% ({total * 1e6 / n:.1f} µs/job under yappi)")
        for where, t in sorted(funcs.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {100 * t / grand:5.1f}%  {where}")
    yappi.clear_stats()


if __name__ == "__main__":
    sys.exit(main())
