"""The README and design-doc examples run as tests, so they never rot.

Every ```python block runs as written, in a fresh namespace, on the
embedded memory:// store (fakeredis with the same Lua scripts), which this
file empties before each block. A fence info word changes that:
``no-run`` (needs a real server) is only compiled; ``worker`` runs once
``leaseq.Worker`` exists and is skipped until then.

Beyond the examples, a few checks keep the docs in step with the code:
every key, script, state, row field and counter the code has is named in
docs/design.md, and the README opens with the two commands a newcomer runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import leaseq
import leaseq.transport.memory
from leaseq.store.replies import _Row

ROOT = Path(__file__).resolve().parent.parent


DOCS = ("README.md", "docs/design.md")


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
    compiled = compile(code, f"{name}:{line}", "exec")
    if "no-run" in info:
        return
    if "worker" in info and not hasattr(leaseq, "Worker"):
        pytest.skip("leaseq.Worker is not built yet")
    # Every block starts from empty memory:// stores.
    monkeypatch.setattr(leaseq.transport.memory, "_servers", {})
    exec(compiled, {"__name__": f"doc_example_{line}"})


def test_docs_have_runnable_examples() -> None:
    # Guards the extractor itself: a broken regex must not turn into "0 tests, all green".
    runnable = {name: [b for b in python_blocks(name) if "no-run" not in b[1]] for name in DOCS}
    assert len(runnable["README.md"]) >= 2
    assert len(runnable["docs/design.md"]) >= 1


def test_readme_opens_with_demo_then_tests() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_code = text.index("```")
    demo = text.index(".venv/bin/leaseq demo")
    tests = text.index("bash tests/run.sh")
    assert first_code < demo < tests
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/leaseq demo" in text
    # Nothing but the title and one sentence before the demo command.
    assert text[:first_code].count("\n\n") <= 2


def _design() -> str:
    return (ROOT / "docs/design.md").read_text(encoding="utf-8")


def test_design_names_every_key() -> None:
    keys = leaseq.QueueKeys("leaseq", "q")
    design = _design()
    # Every property that names a key: a value under the queue's stem.
    suffixes = [
        getattr(keys, attr).removeprefix(keys.stem)
        for attr, value in vars(leaseq.QueueKeys).items()
        if isinstance(value, property)
        and attr != "job_prefix"
        and getattr(keys, attr).startswith(keys.stem)
        and getattr(keys, attr) != keys.stem
    ]
    assert len(suffixes) >= 8
    for suffix in suffixes:
        assert f"`{{prefix}}:{{<queue>}}:{suffix}`" in design, f"key {suffix} is undocumented"
    assert "`{prefix}:{<queue>}:job:<id>`" in design


def test_design_names_every_script_and_state() -> None:
    design = _design()
    for script in sorted((ROOT / "lua").glob("*.lua")):
        if script.stem == "stats":
            continue  # read-only, no transition
        assert f"`{script.name}`" in design, f"{script.name} is not in the transition table"
    for state in leaseq.State:
        assert f"| `{state.value}` |" in design, f"state {state.value} has no row"


def test_design_documents_every_row_field() -> None:
    design = _design()
    fields = [*_Row.__struct_fields__, "result", "once:<name>"]
    for field in fields:
        assert f"| `{field}` |" in design, f"row field {field} is undocumented"
    # And every field a script writes is one of them.
    written: set[str] = set()
    for path in (ROOT / "lua").rglob("*.lua"):
        for call in re.findall(r"'HSET(?:NX)?', job, ([^)]*)\)", path.read_text()):
            written.update(re.findall(r"'([a-z_]+)'", call)[0::2])
    written.discard("new")  # the transient value of enqueue's HSETNX, never seen
    assert written, "no HSET found: the pattern above is out of date"
    assert written <= set(fields), f"undocumented fields written: {written - set(fields)}"


def test_design_documents_every_counter() -> None:
    design = _design()
    counters: set[str] = set()
    for path in (ROOT / "lua").rglob("*.lua"):
        text = path.read_text()
        counters.update(re.findall(r"'HINCRBY', meta, '([a-z_]+)'", text))
        counters.update(re.findall(r"bump_counter\(meta, '([a-z_]+)'", text))  # with history
    assert {"seq", "enqueued", "succeeded", "dead"} <= counters
    for counter in counters:
        assert f"`{counter}`" in design, f"meta field {counter} is undocumented"


def test_design_keeps_its_workers_and_scaling_sections() -> None:
    design = _design()
    for heading in ("## Workers and wake-ups", "## Scaling out"):
        assert heading in design
