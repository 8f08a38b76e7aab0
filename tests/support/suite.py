"""The sync behaviour suite, re-run on other transports (no tests in here).

``cases`` collects the test functions of the core suites that take a
queue ``q`` (and other fixtures, with their parametrize arguments), so
tests/transport/test_aio.py can run them on ``leaseq.aio.Queue`` through
:class:`SyncFacade` and tests/transport/test_cluster.py on Redis Cluster:
one definition of each behaviour, checked on every transport.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from _pytest.mark.structures import ParameterSet


def case_id(module: str, name: str) -> str:
    """``store.jobs.enqueue_writes_a_readable_row`` for the test of that name in
    the module ``tests.store.test_jobs``: the module's path under tests/ and the
    test's name, without their ``test_`` prefixes."""
    parts = module.split(".")
    if parts[0] == "tests":
        parts = parts[1:]
    parts[-1] = parts[-1].removeprefix("test_")
    return ".".join([*parts, name.removeprefix("test_")])


def case_name(func: Callable[..., Any]) -> str:
    """:func:`case_id` of a test function: ``store.jobs.enqueue_writes_a_readable_row``."""
    return case_id(func.__module__, func.__name__)


def cases(
    *modules: ModuleType,
    skip: Callable[[Callable[..., Any]], bool] = lambda f: False,
    fixtures: frozenset[str] | None = frozenset({"q", "r", "clock"}),
) -> list[Any]:
    """``pytest.param(func, params)`` for each queue test in ``modules`` (a test
    function that takes ``q``) and each combination of its parametrize values,
    with readable ids. With ``fixtures`` given, a test that takes any other
    fixture is left out; with None every one is in, and :func:`call` finds
    the other fixtures through ``request``."""
    out = []
    for module in modules:
        for name, func in vars(module).items():
            if not name.startswith("test_") or not callable(func) or skip(func):
                continue
            if getattr(func, "__module__", None) != module.__name__:
                continue  # imported from another module: collected there
            args = set(inspect.signature(func).parameters)
            grid = _grid(func)
            extra = args - (fixtures or args) - set().union(*(set(g) for g in grid))
            if "q" not in args or extra:
                continue
            for params in grid:
                label = "-".join(str(v) for v in params.values())
                ident = case_id(module.__name__, name) + (f"[{label}]" if label else "")
                out.append(pytest.param(func, params, id=ident))
    return out


def _grid(func: Callable[..., Any]) -> list[dict[str, Any]]:
    axes: list[list[dict[str, Any]]] = []
    for mark in getattr(func, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = (
            [n.strip() for n in mark.args[0].split(",")]
            if isinstance(mark.args[0], str)
            else list(mark.args[0])
        )
        rows = []
        for value in mark.args[1]:
            # pytest.param(...) is a ParameterSet; a bare dict value has .values too.
            values = value.values if isinstance(value, ParameterSet) else value
            rows.append(dict(zip(names, values if len(names) > 1 else [values], strict=True)))
        axes.append(rows)
    return [
        {k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)
    ] or [{}]


def call(
    func: Callable[..., Any],
    params: dict[str, Any],
    request: pytest.FixtureRequest | None = None,
    **fixtures: Any,
) -> None:
    """Run one collected test with the fixtures it asks for: ``fixtures`` first,
    then any other pytest fixture by name through ``request`` (``tmp_path``,
    ``monkeypatch``...)."""
    kwargs = dict(params)
    for name in inspect.signature(func).parameters:
        if name in kwargs:
            continue
        if name in fixtures:
            kwargs[name] = fixtures[name]
        elif request is not None:
            kwargs[name] = request.getfixturevalue(name)
        else:
            raise TypeError(f"{func.__name__} needs fixture {name!r}: pass request")
    func(**kwargs)


class SyncFacade:
    """``leaseq.aio.Queue`` seen through the sync Queue's API, for the shared suite.

    Every coroutine method runs to completion on ``loop``; ``redis`` is a
    sync client to the same server, for the suite's direct reads.
    """

    def __init__(self, aq: Any, sync_redis: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._aq = aq
        self._loop = loop
        self.redis = sync_redis

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._aq, name)
        if getattr(attr, "_leaseq_feed", False):  # an async iterator (events): collected

            def collect(*args: Any, **kwargs: Any) -> Iterator[Any]:
                items = attr(*args, **kwargs)  # a bad argument raises here, as in sync

                async def drain() -> list[Any]:
                    return [item async for item in items]

                return iter(self._loop.run_until_complete(drain()))

            return collect
        if not inspect.iscoroutinefunction(attr):
            return attr

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(attr(*args, **kwargs))

        return run


def every_key(r: Any) -> Iterator[str]:
    for key in r.scan_iter(count=1000):
        yield key.decode() if isinstance(key, bytes) else key
