"""``leaseq events``: one line per transition in 80 columns, --json, the switch,
and --follow (Ctrl-C exits 0, a server restart is ridden out, a wrong
password fails at once). The stream itself: tests/store/test_events.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import redis

import leaseq
from leaseq import State
from leaseq.cli.events import line
from tests.support.cli import Cli
from tests.support.servers import RedisServer
from tests.support.store import claim_one


def test_cli_prints_one_line_per_transition_in_80_columns(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue("x", id="short")
    q.enqueue("y", id="a-very-long-job-id-" + "x" * 120)
    q.complete(claim_one(q))
    code, out, _ = cli("events", "mail")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4 and max(len(li) for li in lines) <= 80
    assert "-         -> pending" in lines[0] and lines[0].endswith("short")
    assert lines[1].endswith("~")
    assert "pending   -> active     #1" in lines[2]
    code, out, _ = cli("events", "mail", "--json", "--since", "0", "--limit", "2")
    docs = [leaseq.store.events.msgspec.json.decode(li) for li in out.splitlines()]
    assert [d["job_id"][:5] for d in docs] == ["short", "a-ver"]
    assert docs[0]["from_state"] is None and docs[0]["to_state"] == "pending"
    code, out, _ = cli("events", "mail", "--off")
    assert code == 0 and "events off" in out
    q.enqueue("z")
    code, out, _ = cli("events", "mail", "--settings")
    assert "events off" in out and "4 entries now" in out and max(map(len, out.splitlines())) <= 80
    code, out, err = cli("events", "mail", "--off", "--follow")
    assert code != 0 and err.count("\n") == 1


def test_limit_prints_the_newest_and_job_filters(cli: Cli) -> None:
    q = cli.queue()
    q.enqueue_many(list(range(35)), ids=[f"j{i:02d}" for i in range(35)])  # 4 entries
    q.complete(claim_one(q))  # j00: pending -> active -> succeeded
    code, out, _ = cli("events", "mail", "--limit", "3")
    assert code == 0
    assert [li.split()[-1] for li in out.splitlines()] == ["j34", "j00", "j00"]
    assert "active    -> succeeded" in out.splitlines()[-1]
    code, out, _ = cli("events", "mail", "--limit", "12")
    assert [li.split()[-1] for li in out.splitlines()][:2] == ["j25", "j26"]
    code, out, _ = cli("events", "mail", "--job", "j00")
    assert [li.split()[2:5] for li in out.splitlines()] == [
        ["-", "->", "pending"],
        ["pending", "->", "active"],
        ["active", "->", "succeeded"],
    ]
    code, out, _ = cli("events", "mail", "--job", "j00", "--limit", "1")
    assert len(out.splitlines()) == 1 and "succeeded" in out


def test_line_fits_any_id(r: Any) -> None:
    event = leaseq.Event(
        stream_id="1-0",
        index=0,
        job_id="j" * 256,
        attempt=12,
        from_state=State.ACTIVE,
        to_state=None,
        at=1.7e9,
    )
    assert len(line(event)) == 80 and "deleted" in line(event)


def _follower(url: str, *args: str) -> subprocess.Popen[str]:
    """``leaseq events tail --follow ARGS`` from this checkout, at 80 columns."""
    root = str(Path(__file__).resolve().parents[2])  # this checkout's leaseq
    env = {**os.environ, "COLUMNS": "80", "LEASEQ_URL": url, "PYTHONPATH": root}
    main = "from leaseq.cli.main import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", main, "events", "tail", "--follow", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_follow_exits_0_on_ctrl_c(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("tail", redis=client)
    q.enqueue("x", id="seen")
    proc = _follower(redis_server.url, "--since", "0")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed: the follower now waits on XREAD BLOCK
        assert first.rstrip().endswith("seen") and len(first.rstrip()) <= 80
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)  # a loaded CI box: exit, however slow
    client.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_follow_rides_out_a_server_restart() -> None:
    """--follow ends only on Ctrl-C: a restart is named on stderr (no traceback)
    and the tail goes on with what comes after it."""
    import queue as queue_mod

    server = RedisServer()
    client = redis.Redis(port=server.port)
    try:
        leaseq.Queue("tail", redis=client).enqueue("x", id="before")
        proc = _follower(server.url, "--since", "0")
        lines: queue_mod.Queue[str] = queue_mod.Queue()
        assert proc.stdout is not None
        out = proc.stdout
        threading.Thread(target=lambda: [lines.put(li) for li in out], daemon=True).start()
        try:
            assert lines.get(timeout=20).rstrip().endswith("before")
            server.kill()
            server.start()  # a new, empty server on the same port
            leaseq.Queue("tail", redis=client).enqueue("y", id="after")
            got = lines.get(timeout=20)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)  # a loaded CI box: exit, however slow
        assert got.rstrip().endswith("after"), err
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "unavailable" in err.lower()
    finally:
        client.close()
        server.stop()


def test_follow_with_a_wrong_password_fails_at_once() -> None:
    server = RedisServer()
    try:
        redis.Redis(port=server.port).config_set("requirepass", "good-pw")
        proc = _follower(f"redis://:wrong-pw@127.0.0.1:{server.port}/0")
        out, err = proc.communicate(timeout=30)
    finally:
        server.stop()
    assert proc.returncode == 1 and out == ""
    assert "Traceback" not in err and "wrong-pw" not in err
    assert err.count("\n") == 1 and "password" in err


def test_job_filter_says_when_the_window_no_longer_reaches_the_job(cli: Cli) -> None:
    # The stream is a window of the recent past: once trimmed past a job's
    # enqueue, --job must not pass an empty answer off as the job's history.
    q = cli.queue()
    q.set_events(True, maxlen=10)
    q.enqueue("old", id="old")
    for i in range(300):  # single calls, one entry each: MAXLEN ~ trims whole nodes
        q.enqueue(i)
    q.enqueue("new", id="new")
    code, out, err = cli("events", "mail", "--job", "old")
    assert code == 0 and out == ""
    assert "no longer holds job old's earlier events" in err
    assert "leaseq show mail old" in err
    code, out, err = cli("events", "mail", "--job", "new")
    assert code == 0 and out.splitlines()[0].endswith("new") and err == ""
    quiet = cli.queue("quiet")
    quiet.set_events(False)
    quiet.enqueue("x", id="unrecorded")  # no stream at all, and not for want of room
    assert cli("events", "quiet", "--job", "unrecorded") == (0, "", "")
