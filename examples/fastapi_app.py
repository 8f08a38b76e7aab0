"""leaseq in a FastAPI app: a typed task, a request that enqueues it, one that
waits for its result with a timeout, and the dashboard under /ops/jobs.

Run it (a Redis on localhost, or set LEASEQ_URL):

    pip install 'leaseq[web]' fastapi uvicorn
    LEASEQ_DASHBOARD_AUTH=ops:s3cret uvicorn fastapi_app:app     # the web app
    leaseq worker reports fastapi_app                            # its worker(s)

    curl -X POST localhost:8000/reports -H 'content-type: application/json' \\
         -d '{"customer": "acme", "month": "2026-11-01"}'        # -> {"job_id": ...}
    curl 'localhost:8000/reports/JOB_ID?wait=5'                   # -> the report
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel

import leaseq
import leaseq.aio
from leaseq.web import create_app

URL = os.environ.get("LEASEQ_URL", "redis://localhost:6379/0")

# The producer: an asyncio queue (its client connects on first use, inside the
# app's event loop; the lifespan below checks it and closes it).
reports = leaseq.aio.Queue.from_url(URL, "reports", max_attempts=3)


class Report(msgspec.Struct, frozen=True):
    customer: str
    month: dt.date
    total_cents: int


@reports.task(name="reports.render", timeout=60.0)
async def render_report(customer: str, month: dt.date) -> Report:
    """The work itself (a worker runs it: ``leaseq worker reports fastapi_app``)."""
    return Report(customer=customer, month=month, total_cents=len(customer) * 1000 + month.month)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await reports.stats()  # fail at startup, not at the first request, if Redis is away
    yield
    await reports.close()


app = FastAPI(lifespan=lifespan)

# The dashboard, behind HTTP basic auth (read-only unless allow_actions=True).
if os.environ.get("LEASEQ_DASHBOARD_AUTH"):
    app.mount("/ops/jobs", create_app(URL, auth=os.environ["LEASEQ_DASHBOARD_AUTH"]))


class ReportRequest(BaseModel):
    customer: str
    month: dt.date


@app.post("/reports", status_code=202)
async def request_report(body: ReportRequest) -> dict[str, str]:
    try:
        job_id = await render_report.enqueue(body.customer, body.month)
    except leaseq.InvalidArgument as exc:  # arguments that do not fit: nothing was written
        raise HTTPException(422, str(exc)) from None
    return {"job_id": job_id}


@app.get("/reports/{job_id}")
async def get_report(job_id: str, wait: float = 0.0) -> object:
    """The report, waiting up to ``wait`` seconds (at most 30) for it."""
    try:
        report: Report = await render_report.wait(job_id, timeout=min(max(wait, 0.0), 30.0))
    except leaseq.WaitTimeout:
        return JSONResponse({"job_id": job_id, "status": "not ready"}, status_code=202)
    except leaseq.TaskFailed as exc:
        return JSONResponse({"job_id": job_id, "status": exc.state}, status_code=500)
    except (leaseq.JobNotFound, leaseq.InvalidArgument):
        raise HTTPException(404, f"no report job {job_id!r}") from None
    return msgspec.to_builtins(report)
