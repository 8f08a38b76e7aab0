"""The processing-list design that leaseq is measured against.

A job is its JSON payload in a list. Enqueue is ``LPUSH pending``; a claim
is ``LMOVE pending processing RIGHT LEFT`` (the reliable-queue pattern of
the Redis docs, used by rq, huey-style and many home-grown queues); a
completion is ``LREM processing 1 <payload>``, which scans ``processing``
from its head until it finds the job. This is the best case of that
design: no job hash, no lease deadline, no fencing, no heartbeats.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

PENDING = "baseline:pending"
PROCESSING = "baseline:processing"
_encode = msgspec.json.Encoder().encode


def payload(n: int) -> bytes:
    return _encode({"i": n})


def enqueue(r: Any, n: int) -> None:
    """``LPUSH`` one job at a time, one round trip each."""
    for i in range(n):
        r.lpush(PENDING, payload(i))


def enqueue_bulk(r: Any, n: int, start: int = 0, chunk: int = 1000) -> None:
    """``LPUSH`` with up to ``chunk`` jobs per call (the bulk path)."""
    for lo in range(start, start + n, chunk):
        r.lpush(PENDING, *[payload(i) for i in range(lo, min(lo + chunk, start + n))])


def claim(r: Any) -> bytes | None:
    job: bytes | None = r.lmove(PENDING, PROCESSING, "RIGHT", "LEFT")
    return job


def complete(r: Any, job: bytes) -> None:
    r.lrem(PROCESSING, 1, job)


def batch_cycle(r: Any, batch: int) -> int:
    """Claim up to ``batch`` jobs and complete them, two pipelined round trips."""
    pipe = r.pipeline(transaction=False)
    for _ in range(batch):
        pipe.lmove(PENDING, PROCESSING, "RIGHT", "LEFT")
    jobs = [j for j in pipe.execute() if j is not None]
    for job in jobs:
        pipe.lrem(PROCESSING, 1, job)
    pipe.execute()
    return len(jobs)


class Steady:
    """``k`` jobs stay in flight: each step claims one job and completes the
    oldest one in flight (FIFO, as ``k`` equal workers would), so every
    ``LREM`` walks past the ``k`` newer jobs at the head of the list."""

    def __init__(self, r: Any) -> None:
        self.r = r
        self.held: deque[bytes] = deque()

    def hold(self, in_flight: int) -> None:
        """Claim (pipelined) until ``in_flight`` jobs are held."""
        pipe = self.r.pipeline(transaction=False)
        while len(self.held) < in_flight:
            for _ in range(min(1000, in_flight - len(self.held))):
                pipe.lmove(PENDING, PROCESSING, "RIGHT", "LEFT")
            got = [j for j in pipe.execute() if j is not None]
            if not got:
                raise RuntimeError("baseline ran out of pending jobs")
            self.held.extend(got)

    def step(self) -> None:
        job = claim(self.r)
        if job is None:
            raise RuntimeError("baseline ran out of pending jobs")
        self.held.append(job)
        complete(self.r, self.held.popleft())
