"""The `leaseq` command line end to end: in-process (through main(), so error
handling is the real one) on memory:// and on a real server, and a few runs as
a subprocess on a real server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import leaseq
from tests.support.cli import Cli, _one_line_error
from tests.support.servers import RedisServer, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]


LEASEQ = str(Path(sys.executable).parent / "leaseq")


def test_enqueue_then_show(cli: Cli) -> None:
    code, out, _ = cli("enqueue", "mail", '{"to": "a@b.c", "n": [1, 2]}', "--id", "m1")
    assert (code, out.strip()) == (0, "m1")
    code, out, _ = cli("show", "mail", "m1")
    assert code == 0
    assert "state" in out and "pending" in out and "0 of 5" in out
    assert "enqueued_at" in out and "ago)" in out and "+00:00" in out
    assert '"to": "a@b.c"' in out  # pretty-printed payload


def test_show_prints_the_timeout(cli: Cli) -> None:
    code, _, _ = cli("enqueue", "mail", "{}", "--id", "t1", "--timeout", "2.5")
    assert code == 0
    code, out, _ = cli("show", "mail", "t1")
    assert code == 0 and re.search(r"timeout\s+2\.5 s", out), out
    code, out, _ = cli("show", "mail", "t1", "--json")
    assert code == 0 and json.loads(out)["timeout"] == 2.5


def test_show_lease_deadline_is_relative(cli: Cli) -> None:
    q = cli.queue()
    job_id = q.enqueue({})
    assert q.claim(ttl=60.0) is not None
    code, out, _ = cli("show", "mail", job_id)
    assert code == 0 and "active" in out and "expires in" in out


def test_enqueue_file_then_stats_json(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"i": 1}\n\n{"i": 2}\n{"i": 3}\n')
    code, out, _ = cli("enqueue", "mail", "--file", str(lines))
    assert code == 0 and "enqueued 3 job(s) to mail" in out
    cli("enqueue", "other", "{}", "--delay", "60")
    code, out, _ = cli("stats", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["mail"]["pending"] == 3 and doc["mail"]["succeeded"] == 0
    assert doc["other"]["scheduled"] == 1
    for counts in doc.values():
        assert {"pending", "scheduled", "active", "succeeded", "dead"} <= counts.keys()


def test_stats_json_reports_a_sharded_queue_once(cli: Cli) -> None:
    client = cli.queue().redis
    sharded = leaseq.ShardedQueue("hot", shards=3, redis=client)
    sharded.enqueue_many([{"i": i} for i in range(30)])
    sharded.claim_many(4)
    cli.queue("plain").enqueue({})
    code, out, _ = cli("stats", "--json")
    doc = json.loads(out)
    assert code == 0 and sorted(doc) == ["hot", "plain"]
    assert (doc["hot"]["pending"], doc["hot"]["active"]) == (26, 4)
    assert doc["plain"]["pending"] == 1


def test_stats_table(cli: Cli) -> None:
    cli("enqueue", "mail", "{}")
    code, out, _ = cli("stats", "mail")
    assert code == 0 and "mail" in out and "pending" in out


def test_bad_json_line_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"i": 1}\n{"i": \n')
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "bad JSON in line 2")
    assert leaseq.Queue.queues(cli.queue().redis) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("enqueue", "mail", "{nope"), "bad JSON in payload"),
        (("enqueue", "bad name!", "{}"), "invalid queue name"),
        (("enqueue", "mail", "{}", "--priority", "-1"), "priority"),
        (("enqueue", "mail"), "either a JSON PAYLOAD or --file"),
        (("show", "mail", "nope"), "no job 'nope'"),
        (("show", "mail", "bad{id}"), "invalid job id"),
        (("stats", "ghost"), "no queue named 'ghost'"),
        (("ls", "mail", "--state", "weird"), "weird"),
        (("retry", "mail", "nope"), "no job 'nope'"),
        (("worker", "mail", "no_such_module:fn"), "cannot import"),
        (("worker", "mail", "tests.support.handlers"), "module:function"),
        (("frobnicate",), "No such command"),
    ],
)
def test_bad_input_is_one_clear_line(cli: Cli, args: tuple[str, ...], needle: str) -> None:
    if args[0] in ("show", "retry"):
        cli("enqueue", "mail", "{}")
    _one_line_error(*cli(*args), needle)


def test_ls_pages(cli: Cli) -> None:
    cli.queue().enqueue_many([{"i": i} for i in range(5)])
    code, out, _ = cli("ls", "mail", "--state", "pending", "--limit", "2")
    assert code == 0 and "pending (5)" in out
    assert "showing 1-2 of 5; next page: --offset 2" in out
    code, out, _ = cli("ls", "mail", "--offset", "4", "--limit", "2")
    assert code == 0 and '{"i": 4}' in out and "next page" not in out


def _dead_job(q: leaseq.Queue) -> str:
    job_id = q.enqueue({}, max_attempts=1)
    lease = q.claim()
    assert lease is not None
    q.fail(lease, "nope")
    return job_id


def test_retry_one_and_all_dead(cli: Cli) -> None:
    q = cli.queue()
    one, two, three = _dead_job(q), _dead_job(q), _dead_job(q)
    code, out, _ = cli("retry", "mail", one)
    assert code == 0 and f"job {one} is pending again" in out
    code, out, _ = cli("retry", "mail", "--all-dead")
    assert code == 0 and "retried 2 dead job(s)" in out
    for job_id in (one, two, three):
        job = q.get(job_id)
        assert job is not None and job.state is leaseq.State.PENDING and job.attempts == 1
    _one_line_error(*cli("retry", "mail", one), "only dead jobs")


def test_reap_returns_expired_leases(cli: Cli) -> None:
    q = cli.queue()
    job_id = q.enqueue({})
    assert q.claim(ttl=0.02) is not None
    code, out, _ = wait_until(
        lambda: (res := cli("reap", "mail"))[1].startswith("reaped mail: 1") and res,
        what="the lease to expire",
    )
    assert code == 0 and "1 returned to pending, 0 dead-lettered" in out
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.PENDING


def test_purge_asks_unless_yes(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    q = cli.queue()
    _dead_job(q)
    _dead_job(q)
    monkeypatch.setattr("sys.stdin", _Answer("n\n"))
    code, _, err = cli("purge", "mail", "--state", "dead")
    assert code == 1 and err.startswith("delete 2 dead job(s) from mail? [y/N]")
    assert err.endswith("leaseq: error: aborted\n")
    assert q.stats().dead == 2
    code, out, _ = cli("purge", "mail", "--state", "dead", "--yes")
    assert code == 0 and "purged 2 dead job(s) from mail" in out
    assert q.stats().dead == 0
    _one_line_error(*cli("purge", "mail", "--state", "active", "--yes"), "active")


class _Answer:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""

    def isatty(self) -> bool:
        return False


def test_worker_burst_drains(cli: Cli) -> None:
    q = cli.queue()
    ids = q.enqueue_many([{"i": i} for i in range(20)])
    code, _, err = cli("worker", "mail", "tests.support.handlers:echo", "--burst", "-c", "3")
    assert code == 0, err
    assert [q.get(i).result for i in ids] == [{"i": i} for i in range(20)]  # type: ignore[union-attr]


def test_demo_on_memory(capsys: pytest.CaptureFixture[str]) -> None:
    # memory:// only: the real server's demo is test_subprocess_demo_on_a_real_server.
    code, out, err = Cli(capsys)("demo", "--jobs", "5")
    assert code == 0, err
    assert "reap(): 1 returned to pending" in out
    assert "every job succeeded" in out and "did so at attempt 2" in out
    assert '"state"' in out and '"succeeded"' in out and "HGETALL" in out
    assert "5 of 5 succeeded" in out


def test_demo_table_fits_80_columns_a_line_a_job(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = Cli(capsys)("demo", "--jobs", "12")
    assert code == 0, err
    table = out[out.index("12 of 12 succeeded") :].splitlines()
    assert all(len(line) <= 80 for line in table), table
    rows = [line for line in table if " succeeded " in line]
    assert len(rows) == 12 and all(line.rstrip().endswith("}") for line in rows), table
    assert '{"n": 12, "square": 144}' in rows[-1]  # the results whole; the ids give way
    assert all(re.search(r" demo-worker-\d ", line) for line in rows), table  # whole too


# -- as a subprocess, on a real server -------------------------------------------


def _run(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [LEASEQ, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_subprocess_enqueue_stdin_and_stats_json(redis_server: RedisServer) -> None:
    import redis

    redis.Redis(port=redis_server.port).flushall()
    done = _run(
        "--url", redis_server.url, "enqueue", "mail", "--file", "-", stdin='{"a": 1}\n[2]\n'
    )
    assert done.returncode == 0, done.stderr
    assert "enqueued 2 job(s) to mail" in done.stdout
    done = _run("stats", "--json", env={"LEASEQ_URL": redis_server.url})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mail"]["pending"] == 2


def test_subprocess_unreachable_server_hides_the_password() -> None:
    url = f"redis://:hunter2secret@127.0.0.1:{free_port()}/0"
    done = _run("--url", url, "stats")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("leaseq: error: ") and done.stderr.count("\n") == 1
    assert "hunter2secret" not in done.stderr + done.stdout


def test_subprocess_demo_on_a_real_server(redis_server: RedisServer) -> None:
    done = _run("--url", redis_server.url, "demo", "--jobs", "6")
    assert done.returncode == 0, done.stderr
    assert "SIGKILLed pid" in done.stdout and "did so at attempt 2" in done.stdout
    assert "6 of 6 succeeded" in done.stdout


def test_ls_shows_the_page_and_names_a_damaged_row(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue_many([{"n": 1}, {"n": 2}], ids=["good", "hurt"])
    q.redis.hset(q.keys.job("hurt"), "max_attempts", "many")
    code, out, err = cli("ls", "mail", "--state", "pending")
    assert code == 0 and "Traceback" not in out + err
    assert "good" in out
    assert "damaged row" in out and "'hurt'" in out and "max_attempts" in out


def test_operator_commands_cover_every_shard_of_a_sharded_queue(cli: Cli) -> None:
    client = cli.queue().redis
    sharded = leaseq.ShardedQueue("hot", shards=3, redis=client, max_attempts=1)
    ids = sharded.enqueue_many([{"i": i} for i in range(12)], ids=[f"j{i}" for i in range(12)])
    for lease in sharded.claim_many(12):
        sharded.fail(lease, "boom")  # one attempt: every job is dead, on every shard
    code, out, _ = cli("show", "hot", "j7")
    assert code == 0 and "dead" in out and "boom" in out
    code, out, _ = cli("ls", "hot", "--state", "dead", "--limit", "50")
    assert code == 0 and all(job_id in out for job_id in ids)
    code, out, _ = cli("retry", "hot", "j3")
    assert code == 0 and "pending again" in out
    code, out, _ = cli("retry", "hot", "--all-dead")
    assert code == 0 and "retried 11 dead job(s)" in out
    assert sharded.stats().pending == 12
    code, out, _ = cli("reap", "hot")
    assert code == 0 and "0 returned to pending" in out
    code, out, _ = cli("purge", "hot", "--state", "pending", "--yes")
    assert code == 0 and "purged 12 pending" in out
    _one_line_error(*cli("show", "hot", "nope"), "no job 'nope'")
