"""Every panel of the Grafana dashboard (deploy/grafana/leaseq.json) returns data
from a real Prometheus (Debian's ``prometheus``) scraping a real worker
(``--metrics-port``) and a real dashboard (``/metrics`` behind its bearer
token) while jobs run: the queries are right as Grafana would send them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import leaseq
from tests.support.servers import RedisServer, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
LEASEQ = str(Path(sys.executable).parent / "leaseq")
TOKEN = "grafana-t0ken"


def _prometheus() -> str:
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.fail(
            "prometheus is needed for the dashboard's queries: apt-get install -y prometheus"
        )
    return exe


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:  # each by its own PID
        proc.kill()
        proc.communicate(timeout=30)


def _quiet(*command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
    )


def _up(port: int, path: str, headers: dict[str, str] | None = None) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=2).is_success
    except httpx.HTTPError:
        return False


def _config(worker: int, web: int) -> str:
    return json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "worker", "static_configs": [{"targets": [f"127.0.0.1:{worker}"]}]},
            {"job_name": "web", "static_configs": [{"targets": [f"127.0.0.1:{web}"]}],
             "authorization": {"type": "Bearer", "credentials": TOKEN}},
        ],
    })  # fmt: skip


def test_every_panel_returns_data_from_a_real_prometheus(
    redis_server: RedisServer, processes: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    exe = _prometheus()
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    q = leaseq.Queue.from_url(url, "graphed")
    q.redis.flushall()
    worker, web, prom = free_port(), free_port(), free_port()
    start = processes.append
    start(_quiet(LEASEQ, "--url", url, "worker", "graphed", "tests.support.handlers:sleep",
                 "--metrics-port", str(worker)))  # fmt: skip
    start(_quiet(LEASEQ, "--url", url, "web", "--port", str(web), "--auth", TOKEN))
    (tmp_path / "prometheus.yml").write_text(_config(worker, web))
    start(_quiet(exe, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'data'}",
                 f"--web.listen-address=127.0.0.1:{prom}"))  # fmt: skip
    wait_until(lambda: _up(worker, "/readyz"), 30, what="the worker")
    wait_until(lambda: _up(web, "/metrics", {"authorization": f"Bearer {TOKEN}"}), 30, what="web")
    wait_until(lambda: _up(prom, "/-/ready"), 30, what="prometheus")

    feeding = threading.Event()

    def feed() -> None:  # jobs all along, so rates and run times have samples
        while not feeding.wait(0.2):
            q.enqueue_many([{"s": 0.01}] * 5)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        panels = json.loads((ROOT / "deploy/grafana/leaseq.json").read_text())["panels"]
        exprs = {p["title"]: t["expr"] for p in panels for t in p["targets"]}

        def query(expr: str) -> list[Any]:
            got = httpx.get(f"http://127.0.0.1:{prom}/api/v1/query", params={"query": expr})
            body = got.json()
            assert body["status"] == "success", (expr, body)
            return list(body["data"]["result"])

        assert wait_until(lambda: len(query("up == 1")) == 2, 30, what="both targets up")
        empty: dict[str, str] = {}

        def all_answer() -> bool:
            empty.clear()
            empty.update({title: e for title, e in exprs.items() if not query(e)})
            return not empty

        wait_until(all_answer, 60, what=f"every panel to return data (still empty: {empty})")
        # Queue figures come from both targets: max by (queue) gives one series.
        assert len(query(exprs["Backlog (jobs that could run now)"])) == 1
    finally:
        feeding.set()
        feeder.join(5)
    q.close()
