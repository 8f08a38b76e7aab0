"""Putting jobs in and looking at them: ``leaseq enqueue`` (a payload, --file,
stdin, --kind, --shards), ``show``, ``ls`` and ``wait``; in-process through
main() on memory:// and on a real server, and as a subprocess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import leaseq
from tests.support.cli import Cli, _one_line_error, run_leaseq
from tests.support.servers import RedisServer
from tests.support.store import HUGE


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


def test_enqueue_and_show_a_cost_and_a_deadline_at_80_columns(cli: Cli) -> None:
    code, out, _ = cli("enqueue", "mail", "{}", "--id", "c1", "--cost", "4000", "--expires", "60")
    assert (code, out.strip()) == (0, "c1")
    job = cli.queue().get("c1")
    assert job.cost == 4000 and job.expires_at is not None
    code, out, _ = cli("show", "mail", "c1")
    assert code == 0 and re.search(r"cost\s+4000\s*\n", out), out
    assert re.search(r"expires_at\s+.*\(in (60|5\d) s\)", out), out
    assert max(len(line) for line in out.splitlines()) <= 80
    cli.queue().set_limits(cost_rate=100, cost_per=1.0)
    code, _, err = cli("enqueue", "mail", "{}", "--cost", "500")
    assert code != 0 and "above the cost limit of the queue" in err and "Traceback" not in err
    code, _, err = cli("enqueue", "mail", "{}", "--expires", "-1")
    assert code != 0 and "expires" in err


def test_show_lease_deadline_is_relative(cli: Cli) -> None:
    q = cli.queue()
    job_id = q.enqueue({})
    code, out, _ = cli("show", "mail", job_id)
    assert code == 0 and "token" not in out  # never claimed: no lease, no token
    lease = q.claim(ttl=60.0)
    assert lease is not None
    code, out, _ = cli("show", "mail", job_id)
    assert code == 0 and "active" in out and "expires in" in out
    # The lease's full fencing token, on one line at 80 columns.
    token = f"attempt 1, row {lease.incarnation}, claim {lease.fence}"
    assert any(line.split()[:1] == ["token"] and token in line for line in out.splitlines())
    assert max(len(line) for line in out.splitlines()) <= 80


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


def test_shards_option_makes_and_checks_a_sharded_queue(memory_cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    # 100 random ids: every one of 4 shards gets some but once in 10^12 runs
    # (with 12, one shard stayed empty about one run in eight).
    lines.write_text("".join(f'{{"i": {i}}}\n' for i in range(100)))
    code, _, err = memory_cli("enqueue", "fan", "--file", str(lines), "--shards", "4")
    assert code == 0, err
    sharded = leaseq.ShardedQueue("fan", shards=4, redis=memory_cli.queue().redis)
    assert sharded.stats().pending == 100
    assert all(s.stats().pending > 0 for s in sharded.shards)
    _one_line_error(*memory_cli("enqueue", "fan", "{}", "--shards", "2"), "has 4 shards, not 2")
    memory_cli("enqueue", "flat", "{}")
    _one_line_error(*memory_cli("enqueue", "flat", "{}", "--shards", "2"), "plain queue")


def test_cli_enqueue_kind_and_a_worker_serving_a_dict(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.cli import Cli

    cli = Cli(capsys)
    code, out, err = cli("enqueue", "mail", '{"n": 1}', "--id", "e", "--kind", "echo")
    assert code == 0, err
    code, _, err = cli("enqueue", "mail", '{"n": 2}', "--id", "a", "--kind", "async_echo")
    assert code == 0, err
    code, out, _ = cli("show", "mail", "e")
    assert code == 0 and "kind" in out and "echo" in out
    code, out, _ = cli("ls", "mail")
    assert code == 0 and re.search(r"^e +0/5 +echo +\{\"n\": 1\}", out, re.M), out
    code, _, err = cli("worker", "mail", "tests.support.handlers:KINDS", "--burst")
    assert code == 0, err
    q = cli.queue()
    e, a = q.get("e"), q.get("a")
    assert (
        e is not None
        and e.result == {"n": 1}
        and a is not None
        and a.result == {"echo": {"n": 2}, "job": "a"}
    )


def test_ls_pages(cli: Cli) -> None:
    cli.queue().enqueue_many([{"i": i} for i in range(5)])
    code, out, _ = cli("ls", "mail", "--state", "pending", "--limit", "2")
    assert code == 0 and "pending (5)" in out
    assert "showing 1-2 of 5; next page: --offset 2" in out
    code, out, _ = cli("ls", "mail", "--offset", "4", "--limit", "2")
    assert code == 0 and '{"i": 4}' in out and "next page" not in out


def test_ls_filters_by_kind_text_and_age_and_goes_on_by_a_cursor(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue_many([{"to": f"a{i}@x.org"} for i in range(6)], ids=[f"m{i}" for i in range(6)])
    q.enqueue_many(
        [{"to": f"b{i}@y.org"} for i in range(5)], ids=[f"s{i}" for i in range(5)], kind="sms"
    )
    code, out, err = cli("ls", "mail", "--kind", "sms", "--limit", "2")
    assert code == 0, err
    assert "matching (2 in 8 of 11 looked at)" in out and re.search(r"^s0 ", out, re.M)
    after = re.search(r"--after (\S+)", out)
    assert after and "s2" not in out, out
    code, out, _ = cli("ls", "mail", "--kind", "sms", "--after", after.group(1), "--json")
    assert code == 0 and [j["id"] for j in json.loads(out)] == ["s2", "s3", "s4"]
    code, out, _ = cli("ls", "mail", "--text", '"to": "A3@', "--older-than", "0s")
    assert code == 0 and re.search(r"^m3 ", out, re.M) and "no more" in out
    code, out, _ = cli("ls", "mail", "--kind", "sms", "--older-than", "10m")
    assert code == 0 and "matching (0 in 11 of 11 looked at)" in out
    code, out, _ = cli("ls", "mail", "--text", "@y.org", "--scan", "3")
    assert code == 0 and "in 3 of 11 looked at" in out and "--after" in out
    _one_line_error(*cli("ls", "mail", "--kind", "x", "--older-than", "10x"), "not a duration")
    _one_line_error(*cli("ls", "mail", "--after", "nope"), "not a cursor")
    _one_line_error(
        *cli("ls", "mail", "--state", "pending", "--age-of", "finished", "--older-than", "1h"),
        "enqueued_at",
    )
    code, _, err = cli("ls", "mail", "--kind", "sms", "--offset", "2")
    assert code != 0 and "--after" in err


def test_ls_shows_the_page_and_names_a_damaged_row(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue_many([{"n": 1}, {"n": 2}], ids=["good", "hurt"])
    q.redis.hset(q.keys.job("hurt"), "max_attempts", "many")
    code, out, err = cli("ls", "mail", "--state", "pending")
    assert code == 0 and "Traceback" not in out + err
    assert "good" in out
    assert "damaged row" in out and "'hurt'" in out and "max_attempts" in out


def test_show_and_ls_json_of_a_time_no_date_holds(capsys: pytest.CaptureFixture[str]) -> None:
    cli = Cli(capsys)
    q = cli.queue()
    q.enqueue({"n": 1}, id="bad")
    q.redis.hset(q.keys.job("bad"), "enqueued_at", HUGE)
    code, out, err = cli("show", "mail", "bad")
    assert "internal error" not in err and "Traceback" not in out + err
    assert "enqueued_at" in out + err
    code, out, err = cli("ls", "mail", "--json")
    assert code == 0 and "internal error" not in err and "enqueued_at" in err


def test_cli_wait_prints_json_and_exits_by_state(capsys: Any) -> None:
    import json

    from tests.support.cli import Cli

    cli = Cli(capsys)
    q = cli.queue()
    q.enqueue_many([{}, {}, {}], ids=["ok", "bad", "open"], max_attempts=1)
    leases = {lease.id: lease for lease in q.claim_many(2)}
    q.complete(leases["ok"], result={"n": 1})
    q.fail(leases["bad"], "boom")
    code, out, err = cli("wait", "mail", "ok", "--timeout", "1")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["state"] == "succeeded" and doc["result"] == {"n": 1}
    code, out, _ = cli("wait", "mail", "bad")
    assert code == 1 and json.loads(out)["state"] == "dead"
    code, out, _ = cli("wait", "mail", "open", "--timeout", "0.2")
    assert code == 2 and json.loads(out) == {"id": "open", "state": "pending", "finished": False}
    later = q.enqueue({}, delay=60)
    code, out, _ = cli("wait", "mail", later, "--timeout", "0.2")  # where it is, not null
    assert code == 2 and json.loads(out)["state"] == "scheduled"
    code, _, err = cli("wait", "mail", "nope")
    assert code != 0 and "no job 'nope'" in err and "Traceback" not in err


def test_subprocess_enqueue_stdin_and_stats_json(redis_server: RedisServer) -> None:
    import redis

    redis.Redis(port=redis_server.port).flushall()
    done = run_leaseq(
        "--url", redis_server.url, "enqueue", "mail", "--file", "-", stdin='{"a": 1}\n[2]\n'
    )
    assert done.returncode == 0, done.stderr
    assert "enqueued 2 job(s) to mail" in done.stdout
    done = run_leaseq("stats", "--json", env={"LEASEQ_URL": redis_server.url})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mail"]["pending"] == 2


def test_ls_pages_pending_past_entries_of_jobs_gone(cli: Cli) -> None:
    """Offsets of pending count the ready list's entries, stale ones too: a page of
    them shows nobody, and the next page still comes, until every job was shown."""
    q = cli.queue("t2")
    q.enqueue_many(list(range(60)), ids=[f"j{i:03d}" for i in range(60)])
    for i in range(5, 45):  # out of order: entries left in the list, counted stale
        q.cancel(f"j{i:03d}")
    seen: list[str] = []
    offset = 0
    for _ in range(10):
        code, text_out, _ = cli(
            "ls", "t2", "--state", "pending", "--limit", "20", "--offset", str(offset)
        )
        assert code == 0
        seen += [w for w in text_out.split() if w.startswith("j0")]
        if "next page: --offset" not in text_out:
            break
        offset = int(text_out.rsplit("--offset", 1)[1].split()[0])
    assert sorted(set(seen)) == [f"j{i:03d}" for i in (*range(5), *range(45, 60))]
