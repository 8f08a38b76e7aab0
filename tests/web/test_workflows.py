"""The dashboard's view of workflows: the waiting tab, a job's parents and children."""

from __future__ import annotations

from typing import Any

import leaseq
from tests.support.web import client_for


def test_waiting_jobs_have_a_tab_and_a_job_links_its_parents_and_children(
    q: leaseq.Queue, r: Any
) -> None:
    q.enqueue("fetch", id="fetch-1")
    q.enqueue("album", id="album-7", depends_on=["fetch-1"])
    q.enqueue("notify", id="notify-7", depends_on=["album-7"], on_parent_failure="run")
    c = client_for(r)
    overview = c.get("/").text
    assert "waiting" in overview
    tab = c.get("/queues/emails?state=waiting").text
    assert "parents left" in tab and "album-7" in tab and "notify-7" in tab
    page = c.get("/queues/emails/jobs/album-7").text
    assert "Workflow" in page and "waiting for 1 of 1 parents" in page
    assert 'href="/queues/emails/jobs/fetch-1"' in page  # its parent, linked
    assert 'href="/queues/emails/jobs/notify-7"' in page  # its child, linked
    assert "kept for 1 unfinished children" in page
    plain = c.get("/queues/emails/jobs/fetch-1").text
    assert 'href="/queues/emails/jobs/album-7"' in plain
    metrics = c.get("/metrics").text
    assert 'leaseq_jobs{queue="emails",state="waiting"} 2.0' in metrics
