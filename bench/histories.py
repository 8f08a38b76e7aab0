"""Histories of a fault run, and the checker that proves a run kept leaseq's
guarantees (``python -m bench.faults`` records them; tests/transport/test_faults.py
shows the checker failing on histories seeded with a violation).

A history is JSON lines, appended by every process of a run as things happen
(each line flushed at once, so a SIGKILL loses at most a half-written last
line, which ``read`` skips):

- ``{"op": "enqueue", "id": ..., "kept": bool}``: the server acknowledged
  the enqueue (the producer); ``kept``: the run's settings promise it
  survives the run's faults (``durable=``, or ``appendfsync always`` across
  a server crash);
- ``{"op": "lease", "id": ..., "attempt": n, "fence": f, "worker": w,
  "deadline": ms}``: a claim handed this lease to worker ``w``, due at
  ``deadline`` (server clock; optional);
- ``{"op": "complete", "id": ..., "attempt": n, "fence": f}``: the server
  acknowledged this lease's completion;
- ``{"op": "clock", "at": ms, "of": tag}``: the queue's clock
  (``Stats.server_time``) as the driver read it; ``of``: which shard's, for
  a sharded queue (each shard has a clock of its own).

``check`` compares them with the rows as the run left them (``Row``) and the
effects each job applied, and names every violation it finds.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CHECKS", "Row", "Verdict", "check", "read"]

CHECKS = {
    "lost_enqueue": "an acknowledged enqueue the run promises to keep, whose job is gone",
    "unfinished": "a job neither succeeded nor dead once the faults stopped",
    "token_twice": "one token (job, attempt, fence) handed out by two claims",
    "completed_twice": "two completions of one job acknowledged",
    "stale_completion": "an acknowledged completion from a lease that is not the job's last",
    "effect_twice": "a job's fenced effect applied more than once",
    "clock_back": "the queue's clock read earlier than a reading before it",
    "lease_back": "a job leased at a later attempt due before a lease of an earlier attempt",
    "dead_silent": "a job dead with no reason given (last_error empty)",
}
"""Every violation the checker looks for, by name."""


@dataclass(frozen=True)
class Row:
    """A job row as the run left it."""

    state: str
    attempts: int
    fence: str
    reason: str = ""
    """``last_error``: why the job is dead (or failed last)."""


@dataclass
class Verdict:
    """What ``check`` found: the violations by check name (each a list of what
    broke it) and counts of what was seen."""

    violations: dict[str, list[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


def read(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every record of these history files, file by file; a last line cut by a
    SIGKILL (not JSON) is skipped, a bad line elsewhere raises ValueError."""
    records: list[dict[str, Any]] = []
    for path in paths:
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if n != len(lines) - 1:
                    raise ValueError(f"{path}:{n + 1}: not a history record: {line!r}") from None
    return records


def check(
    records: Iterable[Mapping[str, Any]],
    rows: Mapping[str, Row | None],
    effects: Mapping[str, int] | None = None,
) -> Verdict:
    """Check a run's records against ``rows`` (every enqueued id -> its row, None
    when gone) and ``effects`` (id -> times its effect was applied)."""
    v = Verdict()
    tokens: Counter[tuple[str, int, str]] = Counter()
    attempts: Counter[tuple[str, int]] = Counter()
    completions: dict[str, list[tuple[int, str]]] = {}
    clocks: dict[str, list[int]] = {}
    deadlines: dict[str, dict[int, list[int]]] = {}
    for r in records:
        op = r["op"]
        v.counts[op] += 1
        if op == "enqueue" and rows.get(r["id"]) is None:
            if r.get("kept"):
                _broke(v, "lost_enqueue", r["id"])
            else:  # lost where the run's settings say it may be: counted
                v.counts["lost_unkept"] += 1
        elif op == "lease":
            tokens[(r["id"], r["attempt"], r["fence"])] += 1
            attempts[(r["id"], r["attempt"])] += 1
            if "deadline" in r:
                deadlines.setdefault(r["id"], {}).setdefault(r["attempt"], []).append(r["deadline"])
        elif op == "complete":
            completions.setdefault(r["id"], []).append((r["attempt"], r["fence"]))
        elif op == "clock":
            clocks.setdefault(r.get("of", ""), []).append(r["at"])
    for (job, attempt, fence), n in tokens.items():
        if n > 1:
            _broke(v, "token_twice", f"{job} attempt {attempt} fence {fence} x{n}")
    # A failover that loses a claim hands the same attempt out again, under a
    # new fence: counted, not a violation (only equal tokens are).
    v.counts["attempt_reissued"] = sum(1 for n in attempts.values() if n > 1)
    _completions(v, completions, rows)
    _finished(v, rows)
    for job, n in (effects or {}).items():
        if n > 1:
            _broke(v, "effect_twice", f"{job} x{n}")
    for of, clock in clocks.items():
        for before, after in itertools.pairwise(clock):
            if after < before:
                _broke(v, "clock_back", f"{of or 'queue'}: {before} -> {after}")
    _lease_times(v, deadlines)
    return v


def _lease_times(v: Verdict, deadlines: Mapping[str, Mapping[int, list[int]]]) -> None:
    """A claim of attempt n + 1 comes after every claim of attempt n (a lost claim
    too: the row it left behind is older still), and leases of one run are of one
    length: so with the queue's clock never stepping back, a later attempt is
    never due before an earlier one."""
    for job, by_attempt in deadlines.items():
        ordered = sorted(by_attempt.items())
        for (a, earlier), (b, later) in itertools.pairwise(ordered):
            if min(later) < max(earlier):
                _broke(
                    v,
                    "lease_back",
                    f"{job}: attempt {b} due {min(later)} < attempt {a} {max(earlier)}",
                )


def _completions(
    v: Verdict, completions: Mapping[str, list[tuple[int, str]]], rows: Mapping[str, Row | None]
) -> None:
    for job, done in completions.items():
        if len(done) > 1:
            _broke(v, "completed_twice", f"{job}: {done}")
        row = rows.get(job)
        if row is not None and row.state == "succeeded" and done[-1] != (row.attempts, row.fence):
            _broke(v, "stale_completion", f"{job}: acked {done[-1]}, row {row}")


def _finished(v: Verdict, rows: Mapping[str, Row | None]) -> None:
    for job, row in rows.items():
        if row is not None and row.state not in ("succeeded", "dead"):
            _broke(v, "unfinished", f"{job} {row.state}")
        if row is not None and row.state == "dead" and not row.reason:
            _broke(v, "dead_silent", job)
        v.counts["rows_" + ("gone" if row is None else row.state)] += 1


def _broke(v: Verdict, name: str, what: str) -> None:
    v.violations.setdefault(name, []).append(what)
