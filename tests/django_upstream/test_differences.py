"""differences.txt, the upstream Django tests leaseq is expected to fail or not
run, agrees with docs/django.md: every reason it gives is explained there, every
reason explained is given, and the documented failure counts are its own."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.django_upstream.run import DIFFERENCES, SUITES

DOC = Path(__file__).resolve().parents[2] / "docs" / "django.md"
SUITE_ROWS = {"django": "Django", "db": "django-tasks-db", "rq": "django-tasks-rq"}
"""Each suite's row in the doc's counts table starts with this."""


def section() -> str:
    """The doc's conformance section, where the counts and the reasons are."""
    return DOC.read_text().split("## Conformance", 1)[1]


def entries() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in DIFFERENCES.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            suite, outcome, node, reason = line.split()
            rows.append((suite, outcome, node, reason))
    return rows


def test_every_line_names_a_suite_an_outcome_and_one_test_once() -> None:
    rows = entries()
    assert rows
    assert {suite for suite, *_ in rows} <= set(SUITES)
    assert {outcome for _, outcome, *_ in rows} == {"fails", "not-run"}
    nodes = Counter((suite, node) for suite, _, node, _ in rows)
    assert [n for n, count in nodes.items() if count > 1] == []
    for _, outcome, node, _ in rows:
        assert node.count("::") == 2 or outcome == "not-run", node  # a class is not run


def test_every_reason_is_explained_in_docs_and_every_explanation_used() -> None:
    explained = set(re.findall(r"^\| `([a-z-]+)`", section(), flags=re.M))
    given = {reason for *_, reason in entries()}
    assert given - explained == set(), "explain these reasons in docs/django.md"
    assert explained - given == set(), "docs/django.md explains reasons no test has"


def test_the_documented_failure_counts_are_the_lists() -> None:
    text = section()
    fails = Counter(suite for suite, outcome, *_ in entries() if outcome == "fails")
    for suite, row in SUITE_ROWS.items():
        (line,) = [ln for ln in text.splitlines() if ln.startswith(f"| {row} ")]
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert int(cells[5]) == fails[suite], f"docs/django.md: {suite}'s failures"
        tests, not_run, run, passed, failed = (int(c) for c in cells[1:6])
        assert tests - not_run == run and passed + failed <= run, line
