"""Running the ``leaseq`` command line in the tests (no tests in here): ``Cli``
calls ``main()`` in-process (so error handling is the real one) on memory://
or a real server.
"""

from __future__ import annotations

import uuid

import pytest

import leaseq
from leaseq.cli.main import main


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
