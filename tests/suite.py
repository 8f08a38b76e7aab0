"""The sync behaviour suite, re-run on other transports (no tests in here).

``cases`` collects the test functions of the core suites that take a
queue ``q`` (with ``r`` and ``clock`` at most, plus their parametrize
arguments), so ``test_aio`` can run them on ``leaseq.aio.Queue`` through
:class:`SyncFacade` and ``test_cluster`` can run them on Redis Cluster:
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

FIXTURES = {"q", "r", "clock"}


def cases(
    *modules: ModuleType, skip: Callable[[Callable[..., Any]], bool] = lambda f: False
) -> list[Any]:
    """``pytest.param(func, params)`` for each queue test in ``modules`` and each
    combination of its parametrize values, with readable ids."""
    out = []
    for module in modules:
        for name, func in vars(module).items():
            if not name.startswith("test_") or not callable(func) or skip(func):
                continue
            args = set(inspect.signature(func).parameters)
            grid = _grid(func)
            extra = args - FIXTURES - set().union(*(set(g) for g in grid))
            if "q" not in args or extra:
                continue
            short = module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
            for params in grid:
                label = "-".join(str(v) for v in params.values())
                ident = f"{short}.{name[5:]}" + (f"[{label}]" if label else "")
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
            values = value.values if hasattr(value, "values") else value
            rows.append(dict(zip(names, values if len(names) > 1 else [values], strict=True)))
        axes.append(rows)
    return [
        {k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)
    ] or [{}]


def call(func: Callable[..., Any], params: dict[str, Any], **fixtures: Any) -> None:
    """Run one collected test with the fixtures it asks for."""
    wanted = inspect.signature(func).parameters
    func(**params, **{k: v for k, v in fixtures.items() if k in wanted})


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
        if not inspect.iscoroutinefunction(attr):
            return attr

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(attr(*args, **kwargs))

        return run


def every_key(r: Any) -> Iterator[str]:
    for key in r.scan_iter(count=1000):
        yield key.decode() if isinstance(key, bytes) else key
