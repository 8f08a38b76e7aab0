"""The fault matrix's quick form (``python -m bench.faults --quick``: worker
SIGKILLs, a server SIGKILLed and restarted from its AOF) passes its history
checker, and the checker (``bench.histories``) fails on histories seeded by
hand with each violation it looks for. (The cluster faults:
tests/transport/test_cluster_failover.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import faults, histories
from bench.histories import Row

DONE = Row("succeeded", 1, "f1")


def _lease(job: str, attempt: int, fence: str, worker: int, deadline: int = 0) -> dict[str, Any]:
    lease = {"op": "lease", "id": job, "attempt": attempt, "fence": fence, "worker": worker}
    return {**lease, "deadline": deadline} if deadline else lease


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
        # A later attempt leased due before an earlier one: the job's times stepped back.
        (
            "lease_back",
            [_lease("a", 1, "f0", 11, 2_000), _lease("a", 2, "f1", 12, 1_500)],
            {"a": DONE},
            {},
        ),
        ("dead_silent", [], {"a": Row("dead", 3, "f1", "")}, {}),
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


def test_each_shard_has_a_clock_of_its_own() -> None:
    # Two shards on two masters read in turns: their clocks differ, and only a
    # shard whose own clock steps back breaks the check.
    turns = [
        {"op": "clock", "at": at, "of": of}
        for at, of in [(10, "q#0"), (7, "q#1"), (11, "q#0"), (8, "q#1")]
    ]
    assert histories.check(turns, {}).ok
    back = histories.check([*turns, {"op": "clock", "at": 6, "of": "q#1"}], {})
    assert back.violations == {"clock_back": ["q#1: 8 -> 6"]}


def test_a_lost_enqueue_the_run_did_not_promise_to_keep_is_counted_not_a_violation() -> None:
    records = [
        {"op": "enqueue", "id": "p1", "kept": False},
        {"op": "enqueue", "id": "d1", "kept": True},
    ]
    verdict = histories.check(records, {"p1": None, "d1": DONE})
    assert verdict.ok and verdict.counts["lost_unkept"] == 1


def test_leases_of_one_attempt_handed_out_again_may_be_due_in_any_order() -> None:
    # A lost claim and its reissue share an attempt: only a later attempt due
    # before an earlier one steps back.
    records = [_lease("a", 1, "old", 11, 2_000), _lease("a", 1, "new", 12, 1_900),
               _lease("a", 2, "f2", 12, 2_000)]  # fmt: skip
    assert histories.check(records, {"a": Row("succeeded", 2, "f2")}).ok


def test_a_dead_job_with_its_reason_passes() -> None:
    assert histories.check([], {"a": Row("dead", 8, "f1", "poison: this job always fails")}).ok


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
    # The cluster faults have a test of their own (tests/transport/test_cluster_failover.py).
    single = [name for name in faults.FAULTS if not name.startswith("cluster-")]
    only = [arg for name in single for arg in ("--only", name)]
    assert faults.main(["--quick", *only, "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split("|")[1].strip(): line for line in out.splitlines()[2:]}
    assert set(lines) == set(single)
    for line in lines.values():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[-1] == "none"
        assert int(cells[2]) > int(cells[1]) // 2  # leases were handed out
        assert int(cells[4]) >= 3  # the faults happened
    # The histories are on disk, for a person to read.
    assert list((tmp_path / "worker-kill").glob("worker-*.history"))
