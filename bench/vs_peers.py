"""One leaseq worker against the acking peers' and huey's, side by side.

``python -m bench.vs_peers [--jobs N] [--rounds R] [--peers-venv DIR]``
drains N jobs that each do one Redis ``INCR`` (the peer harness's shape)
with one worker process of each library, defaults but one process:
``leaseq worker --burst``, ``huey_consumer -w 1``, ``taskiq worker
--workers 1`` (taskiq-redis's ``RedisStreamBroker``, which acks) and
``dramatiq --processes 1`` (its Redis broker, which acks). jobs/s from the
first completion to the last (``bench.vs_huey.drain``), medians of R
rounds taken in turn, and leaseq's ratio to each. The peers' packages may
live in a venv of their own (``--peers-venv``: its ``bin/`` holds their
python and commands); a peer that is not installed there is left out.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import leaseq
from bench.guard import peer_drain
from bench.revisions import ROOT
from bench.server import Server

PEERS = {
    # name: (module to import, enqueue statement, worker command after the bin dir)
    "huey": ("bench.peer_tasks", "for _ in range(N): m.incr()", ["huey_consumer",
             "bench.peer_tasks.huey", "-w", "1"]),
    "taskiq-redis": ("bench.peer_taskiq", "import asyncio; asyncio.run(m.enqueue(N))",
                     ["taskiq", "worker", "bench.peer_taskiq:broker", "--workers", "1"]),
    "dramatiq": ("bench.peer_dramatiq", "m.enqueue(N)", ["dramatiq", "bench.peer_dramatiq",
                 "--processes", "1"]),
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vs_peers")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers-venv", type=Path, default=Path(sys.executable).parent.parent)
    args = parser.parse_args(argv)
    n = args.jobs
    own_bin = Path(sys.executable).parent
    peer_bin = args.peers_venv / "bin"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    present = {}
    for name, (module, _, command) in PEERS.items():
        where = own_bin if name == "huey" else peer_bin
        python = str(where / "python")
        found = subprocess.run([python, "-c", f"import {module}"], cwd=ROOT, env=env,
                               capture_output=True).returncode == 0  # fmt: skip
        if found and shutil.which(command[0], path=str(where)):
            present[name] = (python, str(where / command[0]))
        else:
            print(f"{name}: not installed in {where}, left out")
    got: dict[str, list[float]] = {name: [] for name in ["leaseq", *present]}
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r)
        run_env = {**env, "BENCH_REDIS_URL": server.url}
        for k in range(args.rounds):
            sides = list(got)
            for side in sides[k % len(sides) :] + sides[: k % len(sides)]:
                r.flushall()
                if side == "leaseq":
                    q.enqueue_many([{"i": i} for i in range(n)])
                    command = [str(own_bin / "leaseq"), "--url", server.url, "worker", "bench",
                               "bench.peer_tasks:handler", "--burst"]  # fmt: skip
                else:
                    module, fill, peer_command = PEERS[side]
                    python, exe = present[side]
                    code = f"import {module} as m\nN = {n}\n{fill}"
                    subprocess.run([python, "-c", code], cwd=ROOT, env=run_env, check=True)
                    command = [exe, *peer_command[1:]]
                got[side].append(peer_drain(r, server.url, n, command))
            print(f"round {k + 1}/{args.rounds} done", flush=True)
    print(f"{n} jobs, one worker process each, median of {args.rounds} rounds")
    lead = statistics.median(got["leaseq"])
    print(f"{'worker':<14} {'jobs/s':>10} {'leaseq/it':>10}")
    for side, rates in got.items():
        rate = statistics.median(rates)
        print(f"{side:<14} {rate:>10,.0f} {lead / rate:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
