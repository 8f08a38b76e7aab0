"""The fault matrix's quick form (``python -m bench.faults --quick``: worker
SIGKILLs, a server SIGKILLed and restarted from its AOF) passes its history
checker, and the checker (``bench.histories``) fails on histories seeded by
hand with each violation it looks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import faults, histories
from bench.histories import Row

DONE = Row("succeeded", 1, "f1")


def _lease(job: str, attempt: int, fence: str, worker: int) -> dict[str, Any]:
    return {"op": "lease", "id": job, "attempt": attempt, "fence": fence, "worker": worker}


def _done(job: str, attempt: int, fence: str) -> dict[str, Any]:
    return {"op": "complete", "id": job, "attempt": attempt, "fence": fence}


CLEAN = [
    {"op": "enqueue", "id": "a", "kept": True},
    {"op": "clock", "at": 1_000},
    _lease("a", 1, "f0", 11),  # its worker died: reaped, claimed again
    _lease("a", 2, "f1", 12),
    _done("a", 2, "f1"),
    {"op": "clock", "at": 1_005},
]


def test_a_clean_history_passes() -> None:
    verdict = histories.check(CLEAN, {"a": Row("succeeded", 2, "f1")}, {"a": 1})
    assert verdict.ok and verdict.violations == {}
    assert verdict.counts["lease"] == 2 and verdict.counts["attempt_reissued"] == 0


@pytest.mark.parametrize(
    ("name", "records", "rows", "effects"),
    [
        # Two claims handed out one token: what a failover without fences did.
        ("token_twice", [_lease("a", 1, "f1", 11), _lease("a", 1, "f1", 12)], {"a": DONE}, {}),
        ("lost_enqueue", [{"op": "enqueue", "id": "b", "kept": True}], {"b": None}, {}),
        ("completed_twice", [_done("a", 1, "f0"), _done("a", 1, "f1")], {"a": DONE}, {}),
        ("stale_completion", [_done("a", 1, "f0")], {"a": DONE}, {}),
        ("effect_twice", [], {"a": DONE}, {"a": 2}),
        ("unfinished", [], {"a": Row("active", 1, "f1")}, {}),
        ("clock_back", [{"op": "clock", "at": 9}, {"op": "clock", "at": 8}], {}, {}),
    ],
)
def test_the_checker_fails_a_history_seeded_with_each_violation(
    name: str, records: list[dict[str, Any]], rows: dict[str, Row | None], effects: dict[str, int]
) -> None:
    verdict = histories.check(records, rows, effects)
    assert not verdict.ok
    assert set(k for k, v in verdict.violations.items() if v) == {name}
    assert name in histories.CHECKS


def test_an_attempt_handed_out_again_under_a_new_fence_is_counted_not_a_violation() -> None:
    # A claim a failover lost: the promoted replica hands attempt 1 out again,
    # under its own fence, and only that lease completes.
    records = [_lease("a", 1, "old", 11), _lease("a", 1, "new", 12), _done("a", 1, "new")]
    verdict = histories.check(records, {"a": Row("succeeded", 1, "new")}, {"a": 1})
    assert verdict.ok and verdict.counts["attempt_reissued"] == 1


def test_history_files_cut_by_a_kill_are_read_and_bad_ones_refused(tmp_path: Path) -> None:
    cut = tmp_path / "w.history"
    cut.write_text(json.dumps(CLEAN[0]) + "\n" + '{"op": "lea')  # SIGKILLed mid-line
    assert histories.read([cut]) == [CLEAN[0]]
    bad = tmp_path / "x.history"
    bad.write_text("nonsense\n" + json.dumps(CLEAN[0]) + "\n")
    with pytest.raises(ValueError, match="not a history record"):
        histories.read([bad])


@pytest.mark.slow
def test_the_quick_fault_matrix_passes_its_checker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert faults.main(["--quick", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split("|")[1].strip(): line for line in out.splitlines()[2:]}
    assert set(lines) == set(faults.FAULTS)
    for line in lines.values():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[-1] == "none"
        assert int(cells[2]) > int(cells[1]) // 2  # leases were handed out
        assert int(cells[4]) >= 3  # the faults happened
    # The histories are on disk, for a person to read.
    assert list((tmp_path / "worker-kill").glob("worker-*.history"))
