"""Histories of a fault run, and the checker that proves a run kept leaseq's
guarantees (``python -m bench.faults`` records them; tests/transport/test_faults.py
shows the checker failing on histories seeded with a violation).

A history is JSON lines, appended by every process of a run as things happen
(each line flushed at once, so a SIGKILL loses at most a half-written last
line, which ``read`` skips):

- ``{"op": "enqueue", "id": ..., "kept": bool, "at": ms}``: the server
  acknowledged the enqueue (the producer) at ``at`` (optional); ``kept``: the
  run's settings promise it survives the run's faults (``durable=``, or
  ``appendfsync always`` across a server crash);
- ``{"op": "enqueue_refused", "id": ..., "error": name}``: the server refused
  the enqueue (a full server): nothing may have been written;
- ``{"op": "lease", "id": ..., "attempt": n, "fence": f, "worker": w,
  "deadline": ms}``: a claim handed this lease to worker ``w``, due at
  ``deadline`` (server clock; optional);
- ``{"op": "complete", "id": ..., "attempt": n, "fence": f, "at": ms,
  "kept": bool}``: the server acknowledged this lease's completion at ``at``
  (optional); ``kept`` (default true): the run's settings promise it survives
  the faults (``durable=``, ``appendfsync always``);
- ``{"op": "refused", "id": ..., "attempt": n, "fence": f, "error": name}``:
  the server refused this lease's completion or failure (``LeaseLost``, or
  its ``AlreadyFinished`` for a call sent again): counted;
- ``{"op": "fault", "what": text, "at": ms, "from": ms, "to": ms}``: a fault
  happened at ``at``; the run's settings allow it to lose the acknowledged
  writes that are not ``kept`` and were acknowledged from ``from`` to ``to``
  (its *window*: ``appendfsync everysec``'s last seconds before a crash, a
  failover's replication lag and split brain). Without ``from``/``to`` it
  may lose nothing. Once a history records its faults, a write that is not
  ``kept`` may be lost only inside a window; a history that records none
  counts such losses wherever they are (``lost_unkept``);
- ``{"op": "clock", "at": ms, "of": tag}``: the queue's clock
  (``Stats.server_time``) as the driver read it; ``of``: which shard's, for
  a sharded queue (each shard has a clock of its own).

Every ``at``, ``from`` and ``to`` is the machine's wall clock in ms (the
processes of a run share it), taken once the reply arrived (``at``) and,
for a crash, before the signal (``at``) and once the server answers again
(``to``): a write the fault took was acknowledged before it, so a late
stamp cannot put it outside the window.

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

__all__ = ["CHECKS", "Row", "Verdict", "Window", "check", "ids", "read"]

CHECKS = {
    "lost_enqueue": "an acknowledged enqueue the run promises to keep, whose job is gone",
    "lost_outside_window": "an acknowledged write that may be lost, lost outside every window",
    "refused_written": "an enqueue the server refused whose job exists",
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

    @classmethod
    def of(cls, job: Any) -> Row | None:
        """The row of a ``leaseq.Job`` (None: the job is gone)."""
        if job is None:
            return None
        return cls(job.state.value, job.attempts, job.fence or "", job.last_error or "")


@dataclass
class Verdict:
    """What ``check`` found: the violations by check name (each a list of what
    broke it), counts of what was seen, and notes (one line per fault window:
    what it took, and how long before the fault those writes were acknowledged)."""

    violations: dict[str, list[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


@dataclass
class Window:
    """A fault's window (see the ``fault`` record), and what it took."""

    what: str
    at: int
    start: int
    end: int
    lost: Counter[str] = field(default_factory=Counter)
    ages: list[int] = field(default_factory=list)
    """For each write it took: ms from its acknowledgement to the fault."""

    def note(self) -> str:
        """What it took, e.g. "SIGKILL: lost 3 enqueues, acknowledged 12 to 940 ms
        before it (its window: 2000 ms before it to 310 ms after)"."""
        took = ", ".join(
            f"{n} {kind if n > 1 else kind[:-1]}" for kind, n in sorted(self.lost.items())
        )
        took = took or "nothing"
        line = f"{self.what}: lost {took}"
        if self.ages:
            early, late = _when(max(self.ages)), _when(min(self.ages))
            line += f", acknowledged {early}" + (f" to {late}" if late != early else "")
        return line + f" (its window: {_when(self.at - self.start)} to {_when(self.at - self.end)})"


def _when(before: int) -> str:
    """``before`` ms before the fault, in words ("120 ms before it", "3 ms after")."""
    return f"{before} ms before it" if before >= 0 else f"{-before} ms after it"


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


def ids(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every job id the records name, in order: the ids whose rows ``check``
    needs (a job whose enqueue was not acknowledged may still have run)."""
    return list(dict.fromkeys(r["id"] for r in records if "id" in r))


def check(
    records: Iterable[Mapping[str, Any]],
    rows: Mapping[str, Row | None],
    effects: Mapping[str, int] | None = None,
) -> Verdict:
    """Check a run's records against ``rows`` (every id of ``ids(records)`` -> its
    row, None when gone) and ``effects`` (id -> times its effect was applied)."""
    v = Verdict()
    records = list(records)
    faults = [r for r in records if r["op"] == "fault"]
    windows = [Window(r["what"], r["at"], r["from"], r["to"]) for r in faults if "from" in r]
    tokens: Counter[tuple[str, int, str]] = Counter()
    attempts: Counter[tuple[str, int]] = Counter()
    completions: dict[str, list[Mapping[str, Any]]] = {}
    clocks: dict[str, list[int]] = {}
    deadlines: dict[str, dict[int, list[int]]] = {}
    for r in records:
        op = r["op"]
        v.counts[op] += 1
        if op == "enqueue" and rows.get(r["id"]) is None:
            if r.get("kept"):
                _broke(v, "lost_enqueue", r["id"])
            elif _allowed(v, r, windows if faults else None, "enqueues"):
                v.counts["lost_unkept"] += 1
        elif op == "enqueue_refused" and rows.get(r["id"]) is not None:
            _broke(v, "refused_written", r["id"])
        elif op == "lease":
            tokens[(r["id"], r["attempt"], r["fence"])] += 1
            attempts[(r["id"], r["attempt"])] += 1
            if "deadline" in r:
                deadlines.setdefault(r["id"], {}).setdefault(r["attempt"], []).append(r["deadline"])
        elif op == "complete":
            completions.setdefault(r["id"], []).append(r)
        elif op == "refused":
            v.counts[f"refused_{r.get('error', '')}"] += 1
        elif op == "clock":
            clocks.setdefault(r.get("of", ""), []).append(r["at"])
    for (job, attempt, fence), n in tokens.items():
        if n > 1:
            _broke(v, "token_twice", f"{job} attempt {attempt} fence {fence} x{n}")
    # A failover that loses a claim hands the same attempt out again, under a
    # new fence: counted, not a violation (only equal tokens are).
    v.counts["attempt_reissued"] = sum(1 for n in attempts.values() if n > 1)
    _completions(v, completions, rows, windows if faults else None)
    _finished(v, rows)
    for job, n in (effects or {}).items():
        if n > 1:
            _broke(v, "effect_twice", f"{job} x{n}")
    for of, clock in clocks.items():
        for before, after in itertools.pairwise(clock):
            if after < before:
                _broke(v, "clock_back", f"{of or 'queue'}: {before} -> {after}")
    _lease_times(v, deadlines)
    v.notes += [w.note() for w in windows]
    return v


def _allowed(v: Verdict, r: Mapping[str, Any], windows: list[Window] | None, kind: str) -> bool:
    """Whether the lost write ``r`` (not ``kept``) is one the run's settings allow
    to lose: anywhere when the history records no fault (``windows`` None),
    else only when it was acknowledged inside a window (which then counts
    it). Breaks ``lost_outside_window`` when not."""
    if windows is None:
        return True
    at = r.get("at")
    for w in windows:
        if at is not None and w.start <= at <= w.end:
            w.lost[kind] += 1
            w.ages.append(w.at - at)
            return True
    _broke(v, "lost_outside_window", f"{kind[:-1]} {r['id']} acknowledged at {at}")
    return False


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
    v: Verdict,
    completions: Mapping[str, list[Mapping[str, Any]]],
    rows: Mapping[str, Row | None],
    windows: list[Window] | None,
) -> None:
    """Each job's acknowledged completions against its row: the one the row holds
    (succeeded under its token) is kept; one the run's settings may lose (not
    ``kept``) that the row does not hold was lost, and must lie where the
    settings allow (counted); of the rest, two are one too many, and the last
    must be the row's. (A completion taken for lost that a broken fence had in
    fact accepted would have applied its effect: ``effect_twice`` still sees it.)"""
    for job, done in completions.items():
        row = rows.get(job)
        final = (row.attempts, row.fence) if row is not None and row.state == "succeeded" else None
        held = []
        for c in done:
            if (c["attempt"], c["fence"]) != final and not c.get("kept", True):
                if _allowed(v, c, windows, "completions"):
                    v.counts["completions_lost"] += 1
                continue
            held.append((c["attempt"], c["fence"]))
        if len(held) > 1:
            _broke(v, "completed_twice", f"{job}: {held}")
        if final is not None and held and held[-1] != final:
            _broke(v, "stale_completion", f"{job}: acked {held[-1]}, row {row}")


def _finished(v: Verdict, rows: Mapping[str, Row | None]) -> None:
    for job, row in rows.items():
        if row is not None and row.state not in ("succeeded", "dead"):
            _broke(v, "unfinished", f"{job} {row.state}")
        if row is not None and row.state == "dead" and not row.reason:
            _broke(v, "dead_silent", job)
        v.counts["rows_" + ("gone" if row is None else row.state)] += 1


def _broke(v: Verdict, name: str, what: str) -> None:
    v.violations.setdefault(name, []).append(what)
