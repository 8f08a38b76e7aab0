"""The dashboard over HTTP (Starlette's TestClient), on fakeredis and a real server:
pages, paging, live fragments, search bounds, safety (read-only, CSRF, auth,
no password in any page), mounting under a path, /metrics, job links for any
id, and keys damaged by hand (a damaged row's page, one damaged queue on
the overview and /metrics).
"""

from __future__ import annotations

import base64
import re
import warnings
from typing import Any

import pytest
import redis

import leaseq
from leaseq.errors import DamagedRow
from tests.support.servers import wait_until
from tests.support.store import DIGITS, HUGE, NEGATIVE
from tests.support.web import client_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note about httpx versions
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient


from leaseq.web import _source as source_mod
from leaseq.web import create_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def seeded(q: leaseq.Queue) -> leaseq.Queue:
    q.enqueue_many(
        [{"to": f"u{i}@example.org"} for i in range(75)], ids=[f"m{i:03d}" for i in range(75)]
    )
    lease = q.claim(ttl=60.0)
    assert lease is not None
    q.fail(
        lease, "Traceback (most recent call last):\n  File x\nValueError: bad address", dead=True
    )
    return q


def csrf_of(c: TestClient) -> str:
    c.get("/")
    token = c.cookies.get("leaseq_csrf")
    assert token
    return str(token)


def test_overview_lists_queues_and_counts(seeded: leaseq.Queue, r: Any) -> None:
    leaseq.Queue("reports", redis=r).pause()
    c = client_for(r)
    page = c.get("/")
    assert page.status_code == 200
    html = page.text
    assert 'data-queue="emails"' in html and 'data-queue="reports"' in html
    assert re.search(r'data-count="pending">74<', html)
    assert re.search(r'data-count="dead">1<', html)
    assert re.search(r'data-queue="reports">.*?badge paused', html, re.S)
    live = c.get("/?partial=live")
    assert (
        live.status_code == 200 and "<html" not in live.text and 'data-queue="emails"' in live.text
    )


def test_queue_pages_through_the_index(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r)
    first = c.get("/queues/emails?state=pending&size=20").text
    assert "1\u201320 of 74" in first
    ids = re.findall(r'<tr data-job="([^"]+)"', first)
    assert ids == [f"m{i:03d}" for i in range(1, 21)]
    last = c.get("/queues/emails?state=pending&size=20&page=4").text
    assert "61\u201374 of 74" in last
    assert re.findall(r'<tr data-job="([^"]+)"', last)[-1] == "m074"
    assert "61\u201374 of 74" in c.get("/queues/emails?state=pending&size=20&page=99").text
    dead = c.get("/queues/emails?state=dead").text
    assert "ValueError: bad address" in dead  # the last line of the error
    fragment = c.get("/queues/emails?state=dead&partial=live").text
    assert "<html" not in fragment and 'data-job="m000"' in fragment
    assert c.get("/queues/emails?state=bogus").status_code == 400
    assert c.get("/queues/nosuch").status_code == 404


def test_job_page_shows_every_field(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r)
    html = c.get("/queues/emails/jobs/m000").text
    for field in (
        "state",
        "attempts",
        "max_attempts",
        "enqueued_at",
        "claimed_at",
        "finished_at",
        "worker",
        "last_error",
    ):
        assert f'data-field="{field}"' in html, field
    assert "attempt 1 of 5" in html
    assert re.search(
        r"<td class=\"mono\">\d{13}</td><td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", html
    )
    assert "&#34;to&#34;: &#34;u0@example.org&#34;" in html or '"to": "u0@example.org"' in html
    assert c.get("/queues/emails/jobs/nope").status_code == 404


HISTORY_ROW = re.compile(
    r'<td class="mono">(\w+) → (\w+)</td><td class="num">(\d+)</td><td class="sub">(\w+)</td>'
)


def test_job_page_shows_the_jobs_history_from_row_and_stream(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue({"n": 1}, max_attempts=2)
    q.enqueue_many(range(30))  # other jobs' transitions around it
    lease = q.claim_many(40)[0]
    assert lease.id == job_id
    q.fail(lease, "ValueError: first try", traceback="Traceback ...\nValueError: first try")
    c = client_for(r)
    html = c.get(f"/queues/emails/jobs/{job_id}").text
    assert HISTORY_ROW.findall(html)[:3] == [
        ("new", "pending", "0", "stream"),
        ("pending", "active", "1", "stream"),
        ("active", "scheduled", "1", "stream"),  # retried after its backoff
    ]
    assert "event-stream entries" in html
    assert "data-traceback" in html and "Traceback ...\nValueError: first try" in html
    assert html.count("Traceback ...\nValueError: first try") == 1  # once, not in the row too
    assert 'href="#traceback">2 lines: the Traceback above</a>' in html
    assert "data-failures" in html and "ValueError: first try</td>" in html
    # What an operator acts on comes first; the row and its history after.
    at = {
        name: html.index(name)
        for name in ("data-traceback", "data-payload", "<h2>Row", "<h2>History")
    }
    assert at["data-traceback"] < at["data-payload"] < at["<h2>Row"] < at["<h2>History"]
    q.set_events(False)
    other = q.enqueue({"n": 2})
    html = c.get(f"/queues/emails/jobs/{other}").text
    assert HISTORY_ROW.findall(html) == [("new", "pending", "0", "row")]
    r.delete(q.keys.events)
    r.set(q.keys.events, "damaged by hand")
    page = c.get(f"/queues/emails/jobs/{job_id}")
    assert page.status_code == 200 and "the event stream could not be read" in page.text
    assert [m[:3] for m in HISTORY_ROW.findall(page.text)] == [
        ("new", "pending", "0"),
        ("pending", "active", "1"),
        ("active", "scheduled", "1"),
    ]


def test_a_jobs_whole_history_outlives_20000_events_of_other_jobs(rr: Any) -> None:
    q = leaseq.Queue("emails", redis=rr, backoff=0.0, keep_succeeded_count=None)
    q.set_events(maxlen=1000)  # a busy queue's stream holds only its newest part
    first = q.enqueue({"first": True}, max_attempts=3)
    lease = q.claim(ttl=30.0, worker="w1")
    assert lease is not None
    q.fail(lease, "OSError: connection reset")
    lease = q.claim(ttl=30.0, worker="w2")
    assert lease is not None and lease.id == first
    q.complete(lease, "ok")
    for start in range(0, 10_000, 2_000):  # 10,000 jobs enqueued, claimed, completed
        q.enqueue_many(range(start, start + 2_000))
        for _ in range(2):
            q.complete_many(leases := q.claim_many(1000, ttl=30.0), [None] * len(leases))
    assert sum(1 for _ in q.events(limit=None)) < 20_000  # the stream forgot most
    html = client_for(rr).get(f"/queues/emails/jobs/{first}").text
    assert [m[:3] for m in HISTORY_ROW.findall(html)] == [
        ("new", "pending", "0"),
        ("pending", "active", "1"),
        ("active", "pending", "1"),
        ("pending", "active", "2"),
        ("active", "succeeded", "2"),
    ]


def test_job_page_of_a_damaged_row_shows_what_is_stored(seeded: leaseq.Queue, r: Any) -> None:
    r.hset(seeded.keys.job("m005"), "attempts", "abc")
    html = client_for(r).get("/queues/emails/jobs/m005").text
    assert "damaged field attempts=&#39;abc&#39;" in html or "damaged field attempts='abc'" in html
    assert '<td class="mono">abc</td>' in html
    assert 'data-action="delete"' not in html  # read-only
    c = client_for(r, allow_actions=True)
    listing = c.get("/queues/emails?state=pending").text
    assert "damaged row: job &#39;m005&#39;" in listing and "/queues/emails/jobs/m005" in listing
    page = c.get("/queues/emails/jobs/m005").text
    assert "Delete this damaged row" in page
    token = csrf_of(c)
    form = {"csrf": token, "action": "delete", "id": "m005", "confirmed": "yes"}
    c.post("/queues/emails/actions", data=form)
    assert not r.exists(seeded.keys.job("m005"))


def test_search_by_id_and_bounded_substring(
    seeded: leaseq.Queue, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = client_for(r)
    html = c.get("/search?q=m010").text
    assert 'href="/queues/emails/jobs/m010"' in html
    html = c.get("/search?q=u42@").text
    assert "scanned 75 of 75 jobs" in html and "data-job" not in html and "m042" in html
    monkeypatch.setattr(source_mod, "SEARCH_PAGE", 7)
    found = source_mod.Source(r).search(source_mod.Source(r).queue("emails"), "example", limit=30)
    assert (found.scanned, found.total) == (30, 75) and len(found.jobs) == 30
    monkeypatch.setattr("leaseq.web.job_pages.SCAN_LIMIT", 30)
    assert (
        "scanned 30 of 75 jobs (a search reads at most 30 rows in all"
        in c.get("/search?q=zzz").text
    )


def test_read_only_refuses_every_post(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r)
    token = csrf_of(c)
    html = c.get("/queues/emails?state=dead").text
    assert "data-action" not in html and 'type="checkbox"' not in html
    resp = c.post(
        "/queues/emails/actions", data={"csrf": token, "action": "retry_all", "confirmed": "yes"}
    )
    assert resp.status_code == 403 and "--allow-actions" in resp.text
    assert seeded.stats().dead == 1


def test_actions_need_the_csrf_token_and_a_same_origin(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r, allow_actions=True)
    token = csrf_of(c)
    form = {"action": "pause", "next": "/queues/emails"}
    assert c.post("/queues/emails/actions", data=form).status_code == 403
    assert c.post("/queues/emails/actions", data={**form, "csrf": "x" * 43}).status_code == 403
    evil = c.post(
        "/queues/emails/actions",
        data={**form, "csrf": token},
        headers={"origin": "http://evil.example"},
    )
    assert evil.status_code == 403 and not seeded.stats().paused
    ok = c.post("/queues/emails/actions", data={**form, "csrf": token}, follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/queues/emails"
    assert seeded.stats().paused
    assert "emails paused" in c.get("/queues/emails").text  # the flash message
    away = c.post(
        "/queues/emails/actions",
        data={"action": "resume", "next": "https://evil.example/", "csrf": token},
        follow_redirects=False,
    )
    assert away.headers["location"] == "/"  # never redirected off the app


def test_destructive_actions_ask_first(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r, allow_actions=True)
    token = csrf_of(c)
    form = {"csrf": token, "action": "purge", "state": "pending", "next": "/queues/emails"}
    ask = c.post("/queues/emails/actions", data=form)
    assert ask.status_code == 200 and "Delete all 74 pending jobs of emails?" in ask.text
    assert seeded.stats().pending == 74
    done = c.post("/queues/emails/actions", data={**form, "confirmed": "yes"})
    assert done.status_code == 200 and "purged 74 pending jobs of emails" in done.text
    assert seeded.stats().pending == 0
    ask = c.post("/queues/emails/actions", data={"csrf": token, "action": "delete", "id": "m000"})
    assert "Delete 1 job of emails (m000)?" in ask.text and seeded.get("m000") is not None
    c.post(
        "/queues/emails/actions",
        data={"csrf": token, "action": "delete", "id": "m000", "confirmed": "yes"},
    )
    assert seeded.get("m000") is None
    bad = c.post(
        "/queues/emails/actions",
        data={"csrf": token, "action": "purge", "state": "active", "confirmed": "yes"},
    )
    assert bad.status_code == 400


def test_actions_on_many_ids_report_refusals(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r, allow_actions=True)
    token = csrf_of(c)
    data = {"csrf": token, "action": "cancel", "id": ["m001", "m002", "m000"], "confirmed": "yes"}
    html = c.post("/queues/emails/actions", data=data).text
    assert "cancelled 2 of 3 jobs" in html and "only unfinished jobs" in html


@pytest.mark.parametrize("kind", ["basic", "bearer"])
def test_auth(seeded: leaseq.Queue, r: Any, kind: str) -> None:
    secret = "ops:s3cret pass" if kind == "basic" else "tok-123"
    c = client_for(r, auth=secret)
    denied = c.get("/")
    assert denied.status_code == 401 and "s3cret" not in denied.text
    assert c.get("/metrics").status_code == 401
    if kind == "basic":
        assert denied.headers["www-authenticate"].startswith("Basic")
        good = "Basic " + base64.b64encode(secret.encode()).decode()
        bad = "Basic " + base64.b64encode(b"ops:nope").decode()
    else:
        good, bad = "Bearer tok-123", "Bearer tok-12"
        assert c.get("/?token=tok-123").status_code == 200  # then a cookie carries it
        assert c.get("/").status_code == 200
        c.cookies.clear()
    assert c.get("/", headers={"authorization": bad}).status_code == 401
    assert c.get("/", headers={"authorization": good}).status_code == 200


def test_no_password_in_any_page(redis_server: Any) -> None:
    url = f"redis://:hunter2secret@127.0.0.1:{redis_server.port}/0"
    c = TestClient(create_app(url))
    for path in ("/", "/queues/x", "/search?q=a", "/metrics", "/nope"):
        assert "hunter2secret" not in c.get(path).text
    down = TestClient(create_app("redis://:hunter2secret@127.0.0.1:1/0"))
    resp = down.get("/")
    assert resp.status_code == 503 and "hunter2secret" not in resp.text
    assert "unavailable" in resp.text


def test_mounts_under_any_path(seeded: leaseq.Queue, r: Any) -> None:
    outer = Starlette(routes=[Mount("/ops/jobs", app=create_app(r, allow_actions=True))])
    c = TestClient(outer)
    html = c.get("/ops/jobs/").text
    assert 'href="/ops/jobs/queues/emails"' in html and 'href="/ops/jobs/static/leaseq.css"' in html
    assert c.get("/ops/jobs/static/leaseq.js").status_code == 200
    # A 404 inside the static mount links to the app's pages, not under /static/.
    missing = c.get("/ops/jobs/static/")
    assert missing.status_code == 404 and "no such page" in missing.text
    assert 'href="/ops/jobs/static/leaseq.css"' in missing.text
    assert "/static/static/" not in missing.text and "/static/queues" not in missing.text
    page = c.get("/ops/jobs/queues/emails?state=dead").text
    assert 'action="/ops/jobs/queues/emails/actions"' in page
    token = c.cookies.get("leaseq_csrf")
    resp = c.post(
        "/ops/jobs/queues/emails/actions",
        data={"csrf": token, "action": "pause", "next": "/ops/jobs/queues/emails"},
        follow_redirects=False,
    )
    assert resp.status_code == 303 and resp.headers["location"] == "/ops/jobs/queues/emails"


def test_metrics(seeded: leaseq.Queue, r: Any) -> None:
    seeded.set_limits(rate=1000, per=60.0, cost_rate=1000, cost_per=60.0)
    lease = seeded.claim(ttl=60.0)
    assert lease is not None
    seeded.complete(lease, cost=12.5)
    seeded.pause()
    text = client_for(r).get("/metrics").text
    assert 'leaseq_jobs{queue="emails",state="pending"} 73.0' in text
    assert 'leaseq_jobs{queue="emails",state="dead"} 1.0' in text
    assert 'leaseq_jobs_enqueued_total{queue="emails"} 75.0' in text
    assert re.search(r'leaseq_jobs_finished_total\{outcome="succeeded",queue="emails"\} 1\.0', text)
    assert re.search(r'leaseq_jobs_finished_total\{outcome="dead",queue="emails"\} 1\.0', text)
    assert 'leaseq_queue_paused{queue="emails"} 1.0' in text
    assert 'leaseq_recent_claims{queue="emails"} 1.0' in text
    assert 'leaseq_recent_cost{queue="emails"} 12.5' in text  # settled from 1 to 12.5
    assert "# TYPE leaseq_jobs_enqueued_total counter" in text


def test_scale_api_gives_an_autoscaler_the_backlog_behind_the_auth(
    seeded: leaseq.Queue, r: Any
) -> None:
    seeded.enqueue({"late": 1}, delay=3600.0)  # scheduled later: not backlog
    due = seeded.enqueue({"due": 1}, delay=0.001)
    wait_until(lambda: seeded.stats().overdue == 1, 5, what="the delayed job to fall due")
    c = client_for(r, auth="s3cret")
    bearer = {"authorization": "Bearer s3cret"}
    assert c.get("/api/scale/emails").status_code == 401
    # 75 seeded, one of them dead: 74 pending, and the due one not yet promoted.
    assert c.get("/api/scale/emails", headers=bearer).json()["backlog"] == 75
    lease = seeded.claim(ttl=60.0)  # promotes the due one, and leases one
    assert lease is not None and lease.id != due
    got = c.get("/api/scale/emails", headers=bearer)
    assert got.status_code == 200 and got.headers["content-type"] == "application/json"
    doc = got.json()
    assert doc == {
        "queue": "emails",
        "demand": 75,  # the 74 that could start and the one running
        "backlog": 74,
        "in_flight": 1,
        "oldest_ready_age": doc["oldest_ready_age"],
        "paused": False,
    }
    assert 0 <= doc["oldest_ready_age"] < 60
    unknown = c.get("/api/scale/nope", headers=bearer)
    assert unknown.status_code == 404 and "no queue named 'nope'" in unknown.json()["error"]
    seeded.pause()
    paused = c.get("/api/scale/emails", headers=bearer).json()
    assert (paused["demand"], paused["backlog"], paused["paused"]) == (1, 74, True)
    seeded.resume()
    text = c.get("/metrics", headers=bearer).text
    assert 'leaseq_backlog{queue="emails"} 74.0' in text
    assert 'leaseq_in_flight{queue="emails"} 1.0' in text


def test_leaseq_web_serves_on_loopback(redis_server: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    from tests.support.servers import free_port, wait_until

    port = free_port()
    # A user with a password (the server's default user has none): the page must
    # work through it and never show it. (A password for a server that has none
    # is an AUTH error on redis-py 5.0, silently dropped by 8.x.)
    admin = redis.Redis(port=redis_server.port)
    admin.execute_command("ACL", "SETUSER", "webtest", "on", ">pw-s3cret", "~*", "&*", "+@all")
    admin.close()
    url = f"redis://webtest:pw-s3cret@127.0.0.1:{redis_server.port}/0"
    leaseq.Queue.from_url(f"redis://127.0.0.1:{redis_server.port}/0", "cli-web").enqueue(1)
    exe = str(Path(sys.executable).parent / "leaseq")
    proc = subprocess.Popen(
        [exe, "--url", url, "web", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def up() -> Any:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/", timeout=1.0)
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                return None

        page = wait_until(up, 20, what="leaseq web to answer")
        assert page.status_code == 200 and 'data-queue="cli-web"' in page.text
        assert "read-only" in page.text and "pw-s3cret" not in page.text
        refused = httpx.post(f"http://127.0.0.1:{port}/queues/cli-web/actions", data={})
        assert refused.status_code == 403
        # DNS rebinding: a hostile name resolved to 127.0.0.1 reaches the port
        # with its own Host header; on loopback only loopback names are answered.
        rebound = httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": "evil.example:80"})
        assert rebound.status_code == 400 and "cli-web" not in rebound.text
        local = httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": f"localhost:{port}"})
        assert local.status_code == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert f"leaseq web on http://127.0.0.1:{port}/ (read-only)" in err
    assert "pw-s3cret" not in err and "***" in err


def test_allowed_hosts_refuses_other_host_headers(seeded: leaseq.Queue, r: Any) -> None:
    c = client_for(r, allow_actions=True, allowed_hosts=["127.0.0.1", "localhost"])
    assert c.get("/").status_code == 400  # TestClient's Host is "testserver"
    ok = c.get("/", headers={"Host": "127.0.0.1:8080"})
    assert ok.status_code == 200 and "emails" in ok.text
    # A same-origin POST from a rebound name: refused before the CSRF check.
    evil = {"Host": "evil.example", "Origin": "http://evil.example"}
    assert (
        c.post("/queues/emails/actions", data={"action": "pause"}, headers=evil).status_code == 400
    )
    assert not seeded.stats().paused
    assert client_for(r).get("/").status_code == 200  # None: any host (a mounted app)
    with pytest.raises(leaseq.InvalidArgument):
        client_for(r, allowed_hosts=[])


def test_ids_that_need_quoting_work_everywhere(q: leaseq.Queue, r: Any) -> None:
    odd = "a/b?c#d&e%f+g'h\"i<j>"
    q.enqueue({"n": 1}, id=odd)
    q.enqueue({"n": 2}, id="plain")
    c = client_for(r, allow_actions=True)
    listing = c.get("/queues/emails").text
    links = re.findall(r'<td class="id"><a href="([^"]+)">', listing)
    assert len(links) == 2
    import html as html_lib

    page = c.get(html_lib.unescape(links[0]))
    assert page.status_code == 200 and "a/b?c#d&amp;e%f+g&#39;h&#34;i&lt;j&gt;" in page.text
    token = csrf_of(c)
    c.post(
        "/queues/emails/actions",
        data={"csrf": token, "action": "cancel", "id": odd, "confirmed": "yes"},
    )
    assert q.get(odd).state == "cancelled"  # type: ignore[union-attr]
    assert 'href="/queues/emails/jobs/' in c.get("/search?q=" + urllib_quote(odd)).text


def urllib_quote(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text, safe="")


def test_a_sharded_queue_shows_as_one(r: Any) -> None:
    sq = leaseq.ShardedQueue("big", shards=3, redis=r)
    ids = sq.enqueue_many([{"n": i} for i in range(30)])
    sq.shards[1].pause()
    c = client_for(r, allow_actions=True)
    html = c.get("/").text
    assert html.count('data-queue="big"') == 1
    assert re.search(r'data-count="pending">30<', html)
    assert re.search(r'data-queue="big">.*?badge paused', html, re.S)
    assert "1\u201330 of 30" in c.get("/queues/big").text
    assert c.get(f"/queues/big/jobs/{ids[7]}").status_code == 200
    token = csrf_of(c)
    c.post("/queues/big/actions", data={"csrf": token, "action": "resume"})
    assert not any(s.paused for s in sq.shard_stats())
    c.post(
        "/queues/big/actions",
        data={"csrf": token, "action": "delete", "id": ids[3], "confirmed": "yes"},
    )
    assert sq.get(ids[3]) is None and sq.stats().pending == 29


def test_run_a_scheduled_job_now(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"n": 1}, id="later", delay=3600)
    c = client_for(r, allow_actions=True)
    page = c.get("/queues/emails?state=scheduled").text
    assert 'data-action="run_now"' in page
    token = csrf_of(c)
    done = c.post(
        "/queues/emails/actions", data={"csrf": token, "action": "run_now", "id": "later"}
    )
    assert "moved to pending 1 of 1 job" in done.text
    assert q.get("later").state == "pending"  # type: ignore[union-attr]


# -- keys damaged by hand, ids of any shape --------------------------------------------


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


def test_edit_and_retry_a_dead_job_shows_the_diff_first(seeded: leaseq.Queue, r: Any) -> None:
    page = client_for(r).get("/queues/emails/jobs/m000").text
    assert "Edit and retry" not in page  # read-only: no form
    c = client_for(r, allow_actions=True)
    page = c.get("/queues/emails/jobs/m000").text
    assert "data-edit" in page and "u0@example.org" in page
    assert page.index("data-edit") < page.index("<h2>Row") < page.index("<h2>History")
    token = csrf_of(c)
    form = {
        "csrf": token,
        "action": "edit_retry",
        "id": "m000",
        "next": "/queues/emails/jobs/m000",
        "payload": '{"to": "fixed@example.org"}',
    }
    ask = c.post("/queues/emails/actions", data=form)
    assert (
        ask.status_code == 200 and "Retry job m000 of emails with the edited payload?" in ask.text
    )
    assert 'class="del">-  &#34;to&#34;: &#34;u0@example.org&#34;' in ask.text
    assert 'class="ins">+  &#34;to&#34;: &#34;fixed@example.org&#34;' in ask.text
    job = seeded.get("m000")
    assert job is not None and job.state is leaseq.State.DEAD  # nothing written yet
    done = c.post("/queues/emails/actions", data={**form, "confirmed": "yes"})
    assert "retried job m000 of emails with the edited payload" in done.text
    job = seeded.get("m000")
    assert job is not None and job.state is leaseq.State.PENDING
    assert job.payload == {"to": "fixed@example.org"}
    # Bad JSON, a job that is not dead, or no CSRF token: refused, nothing written.
    bad = c.post("/queues/emails/actions", data={**form, "payload": "{nope", "confirmed": "yes"})
    assert bad.status_code == 400 and "not JSON" in bad.text
    again = c.post("/queues/emails/actions", data={**form, "confirmed": "yes"})
    assert "retried 0" in again.text or "only dead jobs" in again.text
    forged = c.post("/queues/emails/actions", data={**form, "csrf": "x", "confirmed": "yes"})
    assert forged.status_code == 403
    assert seeded.get("m000").payload == {"to": "fixed@example.org"}  # type: ignore[union-attr]


def test_edit_and_retry_checks_a_typed_tasks_call(r: Any) -> None:
    from leaseq.work.tasks import tasks_by_queue

    q = leaseq.Queue("mail", redis=r)
    good = {"args": [{"to": "a@b.c"}, "2026-01-02T03:04:05Z"], "kwargs": {}}
    q.enqueue(good, id="s1", kind="send", max_attempts=1)
    q.fail(q.claim(), "boom", dead=True)
    c = client_for(r, allow_actions=True, tasks=tasks_by_queue(["tests.support.tasks"]))
    form = {
        "csrf": csrf_of(c),
        "action": "edit_retry",
        "id": "s1",
        "next": "/queues/mail/jobs/s1",
        "payload": '{"args": [{"to": 5}, "x"], "kwargs": {}}',
        "confirmed": "yes",
    }
    bad = c.post("/queues/mail/actions", data=form)
    assert bad.status_code == 400 and "task" in bad.text and "send" in bad.text
    assert q.get("s1").state is leaseq.State.DEAD and q.get("s1").payload == good


def test_a_running_job_can_be_cancelled_and_group_rates_are_shown(
    seeded: leaseq.Queue, r: Any
) -> None:
    seeded.set_limits(group_rate=10, group_per=2.0)
    seeded.set_group_limits("tenant-42", rate=50, per=1.0)
    lease = seeded.claim(ttl=60.0)
    assert lease is not None
    c = client_for(r, allow_actions=True)
    queue = c.get("/queues/emails?state=active").text
    assert "group rate 10 per 2 s" in queue and "group tenant-42: rate 50 per 1 s" in queue
    page = c.get(f"/queues/emails/jobs/{lease.id}").text
    assert 'data-action="cancel"' in page
    token = csrf_of(c)
    form = {"csrf": token, "action": "cancel", "id": lease.id}
    ask = c.post("/queues/emails/actions", data=form)
    assert "a running one loses its lease at once" in ask.text
    c.post("/queues/emails/actions", data={**form, "confirmed": "yes"})
    job = seeded.get(lease.id)
    assert job is not None and job.state is leaseq.State.CANCELLED
