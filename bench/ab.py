"""Two revisions of leaseq side by side: enqueue, enqueue_many, claim+complete, drain.

``python -m bench.ab BEFORE [AFTER] [--rounds N] [--jobs N]`` checks each
revision out into a throwaway git worktree (AFTER defaults to the working
tree as it is), starts one throwaway redis-server, and then, round after
round, measures each revision in its own fresh Python process, alternating
which goes first. Only leaseq differs between the two: the measuring code is
this file's ``child`` function, run against the revision's package. It
prints each figure's median per revision and the ratio AFTER / BEFORE.

This machine is shared and noisy: the rounds interleave so that load hits
both revisions alike; quote the ratio, not the absolute rates.

Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ("enqueue", "enqueue_many", "claim_complete", "drain")


def child(url: str, jobs: int, handler_dir: str) -> dict[str, float]:
    """Measure the leaseq importable here; run in a fresh process per round."""
    import redis

    import leaseq

    r = redis.Redis.from_url(url)
    out: dict[str, float] = {}
    r.flushall()
    q = leaseq.Queue("ab", redis=r)
    payloads = [{"n": i, "body": "x" * 32} for i in range(jobs)]
    # One enqueue at a time (a tenth of the jobs: a round trip each).
    singles = max(1, jobs // 10)
    start = time.perf_counter()
    for payload in payloads[:singles]:
        q.enqueue(payload)
    out["enqueue"] = singles / (time.perf_counter() - start)

    r.flushall()
    start = time.perf_counter()
    for i in range(0, jobs, 1000):
        q.enqueue_many(payloads[i : i + 1000])
    out["enqueue_many"] = jobs / (time.perf_counter() - start)

    # Batches of 100 claimed and completed by the library, as a pipeline does.
    start = time.perf_counter()
    while True:
        leases = q.claim_many(100, ttl=60.0)
        if not leases:
            break
        q.complete_many(leases)
    out["claim_complete"] = jobs / (time.perf_counter() - start)

    r.flushall()
    q.enqueue_many(payloads)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path[:1], handler_dir])}
    command = [sys.executable, "-m", "leaseq.cli", "--url", url]
    command += ["worker", "ab", "ab_noop:handler", "--burst"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first: tuple[float, int] | None = None
    done, now = 0, time.perf_counter()
    while True:
        done = q.stats().totals.get("succeeded", 0)
        now = time.perf_counter()
        if done and first is None:
            first = (now, done)
        if done >= jobs or proc.poll() is not None:
            break
        time.sleep(0.02)
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0 or done < jobs or first is None:
        raise RuntimeError(f"worker exited {proc.returncode} after {done}: {err[-300:]!r}")
    out["drain"] = (jobs - first[1]) / max(now - first[0], 1e-9)
    return out


def checkout(rev: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev],
        check=True,
        capture_output=True,
    )
    return into


def run_child(tree: Path, url: str, jobs: int, handler_dir: str) -> dict[str, float]:
    # The revision's package first on the path; this file is run by path, so
    # the measuring code is the same for both.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "import importlib.util as u; s = u.spec_from_file_location('ab', sys.argv[2]); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); "
        "print(json.dumps(m.child(sys.argv[3], int(sys.argv[4]), sys.argv[5])))"
    )
    args = [sys.executable, "-c", code, str(tree), __file__, url, str(jobs), handler_dir]
    done = subprocess.run(args, env=env, cwd=tree, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab")
    parser.add_argument("before", help="a git revision (commit, branch, tag)")
    parser.add_argument("after", nargs="?", help="a git revision (default: the working tree)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args(argv)
    from bench.server import Server

    scratch = Path(tempfile.mkdtemp(prefix="leaseq-ab-"))
    (scratch / "ab_noop.py").write_text("def handler(payload):\n    return None\n")
    trees: dict[str, Path] = {}
    try:
        trees[args.before] = checkout(args.before, scratch / "before")
        after = args.after or "working tree"
        trees[after] = checkout(args.after, scratch / "after") if args.after else ROOT
        rates: dict[str, dict[str, list[float]]] = {k: {f: [] for f in FIGURES} for k in trees}
        with Server() as server:
            for n in range(args.rounds):
                order = list(trees) if n % 2 == 0 else list(reversed(trees))
                for name in order:
                    got = run_child(trees[name], server.url, args.jobs, str(scratch))
                    for figure in FIGURES:
                        rates[name][figure].append(got[figure])
                print(f"round {n + 1}/{args.rounds} done", file=sys.stderr)
        b, a = args.before, after
        print(f"{args.jobs} jobs, median of {args.rounds} rounds, alternating")
        print(f"{'figure':<14} {b[:14]:>14} {a[:14]:>14} {'after/before':>13}")
        for figure in FIGURES:
            mb, ma = (statistics.median(rates[k][figure]) for k in (b, a))
            print(f"{figure:<14} {mb:>14,.0f} {ma:>14,.0f} {ma / mb:>13.3f}")
    finally:
        for path in (scratch / "before", scratch / "after"):
            if path.exists():
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                    capture_output=True,
                )
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
