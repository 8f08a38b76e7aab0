"""The fault matrix's quick form (``python -m bench.faults --quick``: worker
SIGKILLs and stalls, a server SIGKILLed and restarted from its AOF under
``appendfsync always`` and ``everysec``, a worker partitioned behind a
proxy, a full server, an evicting one) passes its history checker, and the
checker (``bench.histories``) fails on histories seeded by hand with each
violation it looks for — a write lost outside its fault's window among them.
(The cluster faults: tests/transport/test_cluster_failover.py; the Sentinel
ones: tests/worker/test_failover.py.)
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


def _enqueue(job: str, kept: bool, at: int) -> dict[str, Any]:
    return {"op": "enqueue", "id": job, "kept": kept, "at": at}


CRASH = {"op": "fault", "what": "SIGKILL", "at": 10_000, "from": 8_000, "to": 10_400}
"""A crash at 10 s whose settings may lose what was acknowledged in the 2 s
before it (and until the server is back, at 10.4 s: nothing can be acknowledged
then, but a reply read just before the kill may be stamped late)."""


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
        # An everysec crash may lose the last 2 s: an enqueue acknowledged 3 s before it,
        # lost, is not the crash's to lose.
        ("lost_outside_window", [CRASH, _enqueue("e", False, 7_000)], {"e": None}, {}),
        ("refused_written", [{"op": "enqueue_refused", "id": "r"}], {"r": DONE}, {}),
    ],
)
def test_the_checker_fails_a_history_seeded_with_each_violation(
    name: str, records: list[dict[str, Any]], rows: dict[str, Row | None], effects: dict[str, int]
) -> None:
    verdict = histories.check(records, rows, effects)
    assert not verdict.ok
    assert set(k for k, v in verdict.violations.items() if v) == {name}
    assert name in histories.CHECKS


def test_writes_lost_inside_a_crash_window_are_counted_and_placed() -> None:
    records = [
        CRASH,
        _enqueue("old", False, 5_000),  # before the window: held
        _enqueue("e1", False, 8_500),  # in it: lost
        _enqueue("e2", False, 9_990),  # in it: lost
        _enqueue("d", True, 9_995),  # in it, but kept (durable=): held
        _lease("a", 1, "f1", 11),
        {**_done("a", 1, "f1"), "at": 9_900, "kept": False},  # lost with the crash...
        _lease("a", 2, "f2", 12),
        {**_done("a", 2, "f2"), "at": 11_000, "kept": False},  # ...so the job ran again
    ]
    rows = {"old": DONE, "e1": None, "e2": None, "d": DONE, "a": Row("succeeded", 2, "f2")}
    verdict = histories.check(records, rows, {"a": 1})
    assert verdict.ok, verdict.violations
    assert verdict.counts["lost_unkept"] == 2 and verdict.counts["completions_lost"] == 1
    assert verdict.notes == [
        "SIGKILL: lost 1 completion, 2 enqueues, acknowledged 1500 ms before it to 10 ms "
        "before it (its window: 2000 ms before it to 400 ms after it)"
    ]


@pytest.mark.parametrize(
    ("records", "rows", "effects", "broke"),
    [
        # Acknowledged after the server was back: no crash's to lose.
        ([CRASH, _enqueue("e", False, 10_500)], {"e": None}, {}, "lost_outside_window"),
        # No time given: it cannot be placed inside the window.
        (
            [CRASH, {"op": "enqueue", "id": "e", "kept": False}],
            {"e": None}, {}, "lost_outside_window",
        ),
        # durable= (kept) is kept inside the window too.
        ([CRASH, _enqueue("d", True, 9_000)], {"d": None}, {}, "lost_enqueue"),
        # A completion lost 3 s before the crash: the job ran again, finished twice.
        (
            [CRASH, {**_done("a", 1, "f1"), "at": 7_000, "kept": False},
             {**_done("a", 2, "f2"), "at": 11_000, "kept": False}],
            {"a": Row("succeeded", 2, "f2")}, {"a": 1}, "lost_outside_window",
        ),
        # A completion taken for lost in the window, whose effect is there twice:
        # a fence that let it through, not the crash.
        (
            [CRASH, {**_done("a", 1, "f1"), "at": 9_000, "kept": False},
             {**_done("a", 2, "f2"), "at": 11_000, "kept": False}],
            {"a": Row("succeeded", 2, "f2")}, {"a": 2}, "effect_twice",
        ),
        # A crash with no window (appendfsync always) may lose nothing: a history
        # that records its faults counts no loss as allowed.
        (
            [{"op": "fault", "what": "SIGKILL", "at": 10_000}, _enqueue("e", False, 9_990)],
            {"e": None}, {}, "lost_outside_window",
        ),
    ],
)  # fmt: skip
def test_a_write_lost_where_no_window_allows_it_is_flagged(
    records: list[dict[str, Any]], rows: dict[str, Row | None], effects: dict[str, int], broke: str
) -> None:
    verdict = histories.check(records, rows, effects)
    assert set(k for k, v in verdict.violations.items() if v) == {broke}


def test_a_job_whose_enqueue_was_not_acknowledged_is_checked_by_its_row() -> None:
    # A durable= enqueue refused (NotReplicated: written, unconfirmed) is not in
    # the history, yet its job ran: its row is read by the ids the records name.
    records = [
        CRASH,
        _lease("n", 1, "f1", 11),
        {**_done("n", 1, "f1"), "at": 12_000, "kept": False},
    ]
    assert histories.ids(records) == ["n"]
    assert histories.check(records, {"n": Row("succeeded", 1, "f1")}, {"n": 1}).ok


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


SINGLE = [name for name in faults.FAULTS if not name.startswith(("cluster-", "sentinel-"))]


@pytest.mark.slow
def test_the_quick_fault_matrix_passes_its_checker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cluster and Sentinel faults have tests of their own.
    only = [arg for name in SINGLE for arg in ("--only", name)]
    # Exit 0: the evicting server's losses are its point, not a failure.
    assert faults.main(["--quick", *only, "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    print(out)  # shown when the test fails
    rows = faults.read_table(out)
    assert set(rows) == set(SINGLE)
    for name, row in rows.items():
        assert row["faults"] != "—", name  # the faults happened
        if name != "evicting-server":  # (whose rows went before they were leased)
            assert row["violations"] == "none", (name, row)
            leases, enqueues = (int(row[k].replace(",", "")) for k in ("leases", "enqueues"))
            assert leases > enqueues // 2, (name, row)
    # The histories are on disk, for a person to read.
    assert list((tmp_path / "worker-kill").glob("worker-*.history"))
    _everysec_lost_only_inside_its_window(rows["redis-kill-everysec"], out)
    # The cut-off worker's late writes were sent and refused: fenced out (LeaseLost),
    # or answered as done by the call that got no reply (AlreadyFinished).
    assert "LeaseLost" in rows["partition"]["refused"], rows["partition"]
    assert "link cuts" in rows["partition"]["faults"]
    # A full server refused enqueues with ServerFull, and the drain went on.
    assert "enqueues refused" in rows["full-server"]["faults"]
    assert "Redis is full and refused the write" in out
    # The evicting server lost jobs, said so, and leaseq doctor warned first.
    evicting = rows["evicting-server"]
    assert evicting["violations"].startswith("expected loss (don't do this): lost_enqueue: ")
    assert "`evicting-server`: `leaseq doctor` said: BAD eviction allkeys-lru" in out


def _everysec_lost_only_inside_its_window(row: dict[str, str], out: str) -> None:
    """The first crash (a process kill) lost nothing; the power cut lost the
    writes of its last second, all inside the window."""
    assert "2 server crashes" in row["faults"]
    assert "enqueues" in row["lost where allowed"], row
    notes = [line for line in out.splitlines() if line.startswith("- `redis-kill-everysec`")]
    assert len(notes) == 2 and "SIGKILL 1: lost nothing" in notes[0], notes
    assert "AOF cut back 1 s: lost " in notes[1], notes


def test_the_table_is_written_between_its_markers(tmp_path: Path) -> None:
    doc = tmp_path / "reliability.md"
    doc.write_text(f"# Title\n\nbefore\n{faults.BEGIN}\nold table\n{faults.END}\nafter\n")
    verdict = histories.check(CLEAN, {"a": Row("succeeded", 2, "f1")}, {"a": 1})
    verdict.counts.update(kills=3, seconds=9)
    text = faults.table({"worker-kill": verdict})
    faults.write_docs(text, 3000, doc)
    written = doc.read_text()
    assert "old table" not in written and written.endswith(f"{faults.END}\nafter\n")
    row = faults.read_table(written)["worker-kill"]
    assert row["faults"] == "3 worker kills" and row["violations"] == "none"
    assert row["reproduce"] == "`python -m bench.faults --only worker-kill`"
    assert "3,000 jobs from which each fault sizes its backlog" in written
    bare = tmp_path / "bare.md"
    bare.write_text("# No markers\n")
    with pytest.raises(SystemExit, match="markers"):
        faults.write_docs(text, 3000, bare)


def test_the_docs_carry_the_table_of_every_fault() -> None:
    # docs/reliability.md has the last full run's table: one row per fault, each
    # with the command that reproduces it.
    rows = faults.read_table(faults.DOCS.read_text())
    assert set(rows) == set(faults.FAULTS)
    for name, row in rows.items():
        assert row["reproduce"] == f"`python -m bench.faults --only {name}`"
        assert row["persistence"] == faults.FAULTS[name].persistence
