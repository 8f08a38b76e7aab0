"""The dashboard in the tests (no tests in here)."""

from __future__ import annotations

import warnings
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note about httpx versions
    from starlette.testclient import TestClient

from leaseq.web import create_app


def client_for(r: Any, **options: Any) -> TestClient:
    return TestClient(create_app(r, **options))
