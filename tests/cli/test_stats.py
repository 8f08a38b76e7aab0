"""``leaseq stats``: the table, --json, a sharded queue counted once, a damaged
queue named on stderr while the rest are listed, and --watch (printing
again until interrupted, riding out a server restart, refusing an interval
that is not a finite number).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

import leaseq
from tests.support.cli import Cli
from tests.support.servers import RedisServer


def test_stats_table(cli: Cli) -> None:
    cli("enqueue", "mail", "{}")
    code, out, _ = cli("stats", "mail")
    assert code == 0 and "mail" in out and "pending" in out


def test_stats_of_several_queues_space_or_comma_separated(cli: Cli) -> None:
    for name in ("a", "b", "c"):
        cli.queue(name).enqueue({})
    client = cli.queue().redis
    leaseq.ShardedQueue("hot", shards=2, redis=client).enqueue_many([{"i": i} for i in range(4)])
    for args in (("a", "hot"), ("a,hot",), ("a", "a,hot")):
        code, out, err = cli("stats", *args, "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert sorted(doc) == ["a", "hot"] and doc["hot"]["pending"] == 4, args
    # Weights as `leaseq worker` takes them are read past, like the worker does.
    code, out, err = cli("stats", "a:5,b:1", "--json")
    assert code == 0 and sorted(json.loads(out)) == ["a", "b"], err
    code, out, err = cli("stats", "a", "b")
    rows = [line.split()[0] for line in out.splitlines() if line.startswith(("a ", "b ", "c "))]
    assert code == 0 and rows == ["a", "b"], out
    code, out, err = cli("stats", "a", "nosuch")
    assert code == 1 and "no queue named 'nosuch'" in err and out == ""


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


def test_stats_of_every_queue_names_a_damaged_one_and_lists_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = Cli(capsys)
    cli.queue("good").enqueue({"n": 1})
    bad = cli.queue("bad")
    bad.enqueue({"n": 1})
    bad.redis.hset(bad.keys.meta, "enqueued", "abc")
    code, out, err = cli("stats")
    assert code == 1 and "good" in out
    assert "bad: " in err and "'enqueued' is 'abc'" in err and "internal error" not in err
    code, out, err = cli("stats", "--json")
    assert code == 1 and '"good"' in out and "bad: " in err


def test_stats_watch_prints_again_until_interrupted(
    memory_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = memory_cli.queue()
    q.enqueue({"n": 1})
    ticks: list[float] = []

    def sleep(seconds: float) -> None:
        ticks.append(seconds)
        if len(ticks) == 1:
            q.enqueue({"n": 2})
            return
        raise KeyboardInterrupt

    monkeypatch.setattr("leaseq.cli.ops.time.sleep", sleep)
    code, out, err = memory_cli("stats", "mail", "--json", "--watch", "0.5")
    assert code == 0 and ticks == [0.5, 0.5]
    assert '"pending": 1' in out and '"pending": 2' in out
    assert "every 0.5 s" in err
    code, _, err = memory_cli("stats", "--watch", "0")
    assert code == 2 and "--watch" in err


def test_stats_watch_keeps_watching_while_the_server_restarts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = RedisServer()
    try:
        leaseq.Queue("mail", redis=redis.Redis(port=server.port)).enqueue({"n": 1})
        cli = Cli(capsys, server.url)
        rounds: list[float] = []
        real_sleep = time.sleep

        def sleep(seconds: float) -> None:
            if seconds != 0.5:  # redis-py's own retry pauses (5.0.1 has some)
                real_sleep(seconds)
                return
            rounds.append(seconds)
            if len(rounds) == 1:
                server.kill()  # down between two rounds
            elif len(rounds) == 2:
                restart = threading.Thread(target=server.start)
                restart.start()
                restart.join(15)
            else:
                raise KeyboardInterrupt

        monkeypatch.setattr("leaseq.cli.ops.time.sleep", sleep)
        code, out, err = cli("stats", "--watch", "0.5")
        assert code == 0, err
        assert len(rounds) == 3
        assert "Redis is unavailable" in err and err.count("every 0.5 s") == 3
        assert "mail" in out and "no queues under prefix" in out  # before, then after
    finally:
        server.stop()


def test_watch_refuses_an_interval_that_is_not_a_finite_number(memory_cli: Cli) -> None:
    for bad in ("nan", "inf", "1e308"):
        code, out, err = memory_cli("stats", "--watch", bad)
        assert code != 0 and "Traceback" not in out + err and "--watch" in err, (bad, err)
