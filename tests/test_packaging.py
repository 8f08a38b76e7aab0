"""The wheel ships the Lua scripts inside the package, and loads them from
there, and the dashboard's templates and assets; the declared redis-py floor
is the one tests/run.sh tests and README states.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

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


def _project() -> Any:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _run_sh_setting(name: str) -> str:
    text = (ROOT / "tests/run.sh").read_text(encoding="utf-8")
    found = re.search(rf'^{name}="([^"]*)"', text, re.MULTILINE)
    assert found, f"tests/run.sh sets no {name}"
    return found.group(1)


def test_the_oldest_pass_runs_the_floors_pyproject_declares() -> None:
    (spec,) = [d for d in _project()["dependencies"] if re.match(r"redis\b", d)]
    floor = spec.removeprefix("redis>=")
    assert spec == f"redis>={floor}" and re.fullmatch(r"\d+\.\d+\.\d+", floor), spec
    assert _run_sh_setting("REDIS_PY_OLDEST") == floor
    assert _project()["requires-python"] == f">={_run_sh_setting('PYTHON_OLDEST')}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    supported = readme[readme.index("## Supported versions") :]
    assert f"`redis>={floor}`" in supported and f"exactly {floor}" in supported


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    command = blocks[1].strip()  # the second command: set up and pass the tests
    assert command == "bash tests/run.sh"
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()
    assert command in ci
    extras = _run_sh_setting("EXTRAS").split(",")
    assert set(extras) <= set(_project()["optional-dependencies"]), extras


def test_a_run_in_which_no_test_passes_fails(tmp_path: Path) -> None:
    # A missing server binary makes the cluster cases skip: everything skipped
    # must not pass for green (tests/conftest.py turns it into exit 5).
    args = [
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/transport/test_cluster.py",
        "-k",
        "enqueue_claim_complete",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=ROOT,
        env={**os.environ, "LEASEQ_REDIS_SERVER": str(tmp_path / "no-such-server")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 5, done.stdout[-2000:]
    assert "skipped" in done.stdout and "no test passed" in done.stdout


def test_the_wheel_ships_templates_and_assets(tmp_path: Any) -> None:
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(root)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = Path(tmp_path).glob("leaseq-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    web = root / "leaseq" / "web"
    shipped = {
        p.relative_to(root).as_posix()
        for p in web.rglob("*")
        if p.suffix in {".html", ".js", ".css"}
    }
    assert len(shipped) >= 9 and shipped <= names


def test_a_core_install_carries_no_embedded_store() -> None:
    """``pip install leaseq`` brings redis-py and msgspec, not fakeredis and its
    native Lua runtime: they come with the memory extra (the demo, your tests)."""
    from importlib.metadata import requires

    def named(req: str) -> str:
        return re.split(r"[\s\[<>=;!~]", req, maxsplit=1)[0].lower()

    core = {named(d) for d in _project()["dependencies"]}
    assert {"redis", "msgspec"} <= core and not core & {"fakeredis", "lupa"}
    assert any(named(d) == "fakeredis" for d in _project()["optional-dependencies"]["memory"])
    # What pip installed says the same (the metadata of this very install).
    for req in requires("leaseq") or []:
        if named(req) in ("fakeredis", "lupa"):
            assert re.search(r"extra\s*==", req), f"{req}: not behind an extra"


@pytest.mark.parametrize("missing", ["fakeredis", "lupa"])
def test_memory_urls_without_the_extra_say_which_to_install(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    import leaseq

    monkeypatch.setitem(sys.modules, missing, None)  # import fails, as if not installed
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'leaseq\[memory\]'") as raised:
        leaseq.Queue.from_url(f"memory://no-{missing}", "emails")
    assert missing in str(raised.value) and raised.value.name == missing
