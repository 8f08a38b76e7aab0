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
import time
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
        self.started = 0

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

    def start(self, tree: Path, file: str, function: str, args: list[Any]) -> Child:
        """Start ``function(*args)`` from the bench ``file`` (loaded by path, so
        the measuring code is this checkout's for every tree) in a fresh
        interpreter whose leaseq is ``tree``'s; ``gather`` collects it."""
        command = [sys.executable, "-c", _RUN, file, function, json.dumps(args)]
        self.started += 1
        return Child(command, self.env(tree), tree, self.path / f"child-{self.started}")

    def run(self, tree: Path, file: str, function: str, args: list[Any]) -> Any:
        """``start`` and wait: the function's JSON result."""
        return gather([self.start(tree, file, function, args)])[0]


class Child:
    """A started measuring process; its output goes to files, not pipes
    (several run at once, and none may block on a full pipe)."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        self.where = cwd
        self.out, self.err = log.with_suffix(".out"), log.with_suffix(".err")
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err)

    def failure(self) -> str:
        tail = self.err.read_bytes()[-2000:].decode(errors="replace")
        return f"measuring in {self.where} failed:\n{tail}"

    def result(self) -> Any:
        return json.loads(self.out.read_text().strip().splitlines()[-1])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def gather(children: list[Child]) -> list[Any]:
    """Wait for every child; their JSON results in order. The first that fails
    stops the others (they may be waiting for it) and raises with its stderr."""
    try:
        while any(c.proc.poll() is None for c in children):
            for c in children:
                if c.proc.poll() not in (None, 0):
                    raise RuntimeError(c.failure())
            time.sleep(0.05)
        for c in children:
            if c.proc.returncode != 0:
                raise RuntimeError(c.failure())
        return [c.result() for c in children]
    finally:
        for c in children:
            c.close()
