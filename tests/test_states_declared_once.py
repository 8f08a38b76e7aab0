"""The job states are spelled once, in ``leaseq.types.State``; every other place that
counts, indexes, shows or maps them reads ``State`` or is checked against it here.

The Lua side (the generated libraries, and no other Lua file spelling a list of
states or of ``K.<state>`` indexes) is checked in tests/store/test_states.py, and
Django's status map in tests/django/test_backend.py. This file holds the Python
side: ``Stats``, ``QueueKeys``, the look of each state (the CLI's column heads,
the dashboard's colours), the templates and stylesheets, and a scan of the package
for a hand-written mapping or list of states.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import msgspec

import leaseq
from leaseq.observe.state_style import STYLES, stylesheet
from leaseq.types import State, Stats

PACKAGE = Path(leaseq.__file__).resolve().parent
WEB = PACKAGE / "web"
NAMES = {s.value for s in State}
MEMBERS = {s.name for s in State}

DECLARED = {
    Path("types.py"): "State, TRANSITIONS and Stats: the declaration (Stats checked below)",
    Path("observe/state_style.py"): "STYLES, one look per state (checked below)",
    Path("django/backend.py"): "STATUS, one task status per state (tests/django)",
    Path("store/filters.py"): "SCORED_BY, the indexes scored by a row time (test_filters.py)",
}
"""The modules allowed a per-state table, each with what checks it against State."""


def test_stats_has_one_count_per_state_in_state_order() -> None:
    fields = msgspec.structs.fields(Stats)
    counts = [f.name for f in fields if f.name in NAMES]
    assert set(counts) == NAMES, "give the new state its count in Stats"
    assert all(f.type is int for f in fields if f.name in NAMES)
    snap = msgspec.convert({"queue": "q", **dict.fromkeys(_required(), 0)}, Stats)
    assert list(snap.counts()) == list(State)


def _required() -> list[str]:
    return [f.name for f in msgspec.structs.fields(Stats) if f.required and f.name != "queue"]


def test_queue_keys_name_each_index_from_state_not_one_member_each() -> None:
    keys = leaseq.QueueKeys("leaseq", "q")
    assert not NAMES & set(vars(leaseq.QueueKeys)), "a per-state member: use index(state)"
    assert list(keys.indexes()) == list(State)
    for state, key in keys.indexes().items():
        assert key == keys.index(state.value) == getattr(keys, state.value) == keys.stem + state
        assert key in keys.markers()


def test_every_state_has_a_look() -> None:
    assert list(STYLES) == list(State), "give the new state its look in state_style.py"
    shorts = [look.short for look in STYLES.values()]
    assert len(set(shorts)) == len(shorts)
    assert all(len(short) <= 5 for short in shorts), "the stats table must fit 80 columns"
    css = stylesheet()
    for state in State:
        assert f"--{state.value}: {STYLES[state].colour};" in css
        assert f".st-{state.value} {{ color: var(--{state.value}); }}" in css


def test_the_stylesheet_and_templates_spell_no_state() -> None:
    css = (WEB / "static" / "leaseq.css").read_text(encoding="utf-8")
    for state in NAMES:
        assert not re.search(rf"(\.st-{state}\b|--{state}\s*:)", css), f"leaseq.css spells {state}"
    for page in sorted((WEB / "templates").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        spelled = set(re.findall(r"\bst-(\w+)", text)) & NAMES
        assert not spelled, f"{page.name} spells the class st-<state> of {sorted(spelled)}"


def _state_names(nodes: list[ast.expr | None]) -> set[str]:
    found = set()
    for node in nodes:
        if isinstance(node, ast.Constant) and node.value in NAMES:
            found.add(str(node.value))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "State"
            and node.attr in MEMBERS
        ):
            found.add(node.attr.lower())
    return found


def _per_state_tables(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """Where a module spells states one by one: a dict keyed only by states; a list,
    tuple or set of all states but at most one; a class with a field or method per
    state; a call passing a keyword per state (``Stats(pending=..., dead=...)``)."""
    found = []
    for node in ast.walk(tree):
        names: set[str] = set()
        if isinstance(node, ast.Dict):
            keyed = _state_names(list(node.keys))
            if len(keyed) >= 2 and len(keyed) == len(node.keys):
                names = keyed
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            listed = _state_names(list(node.elts))
            if len(listed) >= len(NAMES) - 1:
                names = listed
        elif isinstance(node, ast.ClassDef):
            members = {
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
            members |= {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            if len(members & NAMES) >= 2:
                names = members & NAMES
        elif isinstance(node, ast.Call):
            passed = {k.arg for k in node.keywords if k.arg} & NAMES
            if len(passed) >= 2:
                names = passed
        if names:
            found.append((getattr(node, "lineno", 0), names))
    return found


def test_no_module_spells_the_states_one_by_one() -> None:
    spelled = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE)
        tables = _per_state_tables(ast.parse(path.read_text(encoding="utf-8")))
        if tables and where not in DECLARED:
            spelled[str(where)] = tables
    assert not spelled, f"states spelled one by one (loop over State instead): {spelled}"


def test_the_scan_finds_what_it_looks_for() -> None:
    """The scan above is only worth what it catches: the shapes it once found."""
    samples = [
        'short = {"waiting": "wait", "pending": "pend"}',
        "class K:\n    def pending(self): ...\n    def dead(self): ...",
        "Stats(pending=int(r[1]), dead=int(r[5]))",
        f"ALL = {tuple(sorted(NAMES))!r}",
        "STATUS = {State.PENDING: 1, State.ACTIVE: 2}",
    ]
    for sample in samples:
        assert _per_state_tables(ast.parse(sample)), sample
    for fine in ('drop = state in ("active", "pending")', 'SORTS = {"name": 1, "dead": 2}'):
        assert not _per_state_tables(ast.parse(fine)), fine
