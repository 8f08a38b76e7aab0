"""Cost of keeping each failure in the job's row (``traceback`` and the bounded
``failures`` log of ``lib/note_failure.lua``), side by side with none.

``python -m bench.failures [--jobs N] [--repeats R]`` starts a throwaway
redis-server and compares, in turns (on, off, on, off, ...), the real scripts
with the same scripts whose ``note_failure`` only sets ``last_error`` (what a
failure wrote before):

- a fail-heavy drain: every job fails once (``fail(..., retry_in=0,
  traceback=...)``, one script call each, as a worker writes a failure) and
  then succeeds (``claim_many(500)`` + ``complete_many``), jobs/s;
- the success-only drain (``claim_many(500)`` + ``complete_many``): its
  scripts are the same with or without the log, shown to confirm it;
- the memory of one job row (``MEMORY USAGE``) after 0, 1, 3 and 10 failed
  attempts, each with a 1 KB traceback.

Prints rates, ratios and bytes; never run by the tests.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys

import leaseq
from bench import on_off
from bench.server import Server
from bench.timing import interleaved, rate
from leaseq.store import scripts

_NOTE = re.compile(
    r"local function note_failure\(job, now, attempt, to, err, tb\)\n.*?\nend\n", re.S
)
_STUB = (
    "local function note_failure(job, now, attempt, to, err, tb)\n"
    "  redis.call('HSET', job, 'last_error', err)\nend\n"
)
ERROR = "RuntimeError: SMTP 550: no such user gone@bounce.test"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    + '  File "/srv/app/mail.py", line 42, in send\n    raise RuntimeError(message)\n' * 12
    + ERROR
)


ON = dict(scripts.SCRIPTS)
OFF = on_off.scripts_with(_NOTE, _STUB)
_use = on_off.use


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failures")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per trial")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n = args.jobs
    changed = sorted(k for k in ON if ON[k].sha != OFF[k].sha)
    with Server() as server:
        r = server.client()
        q = leaseq.Queue("bench", redis=r, keep_succeeded=0.0, backoff=0.0, max_attempts=20)
        items = [{"i": i} for i in range(n)]

        def fail_then_succeed() -> None:
            while leases := q.claim_many(500, ttl=3600.0):
                first = [lease for lease in leases if lease.attempt == 1]
                for lease in first:
                    q.fail(lease, ERROR, retry_in=0, traceback=TRACEBACK)
                done = [lease for lease in leases if lease.attempt > 1]
                if done:
                    q.complete_many(done)

        def succeed() -> None:
            while leases := q.claim_many(500, ttl=3600.0):
                q.complete_many(leases)

        cases = {}
        for label, work in (("fail once, then succeed", fail_then_succeed), ("succeed", succeed)):
            for on in (True, False):

                def setup(on: bool = on) -> None:
                    _use(ON if on else OFF)
                    r.flushall()
                    q.enqueue_many(items)

                cases[f"{label} {'on' if on else 'off'}"] = (
                    setup,
                    lambda work=work: rate(n, work),
                )
        got = interleaved(cases, repeats=args.repeats)

        sizes: dict[str, list[int]] = {}
        for on in (True, False):
            _use(ON if on else OFF)
            r.flushall()
            for fails in (0, 1, 3, 10):
                rows = leaseq.Queue(f"rows-{fails}", redis=r, backoff=0.0)
                ids = rows.enqueue_many(items[:50], max_attempts=fails + 1)
                for _ in range(fails):
                    for lease in rows.claim_many(50, ttl=3600.0):
                        rows.fail(lease, ERROR, retry_in=0, traceback=TRACEBACK)
                key = f"{fails} {'on' if on else 'off'}"
                sizes[key] = [int(r.memory_usage(rows.keys.job(i), samples=0) or 0) for i in ids]
        _use(ON)
    print(
        f"failure log cost: scripts that differ: {', '.join(changed)}; {n} jobs a trial, "
        f"median of {args.repeats}, on/off in turns"
    )
    print(f"{'drain':<26} {'on (jobs/s)':>12} {'off (jobs/s)':>13} {'on/off':>7}")
    for label in ("fail once, then succeed", "succeed"):
        on, off = got[f"{label} on"], got[f"{label} off"]
        print(f"{label:<26} {on:>12,.0f} {off:>13,.0f} {on / off:>7.3f}")
    print(f"{'job row after':<26} {'on (bytes)':>12} {'off (bytes)':>13} {'on-off':>7}")
    for fails in (0, 1, 3, 10):
        on_b = statistics.median(sizes[f"{fails} on"])
        off_b = statistics.median(sizes[f"{fails} off"])
        label = f"{fails} failed attempts"
        print(f"{label:<26} {on_b:>12,.0f} {off_b:>13,.0f} {on_b - off_b:>+7,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
