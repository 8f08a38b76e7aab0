"""The wheel ships the Lua scripts inside the package, and loads them from there."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_every_script_and_py_typed(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("leaseq-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    scripts = {p.relative_to(ROOT).as_posix() for p in (ROOT / "lua").rglob("*.lua")}
    assert scripts, "no scripts found in lua/"
    assert {f"leaseq/{s}" for s in scripts} <= names
    assert "leaseq/py.typed" in names
    assert not any(n.startswith("tests/") or n.endswith(".pyc") for n in names)
