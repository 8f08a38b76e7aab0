"""The performance guard's command line and table (``python -m bench.guard``).

The guard itself is a measurement, run by hand: these only check that its
options parse, that its table reads the targets right, and that a revision
exports as a tree of its own.
"""

from __future__ import annotations

import pytest

from bench import ab, guard, vs_huey
from bench.revisions import Scratch


def test_the_guard_parses_its_options_and_judges_the_targets() -> None:
    assert callable(ab.main) and callable(vs_huey.main)
    default = guard.parse_args([])
    assert (default.jobs, default.rounds, default.rev, default.no_huey) == (20_000, 5, None, False)
    quick = guard.parse_args(["--quick", "--rev", "v1.0"])
    assert (quick.jobs, quick.rounds, quick.rev) == (5_000, 3, "v1.0")
    for bad in (["--rev", "x", "--no-rev"], ["--jobs", "1500"], ["--rounds", "0"]):
        with pytest.raises(SystemExit):
            guard.parse_args(bad)

    def side(drain: float, bytes_single: float) -> dict[str, float]:
        return {"drain": drain, "bytes_single": bytes_single, "enqueue_per_lpush": 1.1}

    sides = {
        "this": guard.Side("this tree", "leaseq", guard.Path(".")),
        "huey": guard.Side("huey", "huey", guard.Path(".")),
    }
    got = {
        "this": [side(9_000, 220), side(8_000, 230), side(10_000, 225)],
        "huey": [side(2_000, 130), side(2_500, 131), side(2_000, 129)],
    }
    lines = guard.table(sides, got).splitlines()
    drain = next(line for line in lines if line.startswith("| drain"))
    # Ratios are taken round by round: 4.5, 3.2, 5.0 -> median 4.5.
    assert "| 9,000 | 2,000 | 4.50 [3.20, 5.00] | >= 4x huey | met |" in drain
    assert any("one by one | 225 | 130 |" in line and "| met |" in line for line in lines)
    assert lines[-1] == "targets met: 3 of 3"


def test_a_revision_exports_as_its_own_tree() -> None:
    with Scratch() as scratch:
        tree = scratch.export("HEAD", "head")
        assert (tree / "leaseq" / "__init__.py").is_file()
        assert (tree / "lua").is_dir()
        assert scratch.module("helper", "X = 1\n") == "helper"
        assert (scratch.modules / "helper.py").read_text() == "X = 1\n"
    assert not scratch.path.exists()
