"""A queue page's filter (kind, age, text) and bulk actions over its matches,
over HTTP (Starlette's TestClient): the filter lives in the URL, pages go on
by a cursor and say how much of the index they looked at; a bulk action asks
first with the count of matches ("at least N" when its count stopped short),
then acts in time-bounded pages, and repeating it changes nothing. The big
cases run on the real server with 12,000 dead jobs, with the slow log
watching that every call stayed short.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

import leaseq
from leaseq.store.leases import fail_call
from leaseq.transport.drive import call_many
from leaseq.web import bulk, filtered
from tests.support.backends import Clock
from tests.support.web import client_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BIG = 12_000
SMS_EVERY = 40  # one job in 40 is of kind "sms": 300 of them


def ids_of(page: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', page)


def link(page: str, rel: str) -> str:
    found = re.search(rf'href="([^"]+)" rel="{rel}"', page)
    return html.unescape(found.group(1)) if found else ""


def matches_line(page: str) -> str:
    found = re.search(r"data-matches>(.*?)</p>", page, re.S)
    assert found, "no matches line"
    return " ".join(html.unescape(found.group(1)).split())


def csrf_of(c: Any) -> str:
    c.get("/")
    return str(c.cookies.get("leaseq_csrf"))


def fill_dead(q: leaseq.Queue, n: int = BIG) -> None:
    """``n`` dead jobs job-00000.. (their failures pipelined 1,000 at a time); one in
    SMS_EVERY of kind "sms", the rest "mail"; each error names its address."""
    for start in range(0, n, 1000):
        batch = range(start, min(n, start + 1000))
        for kind in ("mail", "sms"):
            mine = [i for i in batch if (i % SMS_EVERY == 0) == (kind == "sms")]
            q.enqueue_many(
                [{"to": f"user{i}@example.org", "n": i} for i in mine],
                ids=[f"job-{i:05d}" for i in mine],
                kind=kind,
                max_attempts=1,
            )
        leases: list[leaseq.Lease] = []
        while len(leases) < len(batch):
            leases += q.claim_many(1000, ttl=60.0)
        error = "SMTPError: 550 {}"
        calls = [fail_call(q._core, x, error.format(x.payload["to"]), None, True) for x in leases]
        assert not [got for got in call_many(q.redis, calls) if isinstance(got, Exception)]
    assert q.stats().dead == n


def slow_calls(r: Any) -> list[int]:
    """Microseconds of every call in the slow log since ``watch``; stops watching."""
    got = [e["duration"] for e in r.slowlog_get(100_000)]
    r.config_set("slowlog-log-slower-than", 10000)
    r.config_set("slowlog-max-len", 128)
    return got


def watch(r: Any) -> None:
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 100_000)
    r.slowlog_reset()


def test_a_filter_over_12_000_dead_jobs_pages_by_cursor_in_short_calls(rr: Any) -> None:
    q = leaseq.Queue("big", redis=rr)
    fill_dead(q)
    sms = {f"job-{i:05d}" for i in range(0, BIG, SMS_EVERY)}
    c = client_for(rr)
    watch(rr)
    page = c.get("/queues/big?state=dead&kind=sms&size=50").text
    first = ids_of(page)
    assert len(first) == 50 and set(first) <= sms
    assert "matches 1\u201350" in page and 'value="sms"' in page  # the form shows the filter
    # Each page says how far into the index it looked, and goes on by a cursor.
    seen = list(first)
    ranges = []
    while link(page, "next"):
        page = c.get(link(page, "next")).text
        seen += ids_of(page)
        ranges += re.findall(r'class="range">matches ([\d,]+\u2013[\d,]+)<', page)
        assert len(seen) <= len(sms), "a page came twice"
    assert sorted(seen) == sorted(sms) and "looked at 12,000 of 12,000" in page
    assert ranges[-1] == "251\u2013300" and link(page, "first")  # and back to the start
    # A rare match: each page stops at its budget, says so, and offers to go on.
    rare = c.get("/queues/big?state=dead&text=USER11999@EXAMPLE").text
    assert ids_of(rare) == [] and "no match so far" in matches_line(rare)
    assert f"looked at {filtered.FILTER_BUDGET:,} of 12,000" in rare
    further, pages = rare, 1
    while not ids_of(further):
        assert "look further" in further and pages < BIG // filtered.FILTER_BUDGET + 1
        further, pages = c.get(link(further, "next")).text, pages + 1
    assert ids_of(further) == ["job-11999"] and "looked at 12,000 of 12,000" in further
    # An age on the dead index's own time reads only that score range.
    none = c.get("/queues/big?state=dead&older=1h").text
    assert "no match; looked at 0 of 0 in the time range" in matches_line(none)
    calls = slow_calls(rr)
    # Short calls, many of them: ZRANGEBYSCORE of 500 entries, pipelines of 500
    # HGETALLs. The bound catches a call that stopped being bounded (one
    # HGETALL of every row took ~300 ms), not a busy machine's context switch.
    assert len(calls) >= BIG and max(calls) < 25_000, sorted(calls)[-5:]


def test_bulk_actions_over_a_filter_of_12_000_dead_jobs(
    rr: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = leaseq.Queue("big", redis=rr)
    fill_dead(q)
    # The count before the question stops at COUNT_SECONDS ("at least N"): on a
    # loaded CI box 12,000 rows can take longer, and the exact count is what this checks.
    monkeypatch.setattr(bulk, "COUNT_SECONDS", 60.0)
    c = client_for(rr, allow_actions=True)
    token = csrf_of(c)
    back = "/queues/big?state=dead&kind=sms"
    form = {"csrf": token, "scope": "matches", "state": "dead", "kind": "sms", "next": back}
    page = c.get(back).text
    assert "Retry every match" in page and "Delete every match" in page
    watch(rr)
    ask = c.post("/queues/big/actions", data={**form, "action": "retry"})
    assert 'Retry the 300 dead jobs of big (kind "sms")?' in html.unescape(ask.text)
    assert q.stats().dead == BIG  # asking changed nothing
    done = c.post("/queues/big/actions", data={**form, "action": "retry", "confirmed": "yes"})
    assert 'retried 300 dead jobs of big (kind "sms"): looked at 12,000' in html.unescape(done.text)
    s = q.stats()
    assert (s.dead, s.pending) == (BIG - 300, 300)
    assert all(j.kind == "sms" for j in q.ls("pending", limit=300))
    # The same POST again: nothing left to match, nothing changes.
    again = c.post("/queues/big/actions", data={**form, "action": "retry", "confirmed": "yes"})
    assert "retried 0 dead jobs" in again.text and q.stats().pending == 300
    assert max(slow_calls(rr)) < 25_000

    # Delete every "mail" job whose error names a user1...: 3,034 of them; one
    # chunk of work per request, so the run goes on through progress pages.
    monkeypatch.setattr(bulk, "RUN_SECONDS", 0.0)
    doomed = {j.id for j in q.ls("dead", limit=BIG) if "550 user1" in (j.last_error or "")}
    assert len(doomed) == 3034
    data = {**form, "kind": "mail", "text": "550 user1", "action": "delete", "confirmed": "yes"}
    pages = 0
    response = c.post("/queues/big/actions", data=data, follow_redirects=False)
    while response.status_code == 200:
        assert "data-continue" in response.text, response.text[-2000:]
        hidden = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', response.text))
        assert hidden["mark"] and int(hidden["done"]) <= len(doomed)
        pages += 1
        if pages == 3:  # a repeated request (a reload): harmless
            c.post("/queues/big/actions", data={k: html.unescape(v) for k, v in hidden.items()})
        response = c.post(
            "/queues/big/actions",
            data={k: html.unescape(v) for k, v in hidden.items()},
            follow_redirects=False,
        )
    assert response.status_code == 303 and pages >= 10
    left = {j.id for j in q.ls("dead", limit=BIG)}
    assert not (left & doomed) and len(left) == BIG - 300 - len(doomed)

    # A count that stops short says "at least".
    monkeypatch.setattr(bulk, "COUNT_ROWS", 1000)
    ask = c.post("/queues/big/actions", data={**form, "kind": "mail", "action": "delete"})
    assert "at least" in ask.text and "found in the first" in ask.text


def test_the_filter_is_in_the_url_and_carried_across_tabs(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"to": f"a{i}@x.org"} for i in range(8)], ids=[f"m{i}" for i in range(8)])
    q.enqueue_many([{"to": "b@y.org"}] * 2, ids=["s0", "s1"], kind="sms")
    for lease in q.claim_many(3):
        q.fail(lease, "SMTPError: 550 gone", dead=True)
    c = client_for(r)
    page = c.get("/queues/emails?state=pending&text=A5@X&size=20").text
    assert ids_of(page) == ["m5"] and 'value="A5@X"' in page
    assert matches_line(page) == (
        'Pending jobs (text "A5@X"): match 1; looked at 7 of 7, in index order, all of them.'
    )
    # The tabs keep the filter; a tab's own age choice is kept only where it applies.
    aged = c.get("/queues/emails?state=dead&kind=sms&age=finished&older=1s").text
    assert "state=pending&size=50&kind=sms&older=1s" in html.unescape(aged)
    assert "state=succeeded&size=50&kind=sms&older=1s&age=finished" in html.unescape(aged)
    assert '<option value="finished" selected>' in aged
    assert 'name="age"' not in c.get("/queues/emails?state=pending").text  # one time only
    # The live part of a filtered page leaves the list alone (no scan each refresh).
    live = c.get("/queues/emails?state=pending&text=a5&partial=live").text
    assert "nav" in live and "data-job" not in live
    for bad in ("older=10x", "newer=soon", "age=claimed", "after=zzz", "older=2h&newer=1h"):
        got = c.get(f"/queues/emails?state=pending&kind=x&{bad}")
        assert got.status_code == 400, bad
    clear = c.get("/queues/emails?state=pending&kind=sms").text
    assert 'class="clear"' in clear and ids_of(clear) == ["s0", "s1"]


def test_an_age_filter_counts_by_the_index_and_acts_on_its_matches(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    q.enqueue_many([{"n": i} for i in range(5)], ids=[f"old{i}" for i in range(5)])
    for lease in q.claim_many(5):
        q.fail(lease, "boom", dead=True)
    clock.advance(1.2)
    q.enqueue_many([{"n": i} for i in range(2)], ids=["new0", "new1"])
    for lease in q.claim_many(2):
        q.fail(lease, "boom", dead=True)
    c = client_for(r, allow_actions=True)
    page = c.get("/queues/emails?state=dead&older=1s").text
    assert sorted(ids_of(page)) == [f"old{i}" for i in range(5)]
    assert "(finished more than 1 s ago)" in matches_line(page)
    token = csrf_of(c)
    form = {"csrf": token, "scope": "matches", "state": "dead", "older": "1s", "action": "delete"}
    ask = c.post("/queues/emails/actions", data={**form, "next": "/queues/emails?state=dead"})
    assert "Delete the 5 dead jobs of emails (finished more than 1 s ago)?" in ask.text
    c.post("/queues/emails/actions", data={**form, "confirmed": "yes", "next": "/"})
    assert sorted(j.id for j in q.ls("dead")) == ["new0", "new1"]


def test_bulk_over_a_filter_needs_actions_allowed_a_token_and_a_filter(
    q: leaseq.Queue, r: Any
) -> None:
    q.enqueue_many([{"n": i} for i in range(3)], ids=["a", "b", "c"], kind="k")
    form = {"scope": "matches", "state": "pending", "kind": "k", "action": "delete"}
    read_only = client_for(r)
    page = read_only.get("/queues/emails?state=pending&kind=k").text
    assert "every match" not in page
    got = read_only.post("/queues/emails/actions", data={**form, "csrf": csrf_of(read_only)})
    assert got.status_code == 403
    c = client_for(r, allow_actions=True)
    assert c.post("/queues/emails/actions", data={**form, "confirmed": "yes"}).status_code == 403
    token = csrf_of(c)
    no_filter = {**form, "kind": "", "csrf": token, "confirmed": "yes"}
    assert c.post("/queues/emails/actions", data=no_filter).status_code == 400
    wrong = {**form, "action": "retry", "csrf": token, "confirmed": "yes"}
    assert c.post("/queues/emails/actions", data=wrong).status_code == 400  # not dead
    assert q.stats().pending == 3
    none = {**form, "kind": "other", "csrf": token, "next": "/queues/emails"}
    said = c.post("/queues/emails/actions", data=none)
    assert "nothing to do" in said.text and q.stats().pending == 3


def test_cancel_and_run_now_every_match(q: leaseq.Queue, r: Any) -> None:
    q.enqueue_many([{"n": i} for i in range(6)], ids=[f"p{i}" for i in range(6)], kind="a")
    q.enqueue_many([{"n": i} for i in range(4)], ids=[f"q{i}" for i in range(4)], kind="b")
    q.enqueue_many([{"n": i} for i in range(3)], ids=["s0", "s1", "s2"], kind="a", delay=600)
    q.enqueue({"n": 9}, id="s9", kind="b", delay=600)
    c = client_for(r, allow_actions=True)
    token = csrf_of(c)
    base = {"csrf": token, "scope": "matches", "kind": "a", "confirmed": "yes", "next": "/"}
    c.post("/queues/emails/actions", data={**base, "state": "pending", "action": "cancel"})
    c.post("/queues/emails/actions", data={**base, "state": "scheduled", "action": "run_now"})
    s = q.stats()
    assert (s.cancelled, s.scheduled) == (6, 1)
    assert sorted(j.id for j in q.ls("pending")) == ["q0", "q1", "q2", "q3", "s0", "s1", "s2"]
    assert [j.id for j in q.ls("scheduled")] == ["s9"]
