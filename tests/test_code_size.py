"""The package stays in small parts: no module over 600 lines, no function over 60.

Read from the code with ``ast``. A module's size is its line count. A function's
size runs from its ``def`` line to its last line (``end_lineno - lineno + 1``):
the docstring counts, since a reader reads it as part of the function, and the
decorators do not, since click's option lists and ``@property`` are declarations
rather than steps. Nested functions are measured on their own and count in their
parent's size too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "leaseq"
ROOT = PACKAGE.parent

MODULE_LINES = 600
FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def oversized() -> list[str]:
    """Every module over MODULE_LINES and function over FUNCTION_LINES, as text."""
    found = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            found.append(f"{_name(path)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > FUNCTION_LINES:
                    found.append(f"{_name(path)}:{node.lineno}: {node.name} is {size} lines")
    return found


def test_no_module_or_function_over_its_limit() -> None:
    over = oversized()
    assert not over, "split these:\n" + "\n".join(over)
