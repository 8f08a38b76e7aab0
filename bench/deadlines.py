"""Start-by deadlines measured: many jobs left unclaimed past ``expires=``.

``python -m bench.deadlines [--jobs N]`` starts a throwaway redis-server,
enqueues N jobs with ``expires=1`` on a paused queue (so nothing claims them)
with one ``leaseq.Worker`` running on it (defaults: its reaper every 10 s,
its claims sweeping too), and measures: how long after the deadline the last
one was dead-lettered, that none ran, and the longest call the server logged
(SLOWLOG at 2 ms, which must stay empty). Then the same with no worker and
one ``q.reap()`` right after the deadline (an operator's ``leaseq reap``).
Never run by the tests.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import leaseq
from bench.server import Server, machine


def _expire(r: Any, n: int, name: str, worker: bool) -> tuple[float, int, int, float]:
    """(seconds from the deadline to the last job dead, jobs that ran, SLOWLOG entries
    at 2 ms, the longest one in ms)."""
    q = leaseq.Queue(name, redis=r)
    ran = []
    for start in range(0, n, 10_000):
        q.enqueue_many(list(range(start, min(n, start + 10_000))), expires=1.0)
    deadline = max(j.expires_at or 0 for j in q.ls(state="pending", limit=1, offset=n - 1))
    q.pause()
    r.config_set("slowlog-log-slower-than", 2000)
    r.slowlog_reset()
    w = leaseq.Worker(q, lambda lease: ran.append(lease.id), handle_signals=False)
    runner = threading.Thread(target=w.run)
    if worker:
        runner.start()
    while r.time()[0] < deadline:
        time.sleep(0.01)
    if not worker:
        q.reap()
    while q.stats().dead < n:
        time.sleep(0.05)
    sec, usec = r.time()
    late = sec + usec / 1e6 - deadline
    if worker:
        w.stop()
        runner.join()
    slow = r.slowlog_get(1000)
    longest = max((e["duration"] for e in slow), default=0) / 1000
    q.drop(force=True)
    return late, len(ran), len(slow), longest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deadlines")
    parser.add_argument("--jobs", type=int, default=100_000)
    args = parser.parse_args(argv)
    with Server() as server:
        r = server.client()
        print(machine(r))
        for label, worker in (("a worker on the paused queue", True), ("one q.reap()", False)):
            late, ran, slow, longest = _expire(r, args.jobs, f"d{int(worker)}", worker)
            print(
                f"{args.jobs} jobs, expires=1, {label}: all dead {late:.2f} s after the "
                f"deadline; {ran} ran; SLOWLOG at 2 ms: {slow} entries (longest {longest:.2f} ms)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
