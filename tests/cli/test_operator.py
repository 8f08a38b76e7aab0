"""The operator commands: retry (one job, --all-dead, and why max_attempts
rose), reap, purge, pause, resume, cancel, delete, drop, on plain and
sharded queues; and ``leaseq web`` without its extra. In-process through
main().
"""

from __future__ import annotations

import builtins
from typing import Any

import pytest

import leaseq
from tests.support.cli import Cli, _one_line_error
from tests.support.servers import wait_until


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


def test_retry_says_why_max_attempts_rose(memory_cli: Cli) -> None:
    code, out, _ = memory_cli("enqueue", "mail", "{}", "--id", "j", "--max-attempts", "2")
    q = memory_cli.queue()
    for _ in range(2):
        lease = q.claim()
        assert lease is not None
        q.fail(lease, "boom", retry_in=0)
    job = q.get("j")
    assert job is not None and job.state is leaseq.State.DEAD
    code, out, _ = memory_cli("retry", "mail", "j")
    assert code == 0
    text = " ".join(out.split())
    assert "5 more tries (leaseq's default max_attempts; --attempts N sets another)" in text
    assert "raised from 2 to 7" in text and "attempts stays at 2" in text
    lease = q.claim()
    assert lease is not None
    q.fail(lease, "boom", dead=True)
    code, out, _ = memory_cli("retry", "mail", "j", "--attempts", "1")
    assert "1 more tries (--attempts 1)" in " ".join(out.split())
    lease = q.claim()
    assert lease is not None
    q.fail(lease, "boom", dead=True)
    code, out, _ = memory_cli("retry", "mail", "--all-dead")
    text = " ".join(out.split())
    assert code == 0 and "retried 1 dead job(s) in mail, each with 5 more tries" in text


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


def test_purge_and_retry_all_name_the_damaged_rows_they_step_over(cli: Cli) -> None:
    q = cli.queue()
    for _ in range(3):
        _dead_job(q)
    broken = _dead_job(q)
    q.redis.set(q.keys.job(broken), "overwritten by hand")  # not a hash any more
    code, out, err = cli("purge", "mail", "--state", "dead", "--yes")
    assert code == 0 and "purged 3 dead job(s) from mail" in out
    assert broken in err and "1 damaged row(s) left in place" in err
    for _ in range(2):
        _dead_job(q)
    code, out, err = cli("retry", "mail", "--all-dead")
    assert code == 0 and "retried 2 dead job(s)" in out
    assert broken in err and "1 damaged row(s) stayed dead" in err
    assert q.stats().dead == 1  # what the warnings said is still there


class _Answer:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""

    def isatty(self) -> bool:
        return False


def test_pause_and_resume(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    q.enqueue({"n": 1}, id="a")
    code, out, _ = memory_cli("pause", "mail")
    assert code == 0 and "mail paused" in out
    assert q.claim(ttl=5.0) is None
    code, out, _ = memory_cli("stats", "--json")
    assert code == 0 and '"paused": true' in out
    code, out, _ = memory_cli("stats")
    assert code == 0 and "mail (paused)" in out
    code, out, _ = memory_cli("resume", "mail")
    assert code == 0 and "mail resumed" in out
    assert q.claim(ttl=5.0) is not None
    code, _, err = memory_cli("pause", "nosuch")
    assert code == 1 and "no queue named 'nosuch'" in err


def test_cancel_and_delete(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    q.enqueue({"n": 1}, id="a")
    q.enqueue({"n": 2}, id="b")
    code, out, _ = memory_cli("cancel", "mail", "a")
    assert code == 0 and "job a cancelled" in out
    assert q.get("a").state == "cancelled"  # type: ignore[union-attr]
    code, out, _ = memory_cli("delete", "mail", "b", "--yes")
    assert code == 0 and "deleted pending job b" in out
    assert q.get("b") is None
    code, _, err = memory_cli("delete", "mail", "b", "--yes")
    assert code == 1 and "no job 'b'" in err and "Traceback" not in err
    lease = q.claim(ttl=5.0)
    assert lease is None


def test_delete_asks_first(memory_cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    q = memory_cli.queue()
    q.enqueue({"n": 1}, id="a")
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    code, _, err = memory_cli("delete", "mail", "a")
    assert code == 1 and "delete pending job a from mail?" in err
    assert q.get("a") is not None


def test_delete_removes_a_row_damaged_by_hand(memory_cli: Cli) -> None:
    # show refuses such a row with a clear error; delete must still act on it.
    q = memory_cli.queue()
    q.enqueue({"n": 1}, id="hurt")
    q.redis.hset(q.keys.job("hurt"), "attempts", "abc")
    code, _, err = memory_cli("show", "mail", "hurt")
    assert code == 1 and "attempts" in err and "Traceback" not in err
    code, out, err = memory_cli("delete", "mail", "hurt", "--yes")
    assert code == 0, err
    assert "deleted" in out and "hurt" in out
    assert not q.redis.exists(q.keys.job("hurt")) and q.stats().pending == 0


def test_drop_refuses_in_flight_then_forces(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    q.enqueue_many([{"n": i} for i in range(4)])
    assert q.claim(ttl=30.0) is not None
    code, _, err = memory_cli("drop", "mail", "--yes")
    assert code == 1 and "1 lease(s) in flight" in err and "--force" in err
    assert q.stats().pending == 3
    code, out, _ = memory_cli("drop", "mail", "--yes", "--force")
    assert code == 0 and "dropped mail: 4 job(s) deleted" in out
    code, _, err = memory_cli("stats", "mail")
    assert code == 1 and "no queue named 'mail'" in err


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


def test_workers_shows_seen_and_up_on_the_server_clock(memory_cli: Cli) -> None:
    from freezegun import freeze_time

    q = memory_cli.queue()
    q.enqueue({})
    with freeze_time("2026-01-01 00:00:00") as frozen:
        q.register_worker("host-a:1:abc", ttl=60.0, concurrency=2)
        frozen.tick(40.0)  # it has not refreshed since: hung, or cut off
        code, out, err = memory_cli("workers")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    (line,) = [x for x in out.splitlines() if "host-a:1:abc" in x]
    assert line.split()[-4:] == ["40", "s", "40", "s"], line  # up, seen


def test_web_without_the_extra_says_how_to_install(
    memory_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_uvicorn(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvicorn":
            raise ImportError("No module named 'uvicorn'", name="uvicorn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvicorn)
    code, _, err = memory_cli("web")
    assert code == 1
    assert err.count("\n") == 1 and "pip install 'leaseq[web]'" in err


def test_cancel_a_running_job(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    q.enqueue({"n": 1}, id="a")
    lease = q.claim(ttl=30.0)
    assert lease is not None
    code, out, _ = memory_cli("cancel", "mail", "a")
    assert code == 0 and "job a cancelled while running (attempt 1)" in " ".join(out.split())
    with pytest.raises(leaseq.LeaseLost):
        q.complete(lease)
    code, out, _ = memory_cli("cancel", "mail", "a")
    assert code == 0 and "already cancelled" in out


def test_update_then_edit_and_retry(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    q.enqueue({"to": "typo"}, id="a")
    code, out, _ = memory_cli("update", "mail", "a", '{"to": "fixed"}')
    assert code == 0 and "job a updated" in out
    assert q.get("a").payload == {"to": "fixed"}  # type: ignore[union-attr]
    _one_line_error(*memory_cli("update", "mail", "a", "{nope"), "bad JSON in PAYLOAD")
    lease = q.claim()
    assert lease is not None
    _one_line_error(*memory_cli("update", "mail", "a", "{}"), "is active")
    q.fail(lease, "boom", dead=True)
    code, out, _ = memory_cli("retry", "mail", "a", "--payload", '{"to": "again"}')
    assert code == 0 and "job a is pending again" in out
    job = q.get("a")
    assert job is not None and job.payload == {"to": "again"} and job.state == "pending"
    _one_line_error(*memory_cli("retry", "mail", "--all-dead", "--payload", "{}"), "--payload")


def test_edits_are_checked_against_the_typed_tasks_of_tasks_modules(cli: Cli) -> None:
    """``leaseq --tasks MODULE`` knows the module's typed tasks: an edit of one of
    their jobs that does not fit the signature is refused, nothing written; without
    it the CLI cannot know the task and writes what it is given (as before)."""
    q = cli.queue()
    good = {"args": [{"to": "a@b.c"}, "2026-01-02T03:04:05Z"], "kwargs": {}}
    q.enqueue(good, id="s1", kind="send", max_attempts=1)
    q.fail(q.claim(), "boom", dead=True)
    bad = '{"args": [{"to": 5}, "not a time"], "kwargs": {}}'
    code, _, err = cli("--tasks", "tests.support.tasks", "retry", "mail", "s1", "--payload", bad)
    assert code != 0 and "task 'send'" in err and "Traceback" not in err
    assert q.get("s1").state == leaseq.State.DEAD and q.get("s1").payload == good
    code, _, err = cli("--tasks", "no.such.module", "retry", "mail", "s1")
    assert code != 0 and "--tasks: cannot import handler module 'no.such.module'" in err
    fits = '{"args": [{"to": "c@d.e"}, "2026-01-02T03:04:05Z"], "kwargs": {}}'
    code, out, _ = cli("--tasks", "tests.support.tasks", "retry", "mail", "s1", "--payload", fits)
    assert code == 0 and "pending again" in out


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def broken(:\n", "SyntaxError"),
        ("raise RuntimeError('no config')\n", "RuntimeError: no config"),
        ("import os\nos.environ['LEASEQ_TEST_UNSET_VARIABLE']\n", "KeyError"),
    ],
)
def test_a_tasks_module_that_breaks_on_import_is_one_line_naming_it(
    cli: Cli, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, source: str, said: str
) -> None:
    # The module's own code broke, not leaseq: the line says which module, what and
    # where, as a worker's handler module does, and the dead job stays as it was.
    (tmp_path / "broken_tasks.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    q = cli.queue()
    q.enqueue({"args": [], "kwargs": {}}, id="s1", kind="send", max_attempts=1)
    q.fail(q.claim(), "boom", dead=True)
    code, _, err = cli("--tasks", "broken_tasks", "retry", "mail", "s1", "--payload", "{}")
    assert code != 0 and "internal error" not in err and "Traceback" not in err
    assert "--tasks: handler module 'broken_tasks' failed to import" in err and said in err
    assert len(err.strip().splitlines()) == 1
    assert q.get("s1").state == leaseq.State.DEAD


def test_show_prints_the_unique_key(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    q.enqueue({}, id="a", unique=leaseq.Unique("sync-user-42"))
    code, out, _ = memory_cli("show", "mail", "a")
    assert code == 0 and "unique_key" in out and "sync-user-42" in out


def test_signal_resumes_waiters_and_show_says_what_a_job_waits_for(cli: Cli) -> None:
    q = cli.queue()
    job_id = q.enqueue({}, max_attempts=1)
    lease = q.claim()
    assert lease is not None
    q.record_step(lease, "charge", 100)
    q.suspend(lease, "approval", None, "approved:7")
    code, out, _ = cli("show", "mail", job_id)
    text = " ".join(out.split())
    assert code == 0 and "suspended" in text
    assert "waits_for signal approved:7 (step approval; leaseq signal mail approved:7)" in text
    assert "step:charge 100" in text
    code, out, _ = cli("signal", "mail", "approved:7", '{"by": "ann"}')
    said = "signal approved:7 resumed 1 job(s); kept 86400 s for later waiters"
    assert (code, out.strip()) == (0, said)
    job = q.get(job_id)
    assert job is not None and job.state is leaseq.State.PENDING
    assert job.steps == {"charge": 100, "approval": {"by": "ann"}}
    code, out, _ = cli("signal", "mail", "approved:7", "--keep", "0")
    assert (code, out.strip()) == (0, "signal approved:7 resumed 0 job(s)")
    _one_line_error(*cli("signal", "mail", "a b"), "invalid signal key")
    _one_line_error(*cli("signal", "mail", "k", "{nope"), "bad JSON in PAYLOAD")
    _one_line_error(*cli("signal", "mail", "k", "--keep", "nan"), "keep")


def test_show_says_a_wait_timed_out(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    job_id = q.enqueue({}, max_attempts=1)
    lease = q.claim()
    assert lease is not None
    q.suspend(lease, "approval", 3600, "k")
    q.run_now(job_id)  # an operator ends the wait: it counts as timed out
    code, out, _ = memory_cli("show", "mail", job_id)
    assert code == 0 and "step:approval (timed out: no signal)" in " ".join(out.split())
    code, out, _ = memory_cli("show", "mail", job_id, "--json")
    assert '"approval": {\n      "type": "timed_out"\n    }' in out


def test_signal_quotes_the_key_it_suggests_and_works_before_any_job(memory_cli: Cli) -> None:
    q = memory_cli.queue()
    job_id = q.enqueue({}, max_attempts=1)
    lease = q.claim()
    assert lease is not None
    q.suspend(lease, "w", None, "order:7;touch$IFS/tmp/x")
    code, out, _ = memory_cli("show", "mail", job_id)
    assert "leaseq signal mail 'order:7;touch$IFS/tmp/x'" in " ".join(out.split())
    code, out, _ = memory_cli("signal", "brandnew", "approved:1", '"yes"')
    assert code == 0 and "resumed 0 job(s)" in out and "no queue brandnew yet" in out
    fresh = memory_cli.queue("brandnew")
    assert fresh.redis.hget(fresh.keys.signals, "approved:1") == b'"yes"'
