"""``leaseq demo``, the README's first command: on memory:// and on a real
server, its table at 80 columns.
"""

from __future__ import annotations

import re
import sys

import pytest

from tests.support.cli import Cli, _one_line_error, run_leaseq
from tests.support.servers import RedisServer


def test_demo_on_memory(capsys: pytest.CaptureFixture[str]) -> None:
    # memory:// only: the real server's demo is test_subprocess_demo_on_a_real_server.
    code, out, err = Cli(capsys)("demo", "--jobs", "5")
    assert code == 0, err
    assert "reap(): 1 returned to pending" in out
    assert "every job succeeded" in out and "did so at attempt 2" in out
    assert '"state"' in out and '"succeeded"' in out and "HGETALL" in out
    assert "5 of 5 succeeded" in out


def test_demo_without_the_memory_extra_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "fakeredis", None)  # as if not installed
    code, out, err = Cli(capsys, "memory://no-extra")("demo", "--jobs", "5")
    _one_line_error(code, out, err, "fakeredis is missing", "pip install 'leaseq[memory]'")
    assert "internal error" not in err


def test_demo_fits_80_columns_and_its_table_a_line_a_job(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = Cli(capsys)("demo", "--jobs", "12")
    assert code == 0, err
    # The story too, not just the table; the HGETALL reply is verbatim, as redis-cli prints it.
    ours = [line for line in out.splitlines() if not re.match(r" ?\d+\) \"", line)]
    assert all(len(line) <= 80 for line in ours), out
    steps = [line for line in out.splitlines() if re.match(r"\d\. ", line)]
    assert [s[0] for s in steps] == list("12345"), out
    assert re.search(r"^   \S", out, re.MULTILINE), out  # a long step goes on, indented under it
    table = out[out.index("12 of 12 succeeded") :].splitlines()
    assert all(len(line) <= 80 for line in table), table
    rows = [line for line in table if " succeeded " in line]
    assert len(rows) == 12 and all(line.rstrip().endswith("}") for line in rows), table
    assert '{"n": 12, "square": 144}' in rows[-1]  # the results whole; the ids give way
    assert all(re.search(r" demo-worker-\d ", line) for line in rows), table  # whole too


def test_subprocess_demo_on_a_real_server(redis_server: RedisServer) -> None:
    done = run_leaseq("--url", redis_server.url, "demo", "--jobs", "6")
    assert done.returncode == 0, done.stderr
    assert "SIGKILLed pid" in done.stdout and "did so at attempt 2" in done.stdout
    assert "6 of 6 succeeded" in done.stdout
