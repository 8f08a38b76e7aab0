"""The operator commands of leaseq/cli/ops.py: pause, resume, cancel, delete, drop,
and `leaseq web` without its extra, run through main() on memory://.
"""

from __future__ import annotations

import builtins
import re
from typing import Any

import pytest

from tests.support.cli import Cli


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def test_pause_and_resume(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue({"n": 1}, id="a")
    code, out, _ = cli("pause", "mail")
    assert code == 0 and "mail paused" in out
    assert q.claim(ttl=5.0) is None
    code, out, _ = cli("stats", "--json")
    assert code == 0 and '"paused": true' in out
    code, out, _ = cli("stats")
    assert code == 0 and "mail (paused)" in out
    code, out, _ = cli("resume", "mail")
    assert code == 0 and "mail resumed" in out
    assert q.claim(ttl=5.0) is not None
    code, _, err = cli("pause", "nosuch")
    assert code == 1 and "no queue named 'nosuch'" in err


def test_cancel_and_delete(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue({"n": 1}, id="a")
    q.enqueue({"n": 2}, id="b")
    code, out, _ = cli("cancel", "mail", "a")
    assert code == 0 and "job a cancelled" in out
    assert q.get("a").state == "cancelled"  # type: ignore[union-attr]
    code, out, _ = cli("delete", "mail", "b", "--yes")
    assert code == 0 and "deleted pending job b" in out
    assert q.get("b") is None
    code, _, err = cli("delete", "mail", "b", "--yes")
    assert code == 1 and "no job 'b'" in err and "Traceback" not in err
    lease = q.claim(ttl=5.0)
    assert lease is None


def test_delete_asks_first(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    q = cli.queue()
    q.enqueue({"n": 1}, id="a")
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    code, _, err = cli("delete", "mail", "a")
    assert code == 1 and "delete pending job a from mail?" in err
    assert q.get("a") is not None


def test_drop_refuses_in_flight_then_forces(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue_many([{"n": i} for i in range(4)])
    assert q.claim(ttl=30.0) is not None
    code, _, err = cli("drop", "mail", "--yes")
    assert code == 1 and "1 lease(s) in flight" in err and "--force" in err
    assert q.stats().pending == 3
    code, out, _ = cli("drop", "mail", "--yes", "--force")
    assert code == 0 and "dropped mail: 4 job(s) deleted" in out
    code, _, err = cli("stats", "mail")
    assert code == 1 and "no queue named 'mail'" in err


def test_web_without_the_extra_says_how_to_install(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_uvicorn(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvicorn":
            raise ImportError("No module named 'uvicorn'", name="uvicorn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvicorn)
    code, _, err = cli("web")
    assert code == 1
    assert err.count("\n") == 1 and "pip install 'leaseq[web]'" in err


def test_stats_watch_prints_again_until_interrupted(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = cli.queue()
    q.enqueue({"n": 1})
    ticks: list[float] = []

    def sleep(seconds: float) -> None:
        ticks.append(seconds)
        if len(ticks) == 1:
            q.enqueue({"n": 2})
            return
        raise KeyboardInterrupt

    monkeypatch.setattr("leaseq.cli.ops.time.sleep", sleep)
    code, out, err = cli("stats", "mail", "--json", "--watch", "0.5")
    assert code == 0 and ticks == [0.5, 0.5]
    assert '"pending": 1' in out and '"pending": 2' in out
    assert "every 0.5 s" in err
    code, _, err = cli("stats", "--watch", "0")
    assert code == 2 and "--watch" in err


def test_tables_fit_80_columns(redis_server: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    import leaseq

    url = f"redis://127.0.0.1:{redis_server.port}/0"
    r = leaseq.Queue.from_url(url, "emails-transactional-eu-west")
    r.redis.flushall()
    r.enqueue_many([{"to": f"someone-{i}@example.org", "body": "x" * 200} for i in range(1234)])
    leaseq.Queue.from_url(url, "a").enqueue(1)
    exe = str(Path(sys.executable).parent / "leaseq")
    env = {**os.environ, "COLUMNS": "80", "LEASEQ_URL": url}
    for args in (["stats"], ["stats", "a"], ["ls", "emails-transactional-eu-west", "--limit", "3"]):
        done = subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, done.stdout
        print(done.stdout)
        words = ("pending", "sched", "active", "done", "dead", "cancel", "expired", "oldest")
        if args[0] == "ls":
            words = ("id", "attempts", "priority", "worker", "last_error", "payload")
        header = next(line for line in lines if line.lstrip("┃ ").startswith(("queue", "id ")))
        for word in words:
            assert re.search(rf"(^|[\s┃]){re.escape(word)}([\s┃]|$)", header), (word, header)
        assert "…" not in header
        if args[0] == "ls":  # ids are whole: the next command needs them
            for job in leaseq.Queue.from_url(url, args[1]).ls("pending", limit=3):
                assert job.id in done.stdout


def test_delete_removes_a_row_damaged_by_hand(cli: Cli) -> None:
    # show refuses such a row with a clear error; delete must still act on it.
    q = cli.queue()
    q.enqueue({"n": 1}, id="hurt")
    q.redis.hset(q.keys.job("hurt"), "attempts", "abc")
    code, _, err = cli("show", "mail", "hurt")
    assert code == 1 and "attempts" in err and "Traceback" not in err
    code, out, err = cli("delete", "mail", "hurt", "--yes")
    assert code == 0, err
    assert "deleted" in out and "hurt" in out
    assert not q.redis.exists(q.keys.job("hurt")) and q.stats().pending == 0
