"""Running the ``leaseq`` command line in the tests (no tests in here).

``Cli`` calls ``main()`` in-process (so error handling is the real one) on
memory:// or a real server; ``run_leaseq`` and ``run_leaseq_without_url`` run
it as a subprocess; ``SECRET`` is the password of the CLI tests' locked server.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Any

import pytest

import leaseq
from leaseq.cli.main import main
from tests.support import LEASEQ, ROOT
from tests.support.servers import RedisServer


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], url: str = "") -> None:
        self.capsys = capsys
        self.url = url or f"memory://cli-{uuid.uuid4().hex}"

    def __call__(self, *args: str) -> tuple[int, str, str]:
        try:
            main(["--url", self.url, *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = self.capsys.readouterr()
        return code, out, err

    def queue(self, name: str = "mail") -> leaseq.Queue:
        return leaseq.Queue.from_url(self.url, name, backoff=0.0)


def _one_line_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code != 0
    assert "Traceback" not in err + out
    assert err.count("\n") == 1 and err.startswith("leaseq: error: "), err
    for needle in needles:
        assert needle in err, err


def run_leaseq(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [LEASEQ, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


SECRET = "Zq9-hunter-secret"


def run_leaseq_without_url(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> Any:
    base = {k: v for k, v in os.environ.items() if k != "LEASEQ_URL"}
    return subprocess.run(
        [LEASEQ, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**base, **(env or {})},
    )


def _clean(done: Any, *secrets: str) -> None:
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    for secret in secrets or (SECRET,):
        assert secret not in text, text


def _query_url(server: RedisServer) -> str:
    return f"redis://127.0.0.1:{server.port}/0?password={SECRET}"
