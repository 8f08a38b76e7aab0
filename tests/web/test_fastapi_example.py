"""examples/fastapi_app.py through an ASGI test client, against a real server
with a real worker: enqueue, wait for the typed result, the dashboard behind
its auth, a refused argument.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import leaseq
from tests.support.servers import RedisServer

pytest.importorskip("fastapi")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_app.py"


@pytest.fixture
def example(redis_server: RedisServer, rr: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LEASEQ_URL", redis_server.url)
    monkeypatch.setenv("LEASEQ_DASHBOARD_AUTH", "ops:s3cret")
    spec = importlib.util.spec_from_file_location("fastapi_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # FastAPI resolves its annotations there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def worker(example: Any, rr: Any) -> Iterator[leaseq.Worker]:
    """What ``leaseq worker reports fastapi_app`` runs, in a thread."""
    w = leaseq.Worker(
        leaseq.Queue("reports", redis=rr), example.reports.tasks, handle_signals=False
    )
    thread = threading.Thread(target=w.run)
    thread.start()
    yield w
    w.stop(now=True)
    thread.join(10.0)


def test_the_fastapi_example_enqueues_waits_and_mounts_the_dashboard(
    example: Any, worker: leaseq.Worker
) -> None:
    from fastapi.testclient import TestClient

    with TestClient(example.app) as client:
        made = client.post("/reports", json={"customer": "acme", "month": "2026-11-01"})
        assert made.status_code == 202, made.text
        job_id = made.json()["job_id"]
        got = client.get(f"/reports/{job_id}", params={"wait": 10})
        assert got.status_code == 200, got.text
        assert got.json() == {"customer": "acme", "month": "2026-11-01", "total_cents": 4011}
        assert client.get("/reports/nope").status_code == 404
        refused = client.post("/reports", json={"customer": "acme", "month": "not a date"})
        assert refused.status_code == 422
        assert client.get("/ops/jobs/").status_code == 401  # the dashboard asks first
        page = client.get("/ops/jobs/queues/reports", auth=("ops", "s3cret"))
        assert page.status_code == 200 and "reports" in page.text


def test_a_report_not_ready_in_time_says_so(example: Any) -> None:
    from fastapi.testclient import TestClient

    with TestClient(example.app) as client:  # no worker runs: the job waits
        job_id = client.post("/reports", json={"customer": "a", "month": "2026-01-01"}).json()
        got = client.get(f"/reports/{job_id['job_id']}", params={"wait": 0.05})
        assert got.status_code == 202 and got.json()["status"] == "not ready"
