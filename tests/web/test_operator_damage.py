"""Operator views over keys damaged by hand, and a server that restarts under them
(found by attacking the dashboard and the CLI as a new user would).

- A time field set to a value no datetime holds (10^30 ms, -10^17 ms) is a
  damaged row (DamagedRow names the field), and the dashboard's job page, its
  lists, its search and ``leaseq show`` show it instead of failing with a 500
  or an internal error.
- One queue whose keys are damaged (a key of the wrong type, a counter that is
  not a number) is named on the overview, left out of /metrics and named on
  stderr by ``leaseq stats``; the other queues are still listed.
- ``leaseq stats --watch`` keeps watching while the server restarts.
- ``leaseq schedules`` lists a schedule whose stored definition will not read.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import pytest
import redis

import leaseq
from leaseq.errors import DamagedKey, DamagedRow
from tests.support.cli import Cli
from tests.support.servers import RedisServer

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note about httpx versions
    from starlette.testclient import TestClient


from leaseq.web import create_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


HUGE = "9" * 30  # ms epoch far past year 9999


NEGATIVE = "-99999999999999999"  # before year 1


DIGITS = "9" * 400  # more than a float holds


def _web(r: Any) -> TestClient:
    return TestClient(create_app(r), raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("field", "value"),
    [("enqueued_at", HUGE), ("lease_until", NEGATIVE), ("claimed_at", DIGITS)],
)
def test_a_time_no_date_holds_is_a_damaged_row_shown_as_stored(
    r: Any, field: str, value: str
) -> None:
    q = leaseq.Queue("clocks", redis=r)
    q.enqueue({"n": 1}, id="ok")
    q.enqueue({"n": 2}, id="bad")
    r.hset(q.keys.job("bad"), field, value)

    with pytest.raises(DamagedRow) as caught:
        q.get("bad")
    assert caught.value.field == field
    damaged: list[DamagedRow] = []
    assert [j.id for j in q.ls("pending", damaged=damaged)] == ["ok"]
    assert [d.job_id for d in damaged] == ["bad"]

    c = _web(r)
    page = c.get("/queues/clocks/jobs/bad")
    assert page.status_code == 200, page.text
    assert "out of range" in page.text and field in page.text
    listing = c.get("/queues/clocks?state=pending")
    assert listing.status_code == 200 and "bad" in listing.text
    assert c.get("/search?q=n").status_code == 200


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


def test_a_counter_that_is_not_a_number_is_a_damaged_key(r: Any) -> None:
    q = leaseq.Queue("counted", redis=r)
    q.enqueue({"n": 1})
    r.hset(q.keys.meta, "enqueued", "abc")
    with pytest.raises(DamagedKey, match="'enqueued' is 'abc'"):
        q.stats()
    r.hdel(q.keys.meta, "enqueued")
    assert q.stats().pending == 1


DAMAGE = {
    "meta a string": lambda r, k: (r.delete(k.meta), r.set(k.meta, "x")),
    "limits a string": lambda r, k: r.set(k.limits, "x"),
    "counter not a number": lambda r, k: r.hset(k.meta, "succeeded", "many"),
    "workers a string": lambda r, k: r.set(k.workers, "x"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_one_damaged_queue_leaves_the_others_on_the_overview_and_metrics(
    r: Any, damage: str
) -> None:
    good = leaseq.Queue("good", redis=r)
    good.enqueue_many([{"n": i} for i in range(3)])
    bad = leaseq.Queue("bad", redis=r)
    bad.enqueue({"n": 1})
    DAMAGE[damage](r, bad.keys)

    c = _web(r)
    page = c.get("/")
    assert page.status_code == 200, page.text
    assert 'data-queue="good"' in page.text and 'data-queue="bad"' in page.text
    assert c.get("/workers").status_code == 200
    metrics = c.get("/metrics")
    assert metrics.status_code == 200
    assert 'leaseq_jobs{queue="good",state="pending"} 3.0' in metrics.text


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


def test_schedules_lists_one_whose_definition_will_not_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = Cli(capsys)
    q = cli.queue()
    q.schedule("hourly", {"n": 1}, every=3600.0)
    q.schedule("broken", {"n": 2}, every=60.0)
    q.redis.hset(q.keys.schedule("broken"), "every_ms", "abc")
    q.redis.hset(q.keys.schedule("broken"), "last_fired", HUGE)
    code, out, err = cli("schedules", "mail")
    assert code == 0, err
    assert "hourly" in out and "broken" in out and "unreadable" in out


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


@pytest.mark.parametrize("job_id", ["../../../../etc/passwd", "2026/05/../report", "a?b=c&d#e"])
def test_a_job_link_opens_that_job_whatever_its_id(r: Any, job_id: str) -> None:
    """Job ids may hold '/', '..', '?', '#' and '%': a list's link, resolved as a
    browser resolves it (dot segments and all), must open that job's page."""
    import re
    import urllib.parse

    q = leaseq.Queue("paths", redis=r)
    q.enqueue({"n": 1}, id=job_id)
    c = _web(r)
    page = c.get("/queues/paths?state=pending")
    hrefs = re.findall(r'href="([^"]*/jobs/[^"]*)"', page.text)
    assert len(hrefs) == 1
    href = urllib.parse.urljoin("http://testserver/queues/paths", hrefs[0].replace("&amp;", "&"))
    opened = c.get(href)
    assert opened.status_code == 200, (href, opened.status_code)
    assert f"<h1>{job_id}" in opened.text.replace("&amp;", "&").replace("&#39;", "'") or (
        job_id.replace("&", "&amp;") in opened.text
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"concurrency": "nan"},
        {"concurrency": "2.5"},
        {"concurrency": "-1"},
        {"rate": "-5", "per_ms": "1000"},
        {"rate": "5", "per_ms": "nan"},
        {"rate": "5", "per_ms": "-1"},
        {"group_concurrency": "-3"},
    ],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()),
)
def test_a_limit_edited_by_hand_to_junk_is_no_limit_and_never_stops_claims(
    r: Any, fields: dict[str, str]
) -> None:
    """claim.lua read limits with tonumber(): 'nan', '2.5' or '-5' crashed every
    claim of the queue (so every worker) with a ScriptError; stats and limits
    read the same fields differently. Now all three read digits only."""
    q = leaseq.Queue("limited", redis=r)
    q.enqueue_many([{"n": i} for i in range(5)])
    q.enqueue_many([{"n": i} for i in range(5)], group="g")
    r.hset(q.keys.limits, mapping=fields)
    assert len(q.claim_many(10, ttl=30.0)) == 10
    s, lim = q.stats(), q.limits()
    assert (s.concurrency_limit, lim.concurrency) == (None, None)
    assert (s.rate_limit, lim.rate, lim.per, lim.group_concurrency) == (None, None, None, None)


def test_a_rate_of_zero_set_by_hand_holds_claims_without_an_error(r: Any) -> None:
    q = leaseq.Queue("limited", redis=r)
    q.enqueue({"n": 1})
    r.hset(q.keys.limits, mapping={"rate": "0", "per_ms": "1000"})
    assert q.claim(ttl=30.0) is None
    r.delete(q.keys.limits)
    assert q.claim(ttl=30.0) is not None
