"""CLI output a new user met: tables that fit the terminal (80 columns, or the
real width when wider) with one line a row, ``ls --json`` and ``show --json``,
and ``enqueue --file`` naming a line that is not UTF-8. In-process through
main(), on memory:// and on a real server (see tests/test_cli.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import leaseq
from leaseq.cli.terminal import shorten
from tests.support.cli import Cli, _one_line_error

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
    for word in ("id", "attempts", "priority", "worker", "last_error", "payload"):
        assert word in header.split()
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
        rows = [line for line in lines if line.startswith(("a", "queue-", "mail"))]
        assert len(rows) == 3, out  # one line each: never wrapped
        assert any(r.startswith("queue-") and "…" in r and "-end" in r for r in rows), out


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


def test_non_utf8_line_is_named_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_bytes(b'{"i": 1}\n{"i": 2}\n{"s": "caf\xe9"}\n{"i": 4}\n')
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "line 3", "UTF-8", "0xe9")
    assert leaseq.Queue.queues(cli.queue().redis) == []


def test_too_large_line_is_named_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    # A bad line past the first batch of 1000: still nothing written.
    lines = tmp_path / "jobs.jsonl"
    body = [json.dumps({"i": i}) for i in range(1500)]
    body[1200] = json.dumps({"big": "x" * 2_000_000})
    lines.write_text("\n".join(body) + "\n")
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "line 1201", "bytes")
    assert leaseq.Queue.queues(cli.queue().redis) == []


def test_utf8_file_with_a_bom_and_text(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_bytes('\ufeff{"s": "café ☕"}\n{"i": 2}\n'.encode())
    code, out, _ = cli("enqueue", "mail", "--file", str(lines))
    assert code == 0 and "enqueued 2 job(s)" in out
    assert {"s": "café ☕"} in [j.payload for j in cli.queue().ls("pending")]
