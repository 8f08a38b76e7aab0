"""The dashboard shows fair groups: a job's group, the queue's limits."""

from __future__ import annotations

from typing import Any

import pytest

import leaseq
from tests.support.web import client_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_queue_page_shows_limits_and_job_page_the_group(q: leaseq.Queue, r: Any) -> None:
    q.set_limits(concurrency=5, group_concurrency=1)
    job_id, _ = q.enqueue_many(["x", "y"], group="tenant-7")
    assert q.claim(ttl=30.0) is not None and q.claim(ttl=30.0) is None
    c = client_for(r)
    page = c.get("/queues/emails?state=pending").text
    assert "concurrency 1/5 active" in page
    assert "group concurrency 1: 0 groups ready, 1 held at the limit" in page
    job = c.get(f"/queues/emails/jobs/{job_id}").text
    assert 'data-field="group"' in job and "tenant-7" in job
