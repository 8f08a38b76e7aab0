"""What a worker process tells its probes: is it alive, is it ready.

The workers of this process (``leaseq.work.engine``), its outage log
(``leaseq.work.outage``) and a supervisor (``leaseq.supervisor``) write into
the one ``HEALTH`` as things change (a start, a stop, an outage's first
failure and its end, a stuck handler): never per job. ``leaseq worker
--metrics-port`` serves it as ``/healthz`` and ``/readyz``
(``leaseq.observe.endpoint``; docs/deploy.md says what a probe should do
with each).

- **live**: nothing a restart would cure. A handler thread stuck past its
  timeout cannot be killed from inside the process, so it is the one thing
  that makes a worker not live; a supervisor kills such a child itself.
- **ready**: a worker runs (or every child of a supervisor does) and Redis
  answers its calls.

No dependency: the worker imports it whether or not prometheus-client is
installed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

__all__ = ["HEALTH", "Health", "Verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A probe's answer: ``ok``, and in words why (``reason``)."""

    ok: bool
    reason: str


class Health:
    """The health of this process's workers. Safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, str] = {}  # a running worker's id -> its queue
        self._outages: dict[int, float] = {}  # an outage log's id -> since (monotonic)
        self._stuck: dict[int, int] = {}  # a worker's Timeouts' id -> stuck threads
        self._children: tuple[int, int] | None = None  # a supervisor's (alive, wanted)

    def running(self, worker: object, queue: str) -> None:
        with self._lock:
            self._running[id(worker)] = queue

    def stopped(self, worker: object) -> None:
        with self._lock:
            self._running.pop(id(worker), None)

    def outage(self, log: object, since: float | None) -> None:
        """An outage log began failing at ``since`` (monotonic), or ended (None)."""
        with self._lock:
            if since is None:
                self._outages.pop(id(log), None)
            else:
                self._outages[id(log)] = since

    def stuck(self, timeouts: object, count: int) -> None:
        """A worker's handler threads stuck past their timeout, as its
        ``Timeouts`` counts them (they outlive a stop: still counted)."""
        with self._lock:
            if count:
                self._stuck[id(timeouts)] = count
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
        with self._lock:
            stuck = sum(self._stuck.values())
        if stuck:
            return Verdict(False, f"{stuck} handler(s) stuck past their timeout")
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
