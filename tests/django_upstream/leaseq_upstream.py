"""The pytest plugin that points an upstream Django Tasks suite at
``leaseq.django.LeaseqBackend`` (loaded by ``run.py`` with ``-p leaseq_upstream``).

What it changes, and nothing else of theirs:

- **Backends.** Wherever a test's TASKS names the backend the suite is about,
  the task backend handler builds ours instead (same alias, QUEUES and
  OPTIONS; the server is ``$LEASEQ_URL``). Django's suite is about two:
  ``DummyBackend`` (enqueues, runs nothing) becomes ``EnqueueOnly``, and
  ``ImmediateBackend`` (runs each task as it is enqueued) becomes ``RunAtOnce``.
- **Running the worker.** The reference suites run their own worker in a
  helper of the test case (``run_worker``); ours runs ``manage.py
  leaseq_worker --burst`` instead.
- **Expected failures.** Every test that differences.txt lists for the suite is
  expected to fail (strict: a pass fails the run), and every class it lists is
  not run; docs/django.md gives the reason of each. A stale line (naming no
  collected test) fails the run when the whole suite runs.
- **One result per test.** A ``subTest`` that fails fails its test there and
  then (its label added to the error), as a plain assertion would: pytest
  would report the test passed and its subtests failed apart, and a test is
  expected to fail or pass as a whole.
- The server is flushed before each test, and a run in which no test passed
  fails (exit 5), as in our own suite.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import unittest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SUITE = os.environ.get("LEASEQ_UPSTREAM_SUITE", "")

BACKENDS = {
    "django": {
        "django.tasks.backends.dummy.DummyBackend": "leaseq_upstream.EnqueueOnly",
        "django.tasks.backends.immediate.ImmediateBackend": "leaseq_upstream.RunAtOnce",
    },
    "rq": {"django_tasks_rq.RQBackend": "leaseq.django.LeaseqBackend"},
    "db": {"django_tasks_db.DatabaseBackend": "leaseq.django.LeaseqBackend"},
}
"""Per suite: the backend its tests are about -> ours."""


def differences(suite: str = SUITE) -> tuple[dict[str, str], dict[str, str]]:
    """differences.txt for ``suite``: (test id -> reason of the tests that must
    fail, test or class id -> reason of those not run)."""
    fails: dict[str, str] = {}
    not_run: dict[str, str] = {}
    for line in Path(os.environ["LEASEQ_UPSTREAM_DIFFERENCES"]).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, outcome, node, reason = line.split()
        if outcome not in ("fails", "not-run"):
            raise pytest.UsageError(f"differences.txt: {outcome!r} is not fails or not-run")
        if name == suite:
            (fails if outcome == "fails" else not_run)[node] = reason
    return fails, not_run


# -- our backend, as the suites meet it ------------------------------------------------


def _backend_classes() -> tuple[type, type]:
    from leaseq.django import LeaseqBackend
    from leaseq.queue import Queue
    from leaseq.types import State
    from leaseq.worker import Worker

    class EnqueueOnly(LeaseqBackend):  # type: ignore[misc]
        """LeaseqBackend with no worker running, plus what a test inspects on
        Django's DummyBackend: ``results`` (every job of its queues, read back
        through ``get_result``'s mapping, oldest first) and ``clear()``."""

        def _every_queue(self) -> list[Queue]:
            queues = list(self._queues.values())
            if not self.queue_names:
                queues += [self.queue(n) for n in Queue.queues(self._client)]
            return list({q.name: q for q in queues}.values())

        @property
        def results(self) -> list[Any]:
            jobs = [j for q in self._every_queue() for s in State for j in q.ls(s, limit=10_000)]
            jobs.sort(key=lambda j: (j.enqueued_at, j.id))
            return [self.result(j) for j in jobs]

        def clear(self) -> None:
            for queue in self._every_queue():
                queue.drop(force=True)

    class RunAtOnce(LeaseqBackend):  # type: ignore[misc]
        """LeaseqBackend whose ``enqueue`` also runs the job: a burst worker on
        its queue, then the result read back into the one returned."""

        def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
            result = super().enqueue(task, args, kwargs)
            queue = self.queue(task.queue_name)
            Worker(queue, self.handler(), concurrency=1, handle_signals=False).run(burst=True)
            result.refresh()
            return result

    return EnqueueOnly, RunAtOnce


def __getattr__(name: str) -> Any:  # the classes exist once Django is set up
    if name in ("EnqueueOnly", "RunAtOnce"):
        found = dict(zip(("EnqueueOnly", "RunAtOnce"), _backend_classes(), strict=True))
        globals().update(found)
        return found[name]
    raise AttributeError(name)


def _point_handlers_at_ours() -> None:
    """Make every task backend handler (Django's; the backport's if installed)
    build our backend where a test names the suite's."""
    from django.utils.module_loading import import_string

    handlers = []
    for module in ("django.tasks", "django_tasks"):
        try:
            handlers.append(__import__(module, fromlist=["TaskBackendHandler"]).TaskBackendHandler)
        except ImportError:
            continue
    mapping = BACKENDS[SUITE]
    for handler in handlers:
        original = handler.create_connection

        def create_connection(self: Any, alias: str, original: Any = original) -> Any:
            params = self.settings[alias]
            ours = mapping.get(params.get("BACKEND"))
            if ours is None:
                return original(self, alias)
            return import_string(ours)(alias=alias, params={**params, "BACKEND": ours})

        handler.create_connection = create_connection


def _run_worker(self: Any, **options: Any) -> None:
    """The reference suites' ``run_worker``, as ``manage.py leaseq_worker --burst``.
    The database backend's options that name queues and backends map to ours;
    any other (``max_tasks`` ...) is refused: a test that needs it fails."""
    from django.core.management import call_command

    from leaseq.django import LeaseqBackend

    try:
        from django.tasks import task_backends
    except ImportError:
        from django_tasks import task_backends
    alias = options.pop("backend_name", "default")
    for quiet in ("verbosity", "batch", "interval", "startup_delay", "worker_id"):
        options.pop(quiet, None)
    backend = task_backends[alias]
    names = list(backend.queue_names) if isinstance(backend, LeaseqBackend) else []
    wanted = options.pop("queue_name", None)
    if wanted not in (None, "*"):
        names = wanted.split(",")
    excluded = set((options.pop("exclude_queues", None) or "").split(","))
    names = [n for n in names if n not in excluded]
    if options:
        raise NotImplementedError(f"leaseq_worker has no option like {sorted(options)}")
    args = ["--burst", "--concurrency", "1", "--backend", alias]
    call_command("leaseq_worker", *args, "--queues", ",".join(names), stdout=io.StringIO())


# -- hooks --------------------------------------------------------------------------


@contextlib.contextmanager
def _sub_test(self: Any, msg: Any = None, **params: Any) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        exc.add_note(f"in subTest {msg if msg is not None else ''} {params or ''}".rstrip())
        raise


def pytest_configure(config: pytest.Config) -> None:
    if SUITE not in BACKENDS:
        raise pytest.UsageError(f"LEASEQ_UPSTREAM_SUITE={SUITE!r}: one of {sorted(BACKENDS)}")
    _point_handlers_at_ours()
    unittest.TestCase.subTest = _sub_test  # type: ignore[method-assign,assignment]


def pytest_report_header(config: pytest.Config) -> str:
    return f"leaseq upstream suite {SUITE!r}: backends {BACKENDS[SUITE]}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    fails, not_run = differences()
    seen: set[str] = set()
    kept, dropped = [], []
    for item in items:
        owner = item.nodeid.rsplit("::", 1)[0]
        if item.nodeid in not_run or owner in not_run:
            seen.add(item.nodeid if item.nodeid in not_run else owner)
            dropped.append(item)
            continue
        if item.nodeid in fails:
            seen.add(item.nodeid)
            reason = f"documented difference: {fails[item.nodeid]} (docs/django.md)"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    stale = sorted((set(fails) | set(not_run)) - seen)
    if stale and os.environ.get("LEASEQ_UPSTREAM_FULL"):
        raise pytest.UsageError(f"differences.txt names tests not collected: {stale}")
    _patch_run_worker(sys.modules.get("tests.tests"))  # the reference suites' module


def _patch_run_worker(module: Any) -> None:
    for name in ("RQBackendTestCase", "DatabaseBackendWorkerTestCase"):
        case = getattr(module, name, None)
        if case is not None:
            case.run_worker = _run_worker


@pytest.fixture(autouse=True)
def _flushed_server() -> None:
    import redis

    client = redis.Redis.from_url(os.environ["LEASEQ_URL"])
    client.flushall()
    client.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which nothing passed (all skipped or deselected) is a failure."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or session.config.option.collectonly:
        return
    if exitstatus == pytest.ExitCode.OK and not reporter.stats.get("passed"):
        reporter.write_line("leaseq: no test passed in this run: failing it", red=True)
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
