"""Fault matrix: drive a producer and worker processes through each fault, record
the run's history, and let the checker (``bench.histories``) prove it.

    python -m bench.faults                  # every fault, 3,000 jobs each
    python -m bench.faults --quick          # 400 jobs each: what CI runs
    python -m bench.faults --only partition --dir /tmp/runs
    python -m bench.faults --write-docs     # every fault; the table into docs/reliability.md

Every process of a run writes down what it was told as it happens: each
enqueue acknowledged (or refused), each lease with its full token, each
completion acknowledged (or refused), the queue's clock, and each fault
with the window in which the run's settings allow it to lose acknowledged
writes. The checker then reads the history and the rows the run left and
names any violation (``histories.CHECKS``). The faults:

- ``worker-kill``: a worker SIGKILLed every 0.2 s, a fresh one started;
- ``worker-stall``: a worker SIGSTOPped for 0.5 s (past its 0.3 s leases)
  every 0.3 s, then let go, on jobs that take up to 0.2 s;
- ``redis-kill``: the server SIGKILLed twice and started again from its AOF
  (``appendfsync always``: nothing acknowledged may be lost);
- ``redis-kill-everysec``: the same with ``appendfsync everysec``, the
  second kill with a power cut (the AOF cut back 1 s): acknowledged writes
  may be lost within 2 s before a crash, and only there;
- ``partition``: a worker behind a loopback proxy that stalls its link past
  the lease, cuts it, and drops the server's replies;
- ``full-server``: ``maxmemory`` with ``noeviction``: enqueues refused with
  ``ServerFull``, the drain goes on;
- ``evicting-server``: ``maxmemory-policy allkeys-lru``: what a server that
  evicts loses, and that ``leaseq doctor`` said so — a "don't do this" row,
  whose losses are expected: they never fail the exit code;
- ``cluster-kill``, ``cluster-failover``: a Redis Cluster master lost under
  a sharded queue (``bench.cluster_faults``);
- ``sentinel-kill``, ``sentinel-failover``: a Sentinel-managed primary
  SIGKILLed, or handed over by ``SENTINEL FAILOVER`` (``bench.failover``).

The table prints one line per fault; the exit code is 1 when a run broke a
check (the expected-loss row aside).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cluster_faults, failover, histories, server_faults
from tests.support.servers import server_version

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- fault table: begin -->", "<!-- fault table: end -->"


def sentinel(kind: str, where: Path, jobs: int) -> tuple[histories.Verdict, dict[str, Any]]:
    """One Sentinel round of ``bench.failover`` (``kill`` or ``failover``), its
    history checked; the verdict, and the round's own report (whose checks
    join the verdict's as ``failover_report``)."""
    quick = jobs <= 400
    report = failover.run(kind, jobs=jobs * 3 // 8, produce=2.0 if quick else 6.0,
                          after=0.5 if quick else 2.0, rate_jobs=20, timeout=90.0,
                          logs=str(where), history=True)  # fmt: skip
    verdict: histories.Verdict = report.pop("verdict")
    if not failover.ok(report):
        verdict.violations["failover_report"] = [str(report)]
    verdict.counts["first_claim_ms"] = round(1000 * (report["first_claim_on_new_primary_s"] or 0))
    return verdict, report


@dataclass(frozen=True)
class Fault:
    """One row of the matrix: how to run it, and what the table says of it."""

    run: Callable[[Path, int], histories.Verdict]
    what: str
    persistence: str
    expected_loss: bool = False
    """A "don't do this" row: its losses are what it shows, not a failure."""


FAULTS: dict[str, Fault] = {
    "worker-kill": Fault(
        server_faults.worker_kill, "a worker SIGKILLed every ~0.2 s", "none (no server fault)"
    ),
    "worker-stall": Fault(
        server_faults.worker_stall,
        "a worker SIGSTOPped 0.5 s (leases 0.3 s) every ~0.3 s, jobs of up to 0.2 s",
        "none (no server fault)",
    ),
    "redis-kill": Fault(
        server_faults.redis_kill,
        "`redis-server` SIGKILLed twice, restarted from its AOF, plus worker SIGKILLs",
        "AOF, `appendfsync always`",
    ),
    "redis-kill-everysec": Fault(
        server_faults.redis_kill_everysec,
        "`redis-server` SIGKILLed twice, restarted from its AOF; the second time the AOF "
        "is cut back 1 s first (a power cut)",
        "AOF, `appendfsync everysec`: writes of the last 2 s before a crash may go",
    ),
    "partition": Fault(
        server_faults.partition,
        "a worker behind a proxy, while it holds a lease (0.5 s): its link stalled, or cut, "
        "until another worker holds that job (0.55-2.5 s), or its replies dropped 0.5 s",
        "none (no server fault)",
    ),
    "full-server": Fault(
        server_faults.full_server,
        "`maxmemory` reached, `noeviction`: a producer goes on enqueueing 1.5 s",
        "none; `maxmemory-policy noeviction`",
    ),
    "evicting-server": Fault(
        server_faults.evicting_server,
        "**don't do this**: `maxmemory` reached under `allkeys-lru`",
        "none; `maxmemory-policy allkeys-lru`",
        expected_loss=True,
    ),
    "cluster-kill": Fault(
        lambda where, jobs: cluster_faults.run("kill", where, jobs // 2),
        "a Cluster master SIGKILLed after 0.5 s cut off from its replica, the replica promoted",
        "none; 1 replica a master (async), `durable=1` for the kept writes: plain writes "
        "from 1 s before the cut until the old master is a replica may go",
    ),
    "cluster-failover": Fault(
        lambda where, jobs: cluster_faults.run("failover", where, jobs // 2),
        "`CLUSTER FAILOVER` of a master under load",
        "none; 1 replica a master (async), `durable=1` for the kept writes: nothing may go "
        "(the replica catches up first)",
    ),
    "sentinel-kill": Fault(
        lambda where, jobs: sentinel("kill", where, jobs)[0],
        "a Sentinel-managed primary SIGKILLed, its replica promoted",
        "none; 1 replica (async), `durable=1` for the kept writes: plain writes of the "
        "last 1 s before may go",
    ),
    "sentinel-failover": Fault(
        lambda where, jobs: sentinel("failover", where, jobs)[0],
        "`SENTINEL FAILOVER` under load, the old primary left running",
        "none; 1 replica (async), `durable=1` for the kept writes: plain writes from 1 s "
        "before until the old primary is a replica may go",
    ),
}

FAULT_COUNTS = {
    "kills": "worker kills",
    "stalls": "worker stalls",
    "server_crashes": "server crashes",
    "failovers": "failover",
    "link_stalls": "link stalls",
    "cuts": "link cuts",
    "reply_drops": "reply drops",
    "enqueue_refused": "enqueues refused",
    "evicted_keys": "keys evicted",
}
"""The counts that say what a fault did, as the table's words."""
COLUMNS = ["fault", "what", "persistence", "enqueues", "leases", "completions", "faults",
           "reissued", "refused", "lost where allowed", "s", "violations", "reproduce"]  # fmt: skip
NUMBERS = {"enqueues", "leases", "completions", "reissued", "refused", "s"}


def cells(name: str, fault: Fault, v: histories.Verdict) -> list[str]:
    """One row of the table."""
    c = v.counts
    done = [f"{c[k]:,} {label}" for k, label in FAULT_COUNTS.items() if c[k]]
    lost = [_count(c["lost_unkept"], "enqueue"), _count(c["completions_lost"], "completion")]
    broke = ", ".join(f"{k}: {len(w):,}" for k, w in v.violations.items() if w)
    if fault.expected_loss:
        broke = f"expected loss (don't do this): {broke or 'none seen'}"
    return [f"`{name}`", fault.what, fault.persistence, f"{c['enqueue']:,}", f"{c['lease']:,}",
            f"{c['complete']:,}", ", ".join(done) or "—", str(c["attempt_reissued"]),
            _refused(c), ", ".join(filter(None, lost)) or "0", str(c["seconds"]), broke or "none",
            f"`python -m bench.faults --only {name}`"]  # fmt: skip


def _count(n: int, what: str) -> str:
    """ "3 enqueues", "1 enqueue"; "" for none."""
    return f"{n:,} {what}{'s' if n > 1 else ''}" if n else ""


def _refused(c: Counter[str]) -> str:
    """The refused completions and failures, and why: "5 (LeaseLost 3, AlreadyFinished 2)"."""
    why = [(k.removeprefix("refused_"), n) for k, n in c.most_common() if k.startswith("refused_")]
    return f"{c['refused']} ({', '.join(f'{k} {n}' for k, n in why)})" if why else "0"


def table(results: dict[str, histories.Verdict]) -> str:
    """The verdicts as a Markdown table, one line per fault, then each run's notes."""
    lines = ["| " + " | ".join(COLUMNS) + " |"]
    lines.append("| " + " | ".join("---:" if c in NUMBERS else "---" for c in COLUMNS) + " |")
    notes = []
    for name, v in results.items():
        lines.append("| " + " | ".join(cells(name, FAULTS[name], v)) + " |")
        notes += [f"- `{name}`: {note}" for note in v.notes]
    return "\n".join(lines + (["", *notes] if notes else []))


def read_table(text: str) -> dict[str, dict[str, str]]:
    """The rows of a ``table`` back, by fault name, each column by name."""
    found = {}
    for line in text.splitlines():
        row = [c.strip() for c in line.split("|")[1:-1]]
        if len(row) == len(COLUMNS) and row[0].startswith("`"):
            found[row[0].strip("`")] = dict(zip(COLUMNS, row, strict=True))
    return found


def ok(results: dict[str, histories.Verdict]) -> bool:
    """Whether every run kept its checks (an expected-loss row aside)."""
    return all(v.ok for name, v in results.items() if not FAULTS[name].expected_loss)


def write_docs(text: str, jobs: int, path: Path = DOCS) -> None:
    """Put the table in ``path`` between its markers, with when and where it ran."""
    day = datetime.date.today().isoformat()
    head = (f"The last full run (`python -m bench.faults --write-docs`, {day}, {jobs:,} jobs "
            f"from which each fault sizes its backlog — `--quick`: 400 —, {server_version()} on "
            f"loopback, {os.cpu_count()} cores):")  # fmt: skip
    doc = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers")
    path.write_text(pattern.sub(lambda _: f"{BEGIN}\n{head}\n\n{text}\n{END}", doc))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="400 jobs a fault (what CI runs)")
    p.add_argument("--only", choices=sorted(FAULTS), action="append", help="run only these")
    p.add_argument("--dir", help="where the histories go (default: a new temp dir)")
    p.add_argument("--write-docs", action="store_true", help="the table into docs/reliability.md")
    args = p.parse_args(argv)
    if args.write_docs and (args.quick or args.only):
        p.error("--write-docs writes the full run of every fault: no --quick, no --only")
    jobs = 400 if args.quick else 3000
    root = Path(args.dir or tempfile.mkdtemp(prefix="leaseq-faults-"))
    results: dict[str, histories.Verdict] = {}
    for name in args.only or FAULTS:
        where = root / name
        where.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        results[name] = FAULTS[name].run(where, jobs)
        seconds = time.monotonic() - started
        results[name].counts["seconds"] = round(seconds)
        print(f"{name}: {seconds:.1f}s, histories in {where}", file=sys.stderr)
        for check, what in results[name].violations.items():
            print(f"  {check} ({histories.CHECKS.get(check, check)}): {what[:5]}", file=sys.stderr)
    text = table(results)
    print(text)
    if args.write_docs:
        write_docs(text, jobs)
    return 0 if ok(results) else 1


if __name__ == "__main__":
    sys.exit(main())
