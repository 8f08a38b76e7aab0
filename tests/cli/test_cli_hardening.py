"""The CLI defects of issue 9: secrets in every output path (12), fatal auth
errors (13), errors in the user's handler module (15), sharded queues for
worker and enqueue (18), and the small things a new user hit (19). In-process
on memory:// through main(), and as subprocesses on real servers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from tests.support.cli import Cli, _one_line_error
from tests.support.servers import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]


LEASEQ = str(Path(sys.executable).parent / "leaseq")


SECRET = "Zq9-hunter-secret"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
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


@pytest.fixture(scope="module")
def locked() -> Iterator[RedisServer]:
    """A server with a password (set once it is up: start() pings without one)."""
    server = RedisServer()
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "limited", "on", f">{SECRET}", "~other:*", "+@all")
    admin.config_set("requirepass", SECRET)
    admin.close()
    yield server
    server.stop()


def _query_url(server: RedisServer) -> str:
    return f"redis://127.0.0.1:{server.port}/0?password={SECRET}"


# -- 12: no output ever holds a password ------------------------------------------


def test_stats_title_hides_a_password_in_the_query(locked: RedisServer) -> None:
    url = _query_url(locked)
    assert _run("--url", url, "enqueue", "mail", "{}").returncode == 0
    done = _run("--url", url, "stats")
    assert done.returncode == 0 and "mail" in done.stdout and "password=***" in done.stdout
    _clean(done)


def test_worker_start_line_hides_the_password(locked: RedisServer) -> None:
    url = _query_url(locked)
    assert _run("--url", url, "enqueue", "work", "{}").returncode == 0
    done = _run("worker", "work", "tests.support.handlers:echo", "--burst", env={"LEASEQ_URL": url})
    assert done.returncode == 0, done.stderr
    assert "serving tests.support.handlers:echo" in done.stderr
    _clean(done)


def test_demo_uses_leaseq_url_and_hides_its_password(locked: RedisServer) -> None:
    done = _run("demo", "--jobs", "4", env={"LEASEQ_URL": _query_url(locked)}, timeout=120)
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
def test_no_error_line_holds_the_password(cli: Cli, url: str, secrets: tuple[str, ...]) -> None:
    cli.url = url.format(port=free_port())  # nobody listens there
    for args in (
        ("stats",),
        ("enqueue", "q", "{}"),
        ("worker", "q", "tests.support.handlers:echo"),
    ):
        code, out, err = cli(*args)
        _one_line_error(code, out, err)
        for secret in secrets:
            assert secret not in out + err, (args, err)


def test_redact_covers_every_place_a_url_carries_a_password() -> None:
    from leaseq.transport.urls import redact, remember_secrets

    assert redact("redis://u:pa/ss@h:1/0") == "redis://***@h:1/0"
    assert redact("redis://h/0?password=abc&db=1") == "redis://h/0?password=***&db=1"
    assert redact("rediss://:p%40ss@h/0 and redis://h") == "rediss://***@h/0 and redis://h"
    assert "a@b" not in redact("redis://h/0?password=a@b")
    remember_secrets("redis://:Fragment%2Fpass@h/0")
    assert redact("Port could not be cast: 'Fragment/pass'") == "Port could not be cast: '***'"


def test_a_password_with_at_in_the_query_is_not_taken_for_userinfo() -> None:
    from leaseq.transport.urls import check_url

    assert check_url("redis://h/0?password=a@b/c") == "redis://h/0?password=a@b/c"
    with pytest.raises(leaseq.InvalidArgument, match="percent-encode"):
        check_url("redis://u:pa/ss@h/0")


# -- 13: authentication and permission errors are fatal at start --------------------


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("redis://:wrong-{secret}@127.0.0.1:{port}/0", "WRONGPASS"),
        ("redis://127.0.0.1:{port}/0", "needs a password"),
        ("redis://limited:{secret}@127.0.0.1:{port}/0", "NOPERM"),
    ],
)
def test_worker_with_bad_credentials_stops_at_once(
    locked: RedisServer, url: str, needle: str
) -> None:
    url = url.format(secret=SECRET, port=locked.port)
    done = _run("--url", url, "worker", "q", "tests.support.handlers:echo", "--burst", timeout=30)
    assert done.returncode != 0
    assert done.stderr.startswith("leaseq: error: ") and done.stderr.count("\n") == 1
    hint = "docs/reliability.md" if needle == "NOPERM" else "USER:PASSWORD@ before the host"
    assert needle in done.stderr and hint in done.stderr
    assert "unavailable" not in done.stderr
    _clean(done)


def test_worker_without_burst_also_stops_on_bad_credentials(locked: RedisServer) -> None:
    url = f"redis://:nope@127.0.0.1:{locked.port}/0"
    done = _run("--url", url, "worker", "q", "tests.support.handlers:echo", timeout=30)
    assert done.returncode != 0 and "WRONGPASS" in done.stderr and "Traceback" not in done.stderr


# -- 15: an error in the user's handler module -------------------------------------


@pytest.mark.parametrize(
    ("source", "kind", "line"),
    [
        ("x = 1\ndef handler(lease):\n    return (\n", "SyntaxError", None),
        ("import os\nimport no_such_dependency_xyz\n", "ModuleNotFoundError", 2),
        (
            "def handler(lease):\n    pass\n\nraise RuntimeError('config missing')\n",
            "RuntimeError",
            4,
        ),
        ("from os import no_such_name\n", "ImportError", 1),
    ],
)
def test_handler_module_errors_say_what_and_where(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, kind: str, line: Any
) -> None:
    name = f"user_mod_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = cli("worker", "q", f"{name}:handler", "--burst")
    _one_line_error(code, out, err, kind, str(path), f"handler module {name!r}")
    assert "internal error" not in err
    if line is not None:
        assert f"{path}:{line}" in err
    with pytest.raises(leaseq.HandlerImportError) as info:
        from leaseq.handler import load_handler

        load_handler(f"{name}:handler")
    assert info.value.filename == str(path) and info.value.error == kind


def test_missing_handler_module_is_not_blamed_on_its_code(cli: Cli) -> None:
    _one_line_error(*cli("worker", "q", "no_such_module_abc:fn"), "no module named")


# -- 18: worker and enqueue use sharded queues -------------------------------------


def test_enqueue_and_worker_serve_every_shard(cli: Cli) -> None:
    client = cli.queue().redis
    sharded = leaseq.ShardedQueue("hot", shards=3, redis=client)
    sharded.enqueue_many([{"i": i} for i in range(9)])
    code, _, err = cli("enqueue", "hot", '{"i": 9}', "--id", "extra")
    assert code == 0, err
    assert sharded.get("extra") is not None and sharded.stats().pending == 10
    assert "hot" not in leaseq.Queue.queues(client)  # no plain queue hiding the shards
    code, _, err = cli("worker", "hot", "tests.support.handlers:echo", "--burst", "-c", "2")
    assert code == 0, err
    assert sharded.stats().succeeded == 10 and sharded.stats().pending == 0


def test_shards_option_makes_and_checks_a_sharded_queue(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    # 100 random ids: every one of 4 shards gets some but once in 10^12 runs
    # (with 12, one shard stayed empty about one run in eight).
    lines.write_text("".join(f'{{"i": {i}}}\n' for i in range(100)))
    code, _, err = cli("enqueue", "fan", "--file", str(lines), "--shards", "4")
    assert code == 0, err
    sharded = leaseq.ShardedQueue("fan", shards=4, redis=cli.queue().redis)
    assert sharded.stats().pending == 100
    assert all(s.stats().pending > 0 for s in sharded.shards)
    _one_line_error(*cli("enqueue", "fan", "{}", "--shards", "2"), "has 4 shards, not 2")
    cli("enqueue", "flat", "{}")
    _one_line_error(*cli("enqueue", "flat", "{}", "--shards", "2"), "plain queue")


# -- 19: small things -------------------------------------------------------------


def test_empty_url_is_an_error_not_localhost(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.url = ""
    _one_line_error(*cli("stats"), "--url is empty")
    monkeypatch.setenv("LEASEQ_URL", " ")
    from leaseq.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["stats"])
    assert info.value.code != 0
    err = cli.capsys.readouterr().err
    assert "LEASEQ_URL is set but empty" in err and err.count("\n") == 1


@pytest.mark.parametrize("path", ["/abc", "/0x", "/1/2"])
def test_url_with_a_bad_db_is_refused(cli: Cli, path: str) -> None:
    cli.url = f"redis://127.0.0.1:{free_port()}{path}"
    _one_line_error(*cli("stats"), "db number")


def test_ttl_zero_and_negative_get_one_rule(cli: Cli) -> None:
    cli.url = f"redis://127.0.0.1:{free_port()}/0"  # checked before any server is asked
    errors = []
    for ttl in ("0", "-1", "-0.5", "nan"):
        code, out, err = cli("worker", "q", "tests.support.handlers:echo", "--burst", "--ttl", ttl)
        _one_line_error(code, out, err, "ttl must be finite and greater than 0")
        errors.append(err.split(", not")[0])
    assert len(set(errors)) == 1


def test_nan_in_cli_json_is_refused(cli: Cli, tmp_path: Path) -> None:
    for text in ('{"x": NaN}', "[Infinity]", '{"y": -Infinity}'):
        _one_line_error(*cli("enqueue", "mail", text), "NaN or Infinity")
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"i": 1}\n{"i": NaN}\n')
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "line 2")
    assert leaseq.Queue.queues(cli.queue().redis) == []


def test_retry_says_why_max_attempts_rose(cli: Cli) -> None:
    code, out, _ = cli("enqueue", "mail", "{}", "--id", "j", "--max-attempts", "2")
    q = cli.queue()
    for _ in range(2):
        lease = q.claim()
        assert lease is not None
        q.fail(lease, "boom", retry_in=0)
    job = q.get("j")
    assert job is not None and job.state is leaseq.State.DEAD
    code, out, _ = cli("retry", "mail", "j")
    assert code == 0
    text = " ".join(out.split())
    assert "5 more tries (leaseq's default max_attempts; --attempts N sets another)" in text
    assert "raised from 2 to 7" in text and "attempts stays at 2" in text
    lease = q.claim()
    assert lease is not None
    q.fail(lease, "boom", dead=True)
    code, out, _ = cli("retry", "mail", "j", "--attempts", "1")
    assert "1 more tries (--attempts 1)" in " ".join(out.split())
    lease = q.claim()
    assert lease is not None
    q.fail(lease, "boom", dead=True)
    code, out, _ = cli("retry", "mail", "--all-dead")
    text = " ".join(out.split())
    assert code == 0 and "retried 1 dead job(s) in mail, each with 5 more tries" in text


def test_eviction_warning_is_one_clean_line() -> None:
    server = RedisServer("--maxmemory-policy", "allkeys-lru")
    try:
        done = _run("--url", server.url, "enqueue", "mail", "{}")
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("leaseq: warning: Redis maxmemory-policy is 'allkeys-lru'")
        assert ".py" not in done.stderr and "warnings.warn" not in done.stderr
    finally:
        server.stop()


def test_watch_refuses_an_interval_that_is_not_a_finite_number(cli: Cli) -> None:
    for bad in ("nan", "inf", "1e308"):
        code, out, err = cli("stats", "--watch", bad)
        assert code != 0 and "Traceback" not in out + err and "--watch" in err, (bad, err)
