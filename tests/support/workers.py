"""Real ``leaseq worker`` processes for the tests (no tests in here): ``Workers``
starts them and makes sure none outlives its test.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import leaseq
from tests.support import LEASEQ, ROOT
from tests.support.servers import wait_until


class Workers:
    """Starts worker processes and makes sure none outlives its test."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, queue: str, fn: str, *opts: str) -> subprocess.Popen[bytes]:
        log = Path(tempfile.mkstemp(prefix="leaseq-worker-", suffix=".log")[1])
        cmd = [LEASEQ, "--url", self.url, "worker", queue, f"tests.support.handlers:{fn}", *opts]
        with log.open("wb") as err:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        return self.logs[self.procs.index(proc)].read_text()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for log in self.logs:
            log.unlink(missing_ok=True)


def _q(rr: Any, name: str = "jobs") -> leaseq.Queue:
    return leaseq.Queue(name, redis=rr, backoff=0.0)


def _job(q: leaseq.Queue, job_id: str) -> leaseq.Job:
    job = q.get(job_id)
    assert job is not None
    return job


def _exits(proc: subprocess.Popen[bytes], timeout: float) -> int:
    wait_until(lambda: proc.poll() is not None, timeout, what="the worker to exit")
    return int(proc.returncode)
