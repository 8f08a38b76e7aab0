"""The package's layers point one way: each module imports only its own layer and
those below it (read from the code with ``ast``; imports for the type checker,
under ``if TYPE_CHECKING:``, count too).

From the bottom: the values (errors, types); the queue protocols and what
leaseq shows the world (observe); the sans-I/O store; the I/O transport; the
worker machinery with what a handler sees; the public classes; on top the two
front ends, the dashboard and the CLI. The store never imports redis-py;
nothing but the CLI imports the dashboard, and nothing but ``python -m
leaseq`` imports the CLI.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "leaseq"

LAYERS: list[tuple[str, ...]] = [
    ("leaseq.errors", "leaseq.types"),
    ("leaseq.protocols", "leaseq.observe"),
    ("leaseq.store",),
    ("leaseq.transport",),
    ("leaseq.work", "leaseq.handler"),
    (
        "leaseq.queue",
        "leaseq.queue_set",
        "leaseq.sharded",
        "leaseq.worker",
        "leaseq.supervisor",
        "leaseq.aio",
        "leaseq",  # the package's __init__: re-exports only
    ),
    ("leaseq.web", "leaseq.django", "leaseq.testing"),
    ("leaseq.cli", "leaseq.__main__"),
]
"""Bottom to top. A module is in the layer of the longest prefix that names it."""

IO_LIBRARIES = ("redis", "fakeredis", "subprocess", "asyncio", "urllib")
"""What the store (sans-I/O) may not import."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    best, found = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, found = len(name), i
    assert found >= 0, f"{module} is in no layer: add it to LAYERS"
    return found


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                assert child.level == 0, f"{path}:{child.lineno}: use absolute imports"
                base = child.module or ""
                found.append((child.lineno, base))
                # ``from leaseq.store import keys`` imports the module leaseq.store.keys
                found.extend((child.lineno, f"{base}.{alias.name}") for alias in child.names)
            visit(child)

    visit(tree)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_in_a_layer() -> None:
    for path in MODULES:
        layer_of(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path: Path) -> None:
    me = module_name(path)
    mine = layer_of(me)
    for line, target in imports(path):
        if target != "leaseq" and not target.startswith("leaseq."):
            continue
        if (
            not (PACKAGE.parent / (target.replace(".", "/") + ".py")).exists()
            and not (PACKAGE.parent / target.replace(".", "/") / "__init__.py").exists()
        ):
            continue  # a name imported from a module, not a module
        if target == "leaseq" and me != "leaseq":
            raise AssertionError(f"{me}:{line} imports the package root; import the module")
        theirs = layer_of(target)
        assert theirs <= mine, (
            f"{me}:{line} imports {target}, a layer above it "
            f"({LAYERS[theirs][0]} over {LAYERS[mine][0]})"
        )


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "store").rglob("*.py")), ids=lambda p: module_name(p)
)
def test_the_store_does_no_io(path: Path) -> None:
    for line, target in imports(path):
        top = target.split(".")[0]
        assert top not in IO_LIBRARIES, f"{module_name(path)}:{line} imports {target}"


def test_only_the_cli_imports_the_dashboard_and_only_main_the_cli() -> None:
    for path in MODULES:
        me = module_name(path)
        for line, target in imports(path):
            if target.startswith("leaseq.web") and not me.startswith(("leaseq.web", "leaseq.cli")):
                raise AssertionError(f"{me}:{line} imports the dashboard")
            if target.startswith("leaseq.cli") and not me.startswith(
                ("leaseq.cli", "leaseq.__main__")
            ):
                raise AssertionError(f"{me}:{line} imports the CLI")


def test_the_architecture_page_names_every_module_once() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = re.findall(r"^- `(leaseq/[\w/]+\.py)` — \S", page, re.MULTILINE)
    modules = sorted(str(p.relative_to(PACKAGE.parent)) for p in MODULES)
    assert sorted(named) == modules, (
        f"docs/architecture.md misses {sorted(set(modules) - set(named))}, "
        f"names gone modules {sorted(set(named) - set(modules))}"
    )
