"""Every page behind the navigation bar, over HTTP (Starlette's TestClient) on
fakeredis and a real server: the overview paged, filtered and sorted with
totals; workers with what each one runs (age, progress); schedules; limits and
per-group counts; the events page and its filters; the server page and its
eviction warning; kind, group and progress columns of a queue's list.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import leaseq
from tests.support.web import client_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PAGES = ("/", "/workers", "/schedules", "/limits", "/events", "/server")


def _rows(html: str, attr: str) -> list[str]:
    return re.findall(rf'<tr {attr}="([^"]*)"', html)


def test_every_page_has_the_navigation_bar_marking_where_you_are(q: leaseq.Queue, r: Any) -> None:
    job_id = q.enqueue({"x": 1})
    c = client_for(r)
    for path in (*PAGES, "/queues/emails", f"/queues/emails/jobs/{job_id}"):
        page = c.get(path)
        assert page.status_code == 200, path
        nav = re.search(r'<nav class="main" aria-label="dashboard">(.*?)</nav>', page.text, re.S)
        assert nav is not None, path
        links = re.findall(r'<a href="(/[^"]*)"', nav.group(1))
        assert links == list(PAGES)
        current = re.findall(r'href="(/[^"]*)" aria-current="page"', nav.group(1))
        assert current == [path if path in PAGES else "/"], path


def test_overview_pages_filters_and_sorts_thousands_of_queues(r: Any) -> None:
    for i in range(120):
        q = leaseq.Queue(f"tenant-{i:03d}", redis=r)
        q.enqueue_many([{"n": n} for n in range(i % 4 + 1)])
    sick = leaseq.Queue("tenant-079", redis=r)
    for lease in sick.claim_many(3, ttl=60.0):
        sick.fail(lease, "RuntimeError: down", dead=True)
    c = client_for(r)
    html = c.get("/").text
    assert _rows(html, "data-queue")[:2] == ["tenant-000", "tenant-001"]
    assert len(_rows(html, "data-queue")) == 50
    assert "all 120 queues" in html and "page 1 of 3" in html
    total_pending = sum(i % 4 + 1 for i in range(120)) - 3
    assert f">{total_pending}</td>" in html.split("data-totals")[1].split("</tr>")[0]
    html = c.get("/?sort=dead").text
    assert _rows(html, "data-queue")[0] == "tenant-079"
    html = c.get("/?filter=tenant-11").text
    assert _rows(html, "data-queue") == [f"tenant-11{i}" for i in range(10)]
    assert "10 of 120 queues match" in html
    html = c.get("/?page=3").text
    assert _rows(html, "data-queue")[-1] == "tenant-119" and "of the 20 queues shown" in html


def test_workers_page_shows_each_workers_current_jobs(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": n} for n in range(3)], kind="resize")
    leases = q.claim_many(3, ttl=60.0, worker="host-1:42:abc")
    q.register_worker("host-1:42:abc", ttl=60.0, concurrency=4, running=3)
    q.register_worker("host-2:43:def", ttl=60.0, concurrency=4)
    q.progress(leases[0], 0.25)
    q.progress(leases[1], {"done": 3, "total": 4})
    q.progress(leases[2], {"stage": "upload"})
    html = client_for(r).get("/workers").text
    busy = html.split('data-worker="host-1:42:abc"')[1].split("</tr>")[0]
    for lease in leases:
        assert lease.id in busy
    assert busy.count('<span class="kind">resize</span>') == 3
    assert 'value="25.0" max="100"' in busy and 'value="75.0" max="100"' in busy
    assert "upload" in busy
    idle = html.split('data-worker="host-2:43:def"')[1].split("</tr>")[0]
    assert "idle" in idle


def test_queue_list_has_kind_group_and_progress_columns(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"a": 1}, kind="thumbnail", group="tenant-7")
    lease = q.claim(ttl=60.0)
    assert lease is not None
    q.progress(lease, 0.5)
    c = client_for(r)
    html = c.get("/queues/emails?state=active").text
    assert "<th>kind</th>" in html and "<th>group</th>" in html
    assert ">thumbnail</td>" in html and ">tenant-7</td>" in html
    assert 'value="50.0" max="100"' in html
    assert "with the selected jobs" not in html  # nothing to do with active jobs but cancel
    plain = leaseq.Queue("plain", redis=r)
    plain.enqueue({})
    html = c.get("/queues/plain").text
    assert "<th>kind</th>" not in html and "<th>group</th>" not in html


def test_schedules_page_lists_every_queues_schedules(q: leaseq.Queue, r: Any) -> None:
    q.schedule("nightly-report", {"n": 1}, cron="0 3 * * *", tz="Europe/Berlin", kind="report")
    leaseq.Queue("billing", redis=r).schedule("sweep", {"n": 1}, every=300)
    html = client_for(r).get("/schedules").text
    assert sorted(_rows(html, "data-schedule")) == ["billing/sweep", "emails/nightly-report"]
    assert "cron 0 3 * * * (Europe/Berlin)" in html and "every 5 min" in html
    assert ">report</td>" in html and "never" in html


def test_schedules_page_shows_the_kind_of_the_jobs_a_schedule_makes(
    q: leaseq.Queue, r: Any
) -> None:
    q.schedule("digest", {"to": "ops@example.com"}, every=3600, kind="send_digest")
    # A payload field named "kind" is not the jobs' kind: a handler dict picks
    # by the kind= alone, and would refuse these jobs.
    q.schedule("legacy", {"kind": "report"}, every=3600)
    html = client_for(r).get("/schedules").text
    kind = {
        name: re.search(r'<td class="mono kind">([^<]*)</td>', row).group(1)  # type: ignore[union-attr]
        for name, row in re.findall(r'<tr data-schedule="emails/([^"]*)">(.*?)</tr>', html, re.S)
    }
    assert kind == {"digest": "send_digest", "legacy": ""}


def test_limits_page_shows_limits_and_per_group_counts(q: leaseq.Queue, r: Any) -> None:
    q.set_limits(concurrency=5, group_concurrency=1)
    q.enqueue_many(["a", "b", "c"], group="tenant-7")
    q.enqueue_many(["d"], group="tenant-9")
    assert q.claim(ttl=30.0) is not None and q.claim(ttl=30.0) is not None
    assert q.claim(ttl=30.0) is None  # tenant-7 at its group limit: held out
    c = client_for(r)
    html = c.get("/limits").text
    assert _rows(html, "data-limits") == ["emails"]
    assert "2 / 5" in html
    html = c.get("/limits?queue=emails").text
    groups = html.split("data-groups")[1]
    assert _rows(groups, "data-group") == ["tenant-7", "tenant-9"]
    seven = groups.split('data-group="tenant-7"')[1].split("</tr>")[0]
    assert re.findall(r'<td class="num">(\d+)</td>', seven) == ["2", "1"]
    assert "held" in seven


def test_limits_page_lists_every_queue_with_any_limit_and_the_group_rate(
    q: leaseq.Queue, r: Any
) -> None:
    # Each queue has one kind of limit only, and no job: nothing but the limit
    # can put it on the page.
    leaseq.Queue("conc", redis=r).set_limits(concurrency=3)
    leaseq.Queue("rated", redis=r).set_limits(rate=10, per=2.0)
    leaseq.Queue("grouped", redis=r).set_limits(group_concurrency=2)
    leaseq.Queue("group-rated", redis=r).set_limits(group_rate=7, group_per=3.0)
    leaseq.Queue("one-group", redis=r).set_group_limits("tenant-1", rate=5, per=1.0)
    leaseq.Queue("plain", redis=r).enqueue({})
    q.enqueue({})
    html = client_for(r).get("/limits").text
    assert _rows(html, "data-limits") == ["conc", "group-rated", "grouped", "one-group", "rated"]
    assert ">group rate · cost</th>" in html
    row = html.split('data-limits="group-rated"')[1].split("</tr>")[0]
    assert "7 per 3 s" in row
    own = html.split('data-limits="one-group"')[1].split("</tr>")[0]
    assert 'data-own-limits="1" title="tenant-1: rate 5 per 1 s"' in own


def test_limits_page_shows_the_cost_in_the_window_next_to_the_claims(
    q: leaseq.Queue, r: Any
) -> None:
    q.set_limits(rate=100, per=60.0, cost_rate=90000, cost_per=60.0)
    leaseq.Queue("tenants", redis=r).set_limits(group_cost_rate=5000, group_cost_per=60.0)
    q.enqueue_many(["a", "b"], cost=4000)
    q.complete(q.claim(ttl=30.0), cost=1500)  # settled: 1,500, not 4,000
    q.claim(ttl=30.0)
    html = client_for(r).get("/limits").text
    assert _rows(html, "data-limits") == ["emails", "tenants"]
    row = html.split('data-limits="emails"')[1].split("</tr>")[0]
    assert "2 / 100 per 60 s" in row
    assert "5500 / 90000 per 60 s" in row.split("data-cost>")[1].split("</td>")[0]
    tenants = html.split('data-limits="tenants"')[1].split("</tr>")[0]
    assert "cost 5000 per 60 s" in tenants.split("data-group-rate>")[1].split("</td>")[0]


def test_the_dead_tab_counts_jobs_that_missed_their_deadline(
    q: leaseq.Queue, r: Any, clock: Any
) -> None:
    q.enqueue_many(["a", "b"], expires=clock.lease(5.0, 0.05))
    clock.advance(clock.lease(5.0, 0.05) * 1.1)
    q.reap()
    html = client_for(r).get("/queues/emails?state=dead").text
    said = html.split("data-past-deadline>")[1].split("</span>")[0]
    assert "never started by their deadline (expires=): 2 since the queue began" in said


def test_events_page_lists_newest_first_and_filters(q: leaseq.Queue, r: Any) -> None:
    ids = q.enqueue_many([{"n": n} for n in range(25)])
    lease = q.claim(ttl=60.0)
    assert lease is not None
    q.complete(lease)
    c = client_for(r)
    html = c.get("/events?queue=emails").text
    moves = re.findall(r'<td class="mono">(\w+) → <span class="st-\w+">(\w+)</span>', html)
    assert moves[:2] == [("active", "succeeded"), ("pending", "active")]
    assert len(moves) == 27
    html = c.get(f"/events?queue=emails&job={ids[3]}").text
    assert re.findall(r'jobs/(\w+)">', html) == [ids[3]]
    html = c.get("/events?queue=emails&state=succeeded").text
    assert re.findall(r'jobs/(\w+)">', html) == [lease.id]
    resize = q.enqueue({"n": 99}, kind="resize")
    html = c.get("/events?queue=emails&kind=resize").text
    assert re.findall(r'jobs/(\w+)">', html) == [resize] and ">resize</td>" in html
    q.set_events(False)
    assert "Events are off for emails" in c.get("/events?queue=emails").text


def test_events_page_opens_on_the_queue_where_something_happened_last(r: Any) -> None:
    first, last = (leaseq.Queue(name, redis=r) for name in ("aaa", "zzz"))
    first.enqueue({"n": 1})
    last.enqueue({"n": 2})
    first.enqueue({"n": 3})  # the newest event is aaa's
    c = client_for(r)
    arrows = r'<td class="mono">(\w+) → '
    assert len(re.findall(arrows, c.get("/events").text)) == 2  # aaa's two enqueues
    lease = last.claim(ttl=30.0)
    assert lease is not None
    last.complete(lease)  # now zzz's
    html = c.get("/events").text
    moves = re.findall(r'<td class="mono">(\w+) → <span class="st-\w+">(\w+)</span>', html)
    assert moves[:2] == [("active", "succeeded"), ("pending", "active")]  # zzz's, not aaa's
    assert len(moves) == 3
    html = c.get("/events?queue=aaa").text  # one asked for is one shown
    assert len(re.findall(arrows, html)) == 2


def test_events_page_points_to_the_job_page_when_the_window_has_passed_the_job(
    q: leaseq.Queue, r: Any
) -> None:
    q.set_events(True, maxlen=10)
    q.enqueue("old", id="old")
    for i in range(300):  # single calls, one entry each: MAXLEN ~ trims whole nodes
        q.enqueue(i)
    html = client_for(r).get("/events?queue=emails&job=old").text
    assert "No matching transition" in html
    assert """<a href="/queues/emails/jobs/old">the job's page</a>""" in html


def test_server_page_warns_when_the_policy_can_evict_job_rows(rr: Any) -> None:
    c = client_for(rr)
    old = rr.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        rr.config_set("maxmemory-policy", "noeviction")
        html = c.get("/server").text
        assert "data-eviction-warning" not in html and "noeviction" in html
        assert re.search(r"Redis \d+\.\d+", html) and "connected" in html
        assert "per second" in html and "AOF" in html and "RDB last saved" in html
        rr.config_set("maxmemory-policy", "allkeys-lru")
        html = c.get("/server").text
        assert "data-eviction-warning" in html and "allkeys-lru" in html
    finally:
        rr.config_set("maxmemory-policy", old)


def test_a_schedule_runs_now_from_its_page_when_actions_are_allowed(
    q: leaseq.Queue, r: Any
) -> None:
    q.schedule("nightly-report", {"kind": "report"}, cron="0 3 * * *", max_attempts=7)
    assert 'data-action="fire"' not in client_for(r).get("/schedules").text  # read-only
    c = client_for(r, allow_actions=True)
    assert 'data-action="fire"' in c.get("/schedules").text
    token = c.cookies.get("leaseq_csrf")
    form = {"csrf": token, "action": "fire", "id": "nightly-report", "next": "/schedules"}
    page = c.post("/queues/emails/actions", data=form)
    assert page.status_code == 200 and "enqueued job" in page.text
    (job,) = q.ls("pending")
    assert job.payload == {"kind": "report"} and job.max_attempts == 7
    (s,) = q.schedules()
    assert s.fired == 0  # its timetable is left alone
    form["id"] = "nope"
    assert "no schedule named" in c.post("/queues/emails/actions", data=form).text
