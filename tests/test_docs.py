"""The README and design-doc examples run as tests, so they never rot.

Every ```python block runs as written, in a fresh namespace, on the
embedded memory:// store (fakeredis with the same Lua scripts), which this
file empties before each block. A fence info word changes that:
``no-run`` (needs a real server) is only compiled; ``worker`` runs once
``leaseq.Worker`` exists and is skipped until then.

Every page under docs/ is read the same way as the README. A ``no-run``
block may use ``await`` at top level (an example for an async context).

Beyond the examples, a few checks keep the docs in step with the code:
every key, row field and counter the code has is in docs/keys-and-rows.md,
every script and state in docs/states.md's tables, docs/design.md lists
every page, and the README opens with the two commands a newcomer runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

import leaseq
import leaseq.transport.memory
from leaseq.store.replies import _Row

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))
_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


_KNOWN_INFO = {"no-run", "worker"}


def python_blocks(name: str) -> list[tuple[int, set[str], str]]:
    """(line number, fence info words, code) of every ```python block of a doc."""
    text = (ROOT / name).read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, set(m.group(1).split()), m.group(2))
        for m in _FENCE.finditer(text)
    ]


def _cases() -> list[Any]:
    return [
        pytest.param(name, line, info, code, id=f"{name}:{line}")
        for name in DOCS
        for line, info, code in python_blocks(name)
    ]


@pytest.mark.parametrize(("name", "line", "info", "code"), _cases())
def test_doc_example(
    name: str, line: int, info: set[str], code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert info <= _KNOWN_INFO, f"{name}:{line}: unknown fence info {info - _KNOWN_INFO}"
    if "no-run" in info:
        compile(code, f"{name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    compiled = compile(code, f"{name}:{line}", "exec")
    if "worker" in info and not hasattr(leaseq, "Worker"):
        pytest.skip("leaseq.Worker is not built yet")
    # Every block starts from empty memory:// stores.
    monkeypatch.setattr(leaseq.transport.memory, "_servers", {})
    exec(compiled, {"__name__": f"doc_example_{line}"})


def test_docs_have_runnable_examples() -> None:
    # Guards the extractor itself: a broken regex must not turn into "0 tests, all green".
    runnable = {name: [b for b in python_blocks(name) if "no-run" not in b[1]] for name in DOCS}
    assert len(runnable["README.md"]) >= 2
    assert sum(len(blocks) for name, blocks in runnable.items() if name != "README.md") >= 3


def test_readme_opens_with_demo_then_tests() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_code = text.index("```")
    demo = text.index(".venv/bin/leaseq demo")
    tests = text.index("bash tests/run.sh")
    assert first_code < demo < tests
    setup = "python3 -m venv .venv && .venv/bin/pip install -e '.[memory]'"
    assert f"{setup} && .venv/bin/leaseq demo" in text
    # Nothing but the title and one sentence before the demo command.
    assert text[:first_code].count("\n\n") <= 2


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def _pages() -> str:
    pages = [name for name in DOCS if name != "README.md"]
    return "\n".join((ROOT / name).read_text(encoding="utf-8") for name in pages)


def test_key_table_names_every_key() -> None:
    keys = leaseq.QueueKeys("leaseq", "q")
    table = _page("keys-and-rows.md")
    # Every property that names a key: a value under the queue's stem.
    suffixes = [
        getattr(keys, attr).removeprefix(keys.stem)
        for attr, value in vars(leaseq.QueueKeys).items()
        if isinstance(value, property)
        and attr != "job_prefix"
        and getattr(keys, attr).startswith(keys.stem)
        and getattr(keys, attr) != keys.stem
    ]
    suffixes += [key.removeprefix(keys.stem) for key in keys.indexes().values()]
    assert len(suffixes) >= 8
    for suffix in suffixes:
        assert f"| `{{prefix}}:{{<queue>}}:{suffix}" in table, f"key {suffix} is undocumented"
    assert "| `{prefix}:{<queue>}:job:<id>` |" in table


# Scripts that move no job: named in their own pages, not in the transition table.
_NO_TRANSITION = {"events", "history", "hold_results", "ready_page", "register", "workers"}


def test_transition_table_names_every_script_and_state() -> None:
    states, pages = _page("states.md"), _pages()
    for script in sorted((ROOT / "lua").glob("*.lua")):
        if script.stem == "stats":
            continue  # read-only, no transition
        if script.stem in _NO_TRANSITION:
            assert f"`{script.name}`" in pages, f"{script.name} is in no docs page"
        else:
            assert f"`{script.name}`" in states, f"{script.name} is not in the transition table"
    for state in leaseq.State:
        assert f"| `{state.value}` |" in states, f"state {state.value} has no row"


def test_row_table_documents_every_row_field() -> None:
    table = _page("keys-and-rows.md")
    fields = [
        *_Row.__struct_fields__,
        "result",
        "once:<name>",
        "step:<name>",
        "schedule",
        "due_at",
        "keep",
        "delay",
        "waited_until",
    ]
    for field in fields:
        assert f"| `{field}` |" in table, f"row field {field} is undocumented"
    # And every field a script writes is one of them.
    written: set[str] = set()
    for path in (ROOT / "lua").rglob("*.lua"):
        for call in re.findall(r"'HSET(?:NX)?', job, ([^)]*)\)", path.read_text()):
            written.update(re.findall(r"'([a-z_]+)'", call)[0::2])
    written.discard("new")  # the transient value of enqueue's HSETNX, never seen
    assert written, "no HSET found: the pattern above is out of date"
    assert written <= set(fields), f"undocumented fields written: {written - set(fields)}"


def test_keys_page_documents_every_counter() -> None:
    page = _page("keys-and-rows.md")
    counters: set[str] = set()
    for path in (ROOT / "lua").rglob("*.lua"):
        text = path.read_text()
        counters.update(re.findall(r"'HINCRBY', (?:K\.)?meta, '([a-z_]+)'", text))
        counters.update(re.findall(r"bump_counter\(K, '([a-z_]+)'", text))  # with history
    assert {"seq", "enqueued", "succeeded", "dead"} <= counters
    for counter in counters:
        assert f"`{counter}`" in page, f"meta field {counter} is undocumented"


def test_design_index_links_every_page() -> None:
    index = _page("design.md")
    for path in sorted((ROOT / "docs").glob("*.md")):
        if path.name != "design.md":
            assert f"]({path.name})" in index, f"docs/design.md does not list {path.name}"
    for title in ("# Workers", "# Scaling out"):
        assert title in _pages().split("\n"), f"no page titled {title!r}"
