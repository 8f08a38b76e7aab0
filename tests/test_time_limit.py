"""Every test runs under a time limit (pytest-timeout, ``timeout`` in pyproject.toml),
so a test that hangs fails with its stack instead of stalling the whole run."""

from __future__ import annotations

import pytest


def test_the_suite_runs_under_a_per_test_time_limit(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.hasplugin("timeout"), (
        "pytest-timeout is missing: pip install -e '.[test]'"
    )
    assert float(pytestconfig.getini("timeout")) > 0
