"""Run upstream Django Tasks test suites against ``leaseq.django.LeaseqBackend``.

    python -m tests.django_upstream.run SUITE [SUITE...] [PYTEST-ARGS...]

SUITE is ``django``, ``rq`` or ``db``; several run one after the other.

Each suite's tests come from its project's own source distribution on PyPI, of
the version installed in this venv (``pip download --no-binary :all: --no-deps``),
unpacked once under ``.servers/django-upstream/`` (gitignored); nothing of theirs
is in this repo. The suite then runs in its own pytest process, in the unpacked
tree, with a settings module and a pytest plugin of ours
(``leaseq_upstream.py``, beside this file) that point it at our backend and
expect exactly the failures DIFFERENCES lists (docs/django.md gives each its
reason). A real redis-server of our own serves it (``$LEASEQ_URL``).

- ``django``: Django's ``tests/tasks`` (Django's sdist ships its tests), on the
  built-in ``django.tasks`` (Django 6).
- ``rq`` and ``db``: the test suites of django-tasks-rq and django-tasks-db,
  the reference backends by the author of Django's Tasks framework. Their sdists
  ship ``tests/tests.py`` without the tasks module it imports; ours
  (``reference_tasks.py``) is laid beside it as ``tests/tasks.py``. They are
  written against the django-tasks backport, so they run in a venv where
  ``LeaseqBackend`` is built on it (Django 5.2).

The exit code is the first failing suite's pytest exit code (5: no test passed).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import RedisServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = REPO / ".servers" / "django-upstream"
DIFFERENCES = HERE / "differences.txt"


@dataclass(frozen=True)
class Suite:
    package: str
    """The distribution whose sdist holds the tests (its installed version is fetched)."""
    root: str
    """Where pytest runs, inside the unpacked sdist (``{dir}``: its top folder)."""
    paths: tuple[str, ...]
    """What pytest collects, relative to ``root``."""
    settings: str
    """Our settings module (beside this file)."""
    tasks_module: bool = False
    """Lay our ``reference_tasks.py`` in as ``tests/tasks.py`` (and ``tests/__init__.py``)."""


SUITES = {
    "django": Suite("django", "{dir}/tests", ("tasks",), "upstream_settings"),
    "rq": Suite(
        "django-tasks-rq", "{dir}", ("tests/tests.py",), "reference_settings", tasks_module=True
    ),
    "db": Suite(
        "django-tasks-db", "{dir}", ("tests/tests.py",), "reference_settings", tasks_module=True
    ),
}


def unpacked(package: str) -> Path:
    """The unpacked sdist of ``package``'s installed version (fetched once)."""
    version = importlib.metadata.version(package)
    stem = f"{package.replace('-', '_')}-{version}"
    found = [p for p in CACHE.glob("*") if p.is_dir() and p.name.lower() == stem.lower()]
    if found:
        return found[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    # A directory of its own: django-2 and django-3 run side by side in CI's two
    # lanes, and one shared download directory was emptied under the other's pip.
    download = Path(tempfile.mkdtemp(prefix="download-", dir=CACHE))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"{package}=={version}",
            "-d",
            str(download),
        ],
        check=True,
    )
    (archive,) = download.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    shutil.rmtree(download)
    return unpacked(package)


def main(argv: list[str]) -> int:
    names = [a for a in argv if a in SUITES]
    args = [a for a in argv if a not in SUITES]
    if not names:
        print(f"usage: python -m tests.django_upstream.run {'|'.join(SUITES)}... [pytest args]")
        return 2
    codes = [run_suite(name, args) for name in names]
    return next((code for code in codes if code), 0)


def run_suite(name: str, args: list[str]) -> int:
    """Run one suite in its own pytest process; its exit code."""
    suite = SUITES[name]
    top = unpacked(suite.package)
    root = Path(suite.root.format(dir=top))
    if suite.tasks_module:
        (root / "tests" / "__init__.py").touch()
        shutil.copyfile(HERE / "reference_tasks.py", root / "tests" / "tasks.py")
    server = RedisServer()
    env = {
        **os.environ,
        "LEASEQ_URL": server.url,
        "LEASEQ_UPSTREAM_SUITE": name,
        "LEASEQ_UPSTREAM_DIFFERENCES": str(DIFFERENCES),
        "LEASEQ_UPSTREAM_FULL": "" if args else "1",  # stale lines are errors
        "DJANGO_SETTINGS_MODULE": suite.settings,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pytest", "-c", str(HERE / "upstream.ini")]
    command += ["-p", "leaseq_upstream", "--rootdir", str(root), *suite.paths, *args]
    print(f"\n=== upstream suite {name}: {top.name}, in {root} ===", flush=True)
    try:
        return subprocess.run(command, cwd=root, env=env).returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
