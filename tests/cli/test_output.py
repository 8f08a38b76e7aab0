"""What the CLI prints: tables that fit the terminal (80 columns, or the real
width when wider) with one line a row and whole ids, ``show --json`` with
every field, and a server warning as one clean line.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import leaseq
from leaseq.cli.terminal import shorten
from tests.support.cli import Cli, _one_line_error, run_leaseq_without_url
from tests.support.servers import RedisServer
from tests.support.store import HUGE

LONG = [f"order-2026-03-17-customer-with-a-long-name-{i:04d}-tail" for i in range(5)]


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip()]


def test_shorten_keeps_start_and_end() -> None:
    assert shorten("order-2026-03-17-000042", 17, "middle") == "order-20…7-000042"
    assert shorten("short", 17, "middle") == "short"
    assert shorten("a long error text", 8) == "a long …"
    assert len(shorten("x" * 300, 40, "middle")) == 40


@pytest.mark.parametrize("columns", [80, 160])
def test_ls_with_long_ids_fits_one_line_a_job(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    columns: int,
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    q = cli.queue()
    q.enqueue_many([{"to": "x" * 100}] * 5, ids=LONG)
    lease = q.claim(ttl=60.0, worker="worker-" + "w" * 60)
    assert lease is not None
    q.fail(lease, "Traceback: " + "e" * 200, retry_in=0)
    code, out, _ = cli("ls", "mail", "--state", "pending")
    assert code == 0
    lines = _lines(out)
    assert max(len(line) for line in lines) <= columns, out
    for job_id in LONG:  # one line each, start and end recognisable
        (line,) = [line for line in lines if job_id[:8] in line and job_id[-9:] in line]
        assert (job_id in line) == (columns == 160), line
    header = next(line for line in lines if line.startswith("id "))
    for word in ("id", "attempts", "worker", "error", "payload"):
        assert word in header.split()
    assert "priority" not in header.split()  # 0 on every row: no column for it
    code, out, _ = cli("ls", "mail", "--state", "pending", "--json")  # never shortened
    assert sorted(job["id"] for job in json.loads(out)) == LONG


def test_stats_schedules_with_long_names_fit(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    names = ["a" * 128, "queue-" + "b" * 100 + "-end", "mail"]
    for name in names:
        leaseq.Queue.from_url(cli.url, name).enqueue({})
        leaseq.Queue.from_url(cli.url, name).schedule("beat-" + "s" * 100, {}, every=60)
    for args in (("stats",), ("schedules",)):
        code, out, _ = cli(*args)
        assert code == 0
        lines = _lines(out)
        assert max(len(line) for line in lines) <= 80, out
        rows = [line for line in lines if line.startswith(("a", "queue", "mail"))][-3:]
        assert len(rows) == 3, out  # one line each: never wrapped
        assert any(r.startswith("queue") and "…" in r and "-end" in r for r in rows), out
        if args == ("schedules",):  # the rule and the due time are whole
            assert all("every 60 s" in r and re.search(r"\(in \d+s\)", r) for r in rows), out


def _cells(line: str) -> list[str]:
    """A table row's cells (the CLI's tables put two spaces or more between them)."""
    return re.split(r"\s{2,}", line.strip())


def test_schedules_at_80_columns_keep_a_name_whole_that_fits(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Parts that compete for the room: a long kind, a time zone, a parked
    # schedule's reason in place of its due time, a time damaged by hand.
    monkeypatch.setenv("COLUMNS", "80")
    q = cli.queue()
    q.schedule(
        "digest", {"n": 1}, cron="0 3 * * *", tz="Europe/Amsterdam", kind="send_daily_digest"
    )
    q.schedule("cleanup", {"n": 2}, every=60.0, kind="cleanup_sessions")
    q.schedule("broken", {"n": 3}, every=60.0)
    q.redis.hset(q.keys.schedule("broken"), "error", "definition cannot be read; " + "x" * 60)
    q.redis.hdel(q.keys.schedule("broken"), "next_due")
    q.redis.hset(q.keys.schedule("cleanup"), "last_fired", HUGE)
    leaseq.Queue.from_url(cli.url, "reports").schedule("weekly", {}, every=604_800.0)
    for args in (("schedules",), ("schedules", "mail")):
        code, out, err = cli(*args)
        assert code == 0, err
        lines = _lines(out)
        assert max(len(line) for line in lines) <= 80, out
        body = lines[next(i for i, line in enumerate(lines) if line.startswith("─")) + 1 :]
        names = [_cells(line)[1 if len(args) == 1 else 0] for line in body]
        every = ["broken", "cleanup", "digest", "weekly"]
        assert sorted(names) == (every if len(args) == 1 else every[:3]), out
        (digest,) = [line for line in lines if "digest" in _cells(line)]
        assert "send_" in digest and "cron 0 3 * *" in digest, out  # the kind, the rule
        assert re.search(r"\(in \d+h\)", digest), out  # the due time whole
        assert "definition cannot" in out  # a parked one's reason, where its due time goes


def test_ls_at_80_columns_shows_kind_and_payload_apart(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    q = cli.queue()
    payload = {"to": "alice@example.com", "subject": "hello there"}
    ids = q.enqueue_many([payload] * 2, kind="send_email", max_attempts=1)
    q.enqueue({"to": "bob@example.com"})
    q.enqueue(payload, kind="send_email", delay=1.0)
    for lease in q.claim_many(2, ttl=60.0, worker="host-a.example.com:1234:abcdef"):
        q.fail(lease, "ConnectionError: smtp.example.com refused the connection")
    for state in ("dead", "scheduled"):
        code, out, err = cli("ls", "mail", "--state", state)
        assert code == 0, err
        lines = _lines(out)
        assert max(len(line) for line in lines) <= 80, out
        header = _cells(next(line for line in lines if line.startswith("id ")))
        assert "kind" in header and "payload" in header, out
    code, out, _ = cli("ls", "mail", "--state", "dead")
    header = _cells(next(line for line in _lines(out) if line.startswith("id ")))
    for job_id in ids:
        (line,) = [li for li in _lines(out) if li.startswith(job_id)]
        cells = dict(zip(header, _cells(line), strict=True))
        assert cells["kind"] == "send_email", out
        assert len(cells["payload"]) >= 16 and cells["payload"].startswith('{"to": "alice'), out
        assert cells["error"].startswith("ConnectionError: "), out


def test_dead_list_at_80_columns_shows_the_error_message(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    q = cli.queue()
    ids = q.enqueue_many([{"to": f"gone{i}@bounce.test"} for i in range(3)], max_attempts=1)
    for lease in q.claim_many(3, ttl=60.0, worker="host-1:4242:ab12cd"):
        q.fail(
            lease,
            f"RuntimeError: SMTP 550: no such user {lease.payload['to']}",
            traceback='Traceback (most recent call last):\n  File "mail.py", line 3, in send\n'
            "    raise RuntimeError(...)\nRuntimeError: SMTP 550",
        )
    code, out, _ = cli("ls", "mail", "--state", "dead")
    assert code == 0 and max(len(line) for line in _lines(out)) <= 80, out
    for job_id in ids:
        job = q.get(job_id)
        assert job is not None
        (line,) = [li for li in _lines(out) if job_id in li]
        error, payload = _cells(line)[-2:]  # the room shared, the error's part the larger
        assert error.startswith("RuntimeError: SMTP 550: no") and len(error) > len(payload), out
        assert payload.startswith('{"to": "gone'), out
    code, out, _ = cli("show", "mail", ids[0])
    assert code == 0 and "failed attempts" in out and "traceback" in out
    assert 'File "mail.py", line 3, in send' in out
    code, out, _ = cli("show", "mail", ids[0], "--json")
    shown = json.loads(out)
    code, out, _ = cli("wait", "mail", ids[0], "--timeout", "1")
    assert json.loads(out) == shown  # one JSON shape for a row: ms as stored, plus _utc
    (failure,) = shown["failures"]
    assert failure["attempt"] == 1 and failure["to"] == "dead"
    assert isinstance(failure["failed_at"], int) and failure["failed_at_utc"].endswith("+00:00")


def test_enqueue_takes_a_group(cli: Cli) -> None:
    code, out, err = cli("enqueue", "mail", "{}", "--id", "g1", "--group", "tenant-7")
    assert code == 0, err
    job = cli.queue().get("g1")
    assert job is not None and job.group == "tenant-7"
    code, out, _ = cli("ls", "mail")
    assert "group" in out and "tenant-7" in out


def test_show_json_has_every_field(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue({"to": "a@b.c", "n": [1, 2]}, id="m1", priority=3)
    lease = q.claim(ttl=60.0, worker="w1")
    assert lease is not None
    q.complete(lease, result={"ok": True})
    code, out, _ = cli("show", "mail", "m1", "--json")
    assert code == 0
    doc = json.loads(out)
    job = q.get("m1")
    assert job is not None
    assert set(doc) >= set(leaseq.Job.__struct_fields__)
    assert doc["payload"] == {"to": "a@b.c", "n": [1, 2]} and doc["result"] == {"ok": True}
    assert (doc["state"], doc["attempts"], doc["priority"], doc["worker"]) == (
        "succeeded",
        1,
        3,
        "w1",
    )
    stored = int(q.redis.hget(q.keys.job("m1"), "enqueued_at"))
    assert doc["enqueued_at"] == stored  # as stored: ms epoch, server clock
    assert doc["enqueued_at_utc"].endswith("+00:00")
    assert doc["run_at"] is None and doc["run_at_utc"] is None
    assert doc["finished_at"] >= doc["claimed_at"] >= doc["enqueued_at"]
    code, out, _ = cli("ls", "mail", "--state", "succeeded", "--json")
    assert json.loads(out) == [doc]
    code, out, _ = cli("ls", "mail", "--json")
    assert json.loads(out) == []
    _one_line_error(*cli("show", "mail", "nope", "--json"), "nope")


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
        words = ("wait", "pend", "sched", "run", "done", "dead", "canc", "exp", "oldest")
        if args[0] == "ls":
            words = ("id", "attempts", "payload")
        header = next(line for line in lines if line.lstrip("┃ ").startswith(("queue", "id ")))
        for word in words:
            assert re.search(rf"(^|[\s┃]){re.escape(word)}([\s┃]|$)", header), (word, header)
        assert "…" not in header
        if args[0] == "ls":  # ids are whole: the next command needs them
            for job in leaseq.Queue.from_url(url, args[1]).ls("pending", limit=3):
                assert job.id in done.stdout


def test_eviction_warning_is_one_clean_line() -> None:
    server = RedisServer("--maxmemory-policy", "allkeys-lru")
    try:
        done = run_leaseq_without_url("--url", server.url, "enqueue", "mail", "{}")
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("leaseq: warning: Redis maxmemory-policy is 'allkeys-lru'")
        assert ".py" not in done.stderr and "warnings.warn" not in done.stderr
    finally:
        server.stop()


def test_show_lists_the_recorded_steps_at_80_columns(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    q = cli.queue()
    q.enqueue({"order": 7}, id="o7")
    lease = q.claim(ttl=60.0)
    assert lease is not None
    q.record_step(lease, "charge", {"charge_id": "ch_1", "amount": 1250})
    q.record_step(lease, "receipt", "x" * 200)
    code, out, _ = cli("show", "mail", "o7")
    assert code == 0 and max(len(line) for line in _lines(out)) <= 80, out
    assert re.search(r'step:charge\s+\{"charge_id": "ch_1", "amount": 1250\}', out), out
    (line,) = [li for li in _lines(out) if "step:receipt" in li]
    assert line.rstrip().endswith("…")  # cut to its line; show --json has it whole
    code, out, _ = cli("show", "mail", "o7", "--json")
    assert json.loads(out)["steps"]["receipt"] == "x" * 200
