"""The dashboard's workers: the count online on the overview and the workers page
(Starlette's TestClient), on fakeredis and a real server.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import leaseq
from tests.support.backends import Clock
from tests.support.web import client_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_overview_counts_workers_online_per_queue(q: leaseq.Queue, r: Any) -> None:
    q.enqueue({"n": 1})
    other = leaseq.Queue("reports", redis=r)
    other.enqueue({"n": 1})
    q.register_worker("w-1", ttl=30.0, concurrency=4)
    q.register_worker("w-2", ttl=30.0, concurrency=4)
    other.register_worker("w-3", ttl=30.0)
    html = client_for(r).get("/").text
    assert 'data-workers-online="3"' in html and "3 workers online" in html
    emails = html[html.index('data-queue="emails"') :]
    assert re.search(r'data-workers="2"', emails.split("</tr>")[0])
    live = client_for(r).get("/?partial=live").text  # the live fragment carries it too
    assert 'data-workers-online="3"' in live


def test_workers_page_lists_each_worker_and_drops_the_dead(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    q.enqueue({"n": 1})
    q.register_worker("host-a:1:abc", ttl=60.0, concurrency=8, done=41, running=2)
    q.register_worker("short-lived", ttl=clock.lease(2.0, 0.3))
    c = client_for(r)
    html = c.get("/workers").text
    assert 'data-worker="host-a:1:abc"' in html and 'data-worker="short-lived"' in html
    row = html[html.index('data-worker="host-a:1:abc"') :].split("</tr>")[0]
    assert ">41<" in row and ">8<" in row and ">2<" in row
    clock.advance(clock.lease(2.0, 0.3) + 0.05)
    html = c.get("/workers").text
    assert 'data-worker="short-lived"' not in html and 'data-worker="host-a:1:abc"' in html


def test_workers_page_says_how_long_ago_a_worker_was_seen_on_the_server_clock(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    q.enqueue({"n": 1})
    q.register_worker("quiet", ttl=60.0)
    waited = clock.lease(40.0, 1.2)
    clock.advance(waited)  # no refresh since: hung, or cut off
    html = client_for(r).get("/workers").text
    row = html[html.index('data-worker="quiet"') :].split("</tr>")[0]
    started, seen = re.findall(r'<td class="num" title="[^"]*">([^<]*)</td>', row)[-2:]
    for text in (started, seen):
        number, unit, ago = text.split()
        assert (unit, ago) == ("s", "ago") and int(number) >= int(waited), text


def test_workers_page_without_workers_says_so(r: Any) -> None:
    html = client_for(r).get("/workers").text
    assert "No workers online" in html


def test_overview_draws_the_history_charts_and_dead_letter_growth(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(6)])
    for _ in range(3):
        lease = q.claim(ttl=30.0)
        assert lease is not None
        q.complete(lease)
    lease = q.claim(ttl=30.0)
    assert lease is not None
    q.fail(lease, "boom", dead=True)
    html = client_for(r).get("/").text
    for chart in ("chart-hour", "chart-day"):
        svg = html[html.index(f'<svg id="{chart}"') :].split("</svg>")[0]
        assert 'data-series="enqueued" data-total="6"' in svg
        assert 'data-series="succeeded" data-total="3"' in svg
        assert 'data-series="dead" data-total="1"' in svg
    assert 'data-dead-hour="1" data-dead-day="1"' in html
    assert "<script" not in html.split("</head>")[1]  # drawn on the server, no script


def test_workers_page_names_every_queue_a_worker_serves(q: leaseq.Queue, r: Any) -> None:
    from leaseq.queue_set import QueueSet

    other = leaseq.Queue("reports", redis=r)
    for each in (q, other):
        each.enqueue({"n": 1})
    QueueSet([q, other], weights=[3, 1]).register_worker("multi", ttl=30.0)
    html = client_for(r).get("/workers").text
    rows = html.split('data-worker="multi"')[1:]
    assert len(rows) == 2 and all("of emails:3,reports:1" in row.split("</tr>")[0] for row in rows)
