"""What a worker process tells its probes: is it alive, is it ready.

The workers of this process (``leaseq.work.engine``), its outage log
(``leaseq.work.outage``) and a supervisor (``leaseq.supervisor``) write into
the one ``HEALTH`` as things change (a start, a stop, an outage's first
failure and its end, a stuck handler): never per job. ``leaseq worker
--metrics-port`` serves it as ``/healthz`` and ``/readyz``
(``leaseq.observe.endpoint``; docs/deploy.md says what a probe should do
with each).

- **live**: nothing a restart would cure. A handler thread that runs on after
  its job was given up (past its timeout, cancelled, or handed back at a stop)
  cannot be killed from inside the process, so it is the one thing that makes
  a worker not live; a supervisor kills such a child itself.
- **ready**: a worker runs (or every child of a supervisor does) and Redis
  answers its calls.

No dependency: the worker imports it whether or not prometheus-client is
installed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["GIVEN_UP", "HEALTH", "Health", "Verdict", "stuck_text"]

GIVEN_UP = {
    "timeout": "past its timeout",
    "cancelled": "cancelled while it ran",
    "stop": "handed back at a stop",
}
"""Why a worker gave up on a handler that still runs, in words, by the key its
``Timeouts`` records (``leaseq.work.timeouts``)."""


def stuck_text(why: Mapping[str, int]) -> str:
    """``2 handler(s) still running after their job was given up (1 past its
    timeout, 1 cancelled while it ran)``: what the worker's log line and the
    liveness verdict say, the count of each reason in ``GIVEN_UP``'s order."""
    parts = [f"{why[key]} {text}" for key, text in GIVEN_UP.items() if why.get(key)]
    total = sum(why.values())
    return f"{total} handler(s) still running after their job was given up ({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class Verdict:
    """A probe's answer: ``ok``, and in words why (``reason``)."""

    ok: bool
    reason: str


class Health:
    """The health of this process's workers. Safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[int] = set()  # the ids of the workers running now
        self._outages: dict[int, float] = {}  # an outage log's id -> since (monotonic)
        self._stuck: dict[int, Mapping[str, int]] = {}  # a Timeouts' id -> stuck threads by why
        self._children: tuple[int, int] | None = None  # a supervisor's (alive, wanted)

    def running(self, worker: object) -> None:
        with self._lock:
            self._running.add(id(worker))

    def stopped(self, worker: object) -> None:
        with self._lock:
            self._running.discard(id(worker))

    def outage(self, log: object, since: float | None) -> None:
        """An outage log began failing at ``since`` (monotonic), or ended (None)."""
        with self._lock:
            if since is None:
                self._outages.pop(id(log), None)
            else:
                self._outages[id(log)] = since

    def stuck(self, timeouts: object, why: Mapping[str, int]) -> None:
        """A worker's handler threads that run on after their job was given up,
        counted by why (a key of ``GIVEN_UP``), as its ``Timeouts`` counts them
        (they outlive a stop: still counted)."""
        with self._lock:
            if sum(why.values()):
                self._stuck[id(timeouts)] = dict(why)
            else:
                self._stuck.pop(id(timeouts), None)

    def children(self, alive: int, wanted: int) -> None:
        with self._lock:
            self._children = (alive, wanted)

    @property
    def supervising(self) -> bool:
        """A supervisor's: its workers run in children, whose outages it does not
        hear of (the endpoint then asks Redis itself for readiness)."""
        return self._children is not None

    def live(self) -> Verdict:
        why: Counter[str] = Counter()
        with self._lock:
            for each in self._stuck.values():
                why.update(each)
        if why:
            return Verdict(False, stuck_text(why))
        return Verdict(True, "ok")

    def ready(self) -> Verdict:
        with self._lock:
            running, children = len(self._running), self._children
            since = min(self._outages.values(), default=None)
        if since is not None:
            return Verdict(False, f"Redis unavailable for {time.monotonic() - since:.1f}s")
        if children is not None:
            alive, wanted = children
            if alive < wanted:
                return Verdict(False, f"{alive} of {wanted} worker processes running")
            return Verdict(True, f"{alive} worker processes running")
        if not running:
            return Verdict(False, "no worker running")
        return Verdict(True, f"{running} worker(s) running")


HEALTH = Health()
"""The process's one ``Health``."""
