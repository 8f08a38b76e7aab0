"""No output of the CLI ever holds a password: not the stats title, the
worker's start line, the demo, an error line, nor the output of a
subprocess on an unreachable or refusing server.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cli import (
    Cli,
    _clean,
    _one_line_error,
    _query_url,
    run_leaseq,
    run_leaseq_without_url,
)
from tests.support.security import PASSWORD, _leaks
from tests.support.servers import RedisServer, free_port


def test_stats_title_hides_a_password_in_the_query(locked: RedisServer) -> None:
    url = _query_url(locked)
    assert run_leaseq_without_url("--url", url, "enqueue", "mail", "{}").returncode == 0
    done = run_leaseq_without_url("--url", url, "stats")
    assert done.returncode == 0 and "mail" in done.stdout and "password=***" in done.stdout
    _clean(done)


def test_worker_start_line_hides_the_password(locked: RedisServer) -> None:
    url = _query_url(locked)
    assert run_leaseq_without_url("--url", url, "enqueue", "work", "{}").returncode == 0
    done = run_leaseq_without_url(
        "worker", "work", "tests.support.handlers:echo", "--burst", env={"LEASEQ_URL": url}
    )
    assert done.returncode == 0, done.stderr
    assert "serving tests.support.handlers:echo" in done.stderr
    _clean(done)


def test_demo_uses_leaseq_url_and_hides_its_password(locked: RedisServer) -> None:
    done = run_leaseq_without_url(
        "demo", "--jobs", "4", env={"LEASEQ_URL": _query_url(locked)}, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"127.0.0.1:{locked.port}" in done.stdout and "memory://" not in done.stdout
    assert "SIGKILLed pid" in done.stdout and "4 of 4 succeeded" in done.stdout
    _clean(done)


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("redis://:hunter/22secret@127.0.0.1:{port}/0", ("hunter", "22secret")),
        ("redis://u:hunter?22secret@127.0.0.1:{port}/0", ("hunter", "22secret")),
        ("redis://u:p%40ss%2Fword22@127.0.0.1:{port}/0", ("p%40ss", "p@ss/word22", "word22")),
        ("redis://127.0.0.1:{port}/0?password=hunter22secret", ("hunter22secret",)),
        ("redis://127.0.0.1:{port}/0?db=0&password=hunter22secret&x=1", ("hunter22secret",)),
        ("redis://:hunter22secret@127.0.0.1:{port}/abc", ("hunter22secret",)),
    ],
)
def test_no_error_line_holds_the_password(
    memory_cli: Cli, url: str, secrets: tuple[str, ...]
) -> None:
    memory_cli.url = url.format(port=free_port())  # nobody listens there
    for args in (
        ("stats",),
        ("enqueue", "q", "{}"),
        ("worker", "q", "tests.support.handlers:echo"),
    ):
        code, out, err = memory_cli(*args)
        _one_line_error(code, out, err)
        for secret in secrets:
            assert secret not in out + err, (args, err)


def test_subprocess_unreachable_server_hides_the_password() -> None:
    url = f"redis://:hunter2secret@127.0.0.1:{free_port()}/0"
    done = run_leaseq("--url", url, "stats")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("leaseq: error: ") and done.stderr.count("\n") == 1
    assert "hunter2secret" not in done.stderr + done.stdout


def test_password_never_appears_in_cli_output(acl_server: RedisServer) -> None:
    pytest.importorskip("leaseq.cli")
    urls = [
        f"redis://leaseq:{PASSWORD}@127.0.0.1:{free_port()}/0",
        f"redis://leaseq:{PASSWORD}x@127.0.0.1:{acl_server.port}/0",
        f"redis://leaseq:{PASSWORD}@127.0.0.1:{acl_server.port}/0",
    ]
    commands = (["stats"], ["stats", "emails", "--json"], ["show", "emails", "nope"])
    for url, args in zip(urls, commands, strict=True):
        out = subprocess.run(
            [sys.executable, "-m", "leaseq.cli", "--url", url, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert not _leaks(out.stdout) and not _leaks(out.stderr), (args, out)
        assert "Traceback" not in out.stderr, out.stderr
        assert out.returncode != 0 or url == urls[-1], (args, out)
