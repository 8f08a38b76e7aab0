"""Server time of the dashboard's pages on a big queue (the target: under 300 ms
for a page of a state holding 1,000,000 jobs).

    python -m bench.web_page --jobs 1000000

Fills one queue on a throwaway redis-server (every job pending, a share of
them dead), then times GET requests through Starlette's TestClient (the
app's own work plus its Redis round trips; no network to a browser): the
overview, the first, a middle and the last page of pending and of dead, and
a job page. Prints the median and worst of several runs per page.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import leaseq
from bench.server import Server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--dead", type=int, default=20_000, help="of them dead-lettered")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

        from leaseq.web import create_app

    server = Server()
    try:
        r = server.client()
        q = leaseq.Queue("big", redis=r, max_attempts=1)
        started = time.perf_counter()
        chunk = 10_000
        for lo in range(0, args.jobs, chunk):
            q.enqueue_many([{"i": i, "to": f"user{i}@example.org"} for i in range(lo, lo + chunk)])
        for _ in range(0, args.dead, 1000):
            for lease in q.claim_many(1000, ttl=60.0):
                q.fail(lease, "boom", dead=True)
        fill = time.perf_counter() - started
        s = q.stats()
        print(f"filled in {fill:.1f} s: pending {s.pending:,}, dead {s.dead:,}")
        c = TestClient(create_app(r))
        some = q.ls("pending", offset=s.pending // 2, limit=1)[0].id
        last_pending = (s.pending + 49) // 50
        last_dead = (s.dead + 49) // 50
        pages = {
            "overview": "/",
            "pending p1": "/queues/big?state=pending",
            f"pending p{last_pending // 2}": f"/queues/big?state=pending&page={last_pending // 2}",
            f"pending p{last_pending} (last)": f"/queues/big?state=pending&page={last_pending}",
            f"dead p{last_dead} (last)": f"/queues/big?state=dead&page={last_dead}",
            "pending p1, 200 rows": "/queues/big?state=pending&size=200",
            "job page": f"/queues/big/jobs/{some}",
            "live fragment": "/queues/big?state=pending&partial=live",
        }
        print(f"{'page':<28} {'median ms':>10} {'worst ms':>10}")
        for label, path in pages.items():
            assert c.get(path).status_code == 200, path
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                resp = c.get(path)
                times.append((time.perf_counter() - t0) * 1000)
                assert resp.status_code == 200
            print(f"{label:<28} {statistics.median(times):>10.1f} {max(times):>10.1f}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
