"""Small helpers shared by the core behaviour suite (no tests in here).

They read Redis directly, the way an operator with ``redis-cli`` would, so
the tests check what is stored, not only what the API answers. HUGE,
NEGATIVE and DIGITS are time fields no datetime holds, for damaging a row by
hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import leaseq


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def row(q: leaseq.Queue, job_id: str) -> dict[str, str]:
    """The job hash as ``HGETALL`` shows it, decoded."""
    raw = q.redis.hgetall(q.keys.job(job_id))
    return {text(k): text(v) for k, v in raw.items()}


def index(q: leaseq.Queue, state: str) -> dict[str, float]:
    """An index ZSET as {id: score}; for pending, the live entries of the ready
    LIST first (ungrouped jobs of priority 0, score -1: they run first), then the
    ZSET's. A ready entry whose row is no longer such a pending job is stale
    (docs/keys-and-rows.md#the-ready-list) and left out, as the claim drops it."""
    out: dict[str, float] = {}
    if state == "pending":
        ids = [text(k) for k in q.redis.lrange(q.keys.ready, 0, -1)]
        pipe = q.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(q.keys.job(job_id), "state", "group", "priority")
        for job_id, got in zip(ids, pipe.execute(raise_on_error=False), strict=True):
            listed = not isinstance(got, Exception) and got[0] == b"pending" and got[1] is None
            if listed and int(got[2] or 0) == 0:
                out.setdefault(job_id, -1.0)
    for k, s in q.redis.zrange(q.keys.index(state), 0, -1, withscores=True):
        out.setdefault(text(k), float(s))
    return out


def drive_pages(
    q: leaseq.Queue, run: Any, between: Callable[[int], object] | None = None
) -> tuple[list[Any], int]:
    """Drive a paged operator run by hand (``leaseq.store.paging``): its pages, and
    what it returned as done. ``between(n)`` runs after the n-th page, before the run
    is asked for the next (it may have none), as another client would between calls."""
    pages = [q._run(next(run))]
    try:
        while True:
            if between is not None:
                between(len(pages))
            pages.append(q._run(run.send(pages[-1])))
    except StopIteration as stop:
        return pages, int(stop.value.done)


def all_keys(r: Any) -> list[str]:
    return sorted(text(k) for k in r.keys("*"))


def a_budget_runs_out_in_a_script(r: Any) -> bool:
    """Can a call stop at its time budget (lua/lib/over_budget.lua)? Where TIME
    advances while one script runs (Redis), or where it stands still (Valkey 8,
    fakeredis under a frozen clock) but the sandbox keeps ``os.clock``, the
    server's CPU clock (lua/lib/elapsed_us.lua). Elsewhere the count bounds alone
    apply."""
    runs = r.eval(
        "local a = redis.call('TIME') local x = 0 "
        "for i = 1, 300000 do x = x + i end "
        "local b = redis.call('TIME') local os_lib = rawget(_G, 'os') "
        "return (a[1] ~= b[1] or a[2] ~= b[2] or (os_lib and os_lib.clock)) and 1 or 0",
        0,
    )
    return bool(runs)


def server_ms(r: Any) -> int:
    """The server's TIME in integer ms, as the scripts compute it."""
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def claim_one(q: leaseq.Queue, ttl: float = 30.0) -> leaseq.Lease:
    lease = q.claim(ttl=ttl)
    assert lease is not None, "expected a job to claim"
    return lease


def snapshot(r: Any) -> dict[str, Any]:
    """Every key with its type and full content: to prove a refused call changed nothing."""
    out: dict[str, Any] = {}
    for raw in r.keys("*"):
        key = text(raw)
        kind = text(r.type(key))
        if kind == "hash":
            value: Any = {text(k): text(v) for k, v in r.hgetall(key).items()}
        elif kind == "zset":
            value = [(text(m), s) for m, s in r.zrange(key, 0, -1, withscores=True)]
        elif kind == "list":
            value = [text(x) for x in r.lrange(key, 0, -1)]
        elif kind == "stream":  # the done stream (what wait reads)
            value = r.xrange(key)
        else:
            value = r.get(key)
        out[key] = (kind, value, r.pttl(key) > 0)
    return out


HUGE = "9" * 30  # ms epoch far past year 9999


NEGATIVE = "-99999999999999999"  # before year 1


DIGITS = "9" * 400  # more than a float holds
