"""leaseq at another git revision, run with its own code in its own process.

``Scratch`` is a temp dir that holds exported revisions (``git archive``: a
plain copy of the tree, nothing registered in the repository, so an
interrupted run leaves nothing behind but the temp dir) and any helper module
the measuring code needs; its ``run`` runs one function of a bench file in a
fresh interpreter whose ``leaseq`` is the given tree's, and returns what the
function returns (JSON). Used by bench/ab.py and bench/guard.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
"""This checkout: the working tree as it is, uncommitted changes included."""


def git(*args: str) -> str:
    """Run git in this checkout; its stdout, stripped."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def describe(rev: str) -> str:
    """``<short hash> <subject>`` of a revision, cut at 80 characters."""
    try:
        line = git("log", "-1", "--format=%h %s", f"{rev}^{{commit}}", "--")
    except subprocess.CalledProcessError:
        raise SystemExit(f"bench: git knows no revision {rev!r}") from None
    return line if len(line) <= 80 else line[:79] + "…"


def newest_tag() -> str | None:
    """The newest tag reachable from HEAD, or None when there is none."""
    try:
        return git("describe", "--tags", "--abbrev=0", "HEAD") or None
    except subprocess.CalledProcessError:
        return None


_RUN = (
    "import json, sys; "
    "import importlib.util as u; s = u.spec_from_file_location('bench_child', sys.argv[1]); "
    "m = u.module_from_spec(s); s.loader.exec_module(m); "
    "print(json.dumps(getattr(m, sys.argv[2])(*json.loads(sys.argv[3]))))"
)


class Scratch:
    """A temp dir for exported revisions and helper modules; removed on exit."""

    def __init__(self, prefix: str = "leaseq-rev-") -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self.modules = self.path / "modules"
        self.modules.mkdir()

    def export(self, rev: str, name: str) -> Path:
        """Revision ``rev`` of this repository as a plain tree under the scratch dir."""
        into = self.path / name
        into.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", f"{rev}^{{commit}}"],
            check=True,
            capture_output=True,
        )
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
        return into

    def module(self, name: str, text: str) -> str:
        """Write a helper module into the scratch import dir; its import name."""
        (self.modules / f"{name}.py").write_text(text)
        return name

    def __enter__(self) -> Scratch:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def env(self, tree: Path) -> dict[str, str]:
        """The environment of a process whose ``leaseq`` is ``tree``'s: the tree
        first on PYTHONPATH, ahead of the installed package, then the helper
        modules; bytecode cached under the scratch dir for every tree alike
        (none written into a checkout). Start it with ``cwd=tree`` too: ``-c``
        and ``-m`` put the cwd first."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(self.modules)])
        env["PYTHONPYCACHEPREFIX"] = str(self.path / "pycache")
        return env

    def run(self, tree: Path, file: str, function: str, args: list[Any]) -> Any:
        """``function(*args)`` from the bench ``file`` (loaded by path, so the
        measuring code is this checkout's for every tree) in a fresh interpreter
        whose leaseq is ``tree``'s; its JSON result. Raises with the child's
        stderr tail on failure."""
        command = [sys.executable, "-c", _RUN, file, function, json.dumps(args)]
        done = subprocess.run(command, env=self.env(tree), cwd=tree, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{function} in {tree} failed:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
