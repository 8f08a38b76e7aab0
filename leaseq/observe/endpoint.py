"""A worker's HTTP endpoint (``leaseq worker --metrics-port``): what Prometheus,
Kubernetes' probes and KEDA read from a worker pod.

- ``/metrics``: the queue's figures and this worker's (Prometheus text);
- ``/healthz``: liveness, ``/readyz``: readiness (``leaseq.observe.health``),
  200 or 503 with ``{"ok": ..., "reason": ...}``;
- ``/scale``: the queue's backlog as JSON, for KEDA's ``metrics-api`` scaler
  (``leaseq web`` serves the same at ``/api/scale/<queue>``, which also
  answers while no worker runs: docs/deploy.md).

Standard library only (the metrics text is made by the caller), one daemon
thread per request; every answer is computed when asked.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from leaseq.observe.health import HEALTH, Verdict
from leaseq.types import Stats

__all__ = ["scale_doc", "serve"]

logger = logging.getLogger("leaseq.metrics")


def scale_doc(*stats: Stats) -> dict[str, Any]:
    """What an autoscaler reads of a worker's queues (the JSON of ``/scale``):
    ``demand`` is what to scale on, the jobs that need a worker now — those
    running (a worker stopped under them hands them back) plus those that
    could start (none while paused: a worker could claim none of them);
    ``backlog`` the jobs that could run now, paused or not (docs/deploy.md)."""
    return {
        "queue": ",".join(s.queue for s in stats),
        "demand": sum(s.active + (0 if s.paused else s.backlog) for s in stats),
        "backlog": sum(s.backlog for s in stats),
        "in_flight": sum(s.active for s in stats),
        "oldest_ready_age": max((s.oldest_pending_age or 0.0 for s in stats), default=0.0),
        "paused": all(s.paused for s in stats),
    }


Answer = tuple[int, str, bytes]
"""An HTTP answer: status, content type, body."""


class Routes:
    """What each path answers, computed when asked."""

    def __init__(
        self, metrics: tuple[str, Callable[[], bytes]], stats: Callable[[], list[Stats]]
    ) -> None:
        self.metrics, self.stats = metrics, stats
        self.paths: dict[str, Callable[[], Answer]] = {
            "/metrics": lambda: (200, metrics[0], metrics[1]()),
            "/healthz": lambda: self.probe(HEALTH.live()),
            "/readyz": self.ready,
            "/scale": self.scale,
        }

    @staticmethod
    def probe(verdict: Verdict) -> Answer:
        body = json.dumps({"ok": verdict.ok, "reason": verdict.reason}).encode()
        return (200 if verdict.ok else 503), "application/json", body

    def ready(self) -> Answer:
        verdict = HEALTH.ready()
        if verdict.ok and HEALTH.supervising:
            try:
                self.stats()
            except Exception as exc:
                verdict = Verdict(False, f"Redis unavailable: {exc}")
        return self.probe(verdict)

    def scale(self) -> Answer:
        try:
            body = json.dumps(scale_doc(*self.stats()))
        except Exception as exc:  # Redis down: the scaler keeps its last figure
            logger.debug("scale: cannot read stats: %s", exc)
            return 503, "application/json", json.dumps({"error": str(exc)}).encode()
        return 200, "application/json", body.encode()

    def answer(self, path: str) -> Answer:
        route = self.paths.get(path.split("?", 1)[0])
        return (404, "text/plain", b"not found\n") if route is None else route()


class _Handler(BaseHTTPRequestHandler):
    routes: Routes

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, with_body: bool) -> None:
        status, kind, body = self.routes.answer(self.path)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # probes every few seconds: no line each


def serve(
    host: str,
    port: int,
    metrics: tuple[str, Callable[[], bytes]],
    stats: Callable[[], list[Stats]],
) -> ThreadingHTTPServer:
    """Serve the endpoint on ``host:port`` (IPv4 or IPv6) in a daemon thread;
    return the server (``shutdown()`` stops it). ``metrics``: the content type
    and the maker of the ``/metrics`` text; ``stats``: the worker's queues'
    stats, read per ``/scale`` (and per ``/readyz`` under a supervisor, whose
    children's outages it does not hear of). Raises OSError when the address
    cannot be bound."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
    handler = type("Handler", (_Handler,), {"routes": Routes(metrics, stats)})
    server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family})
    server: ThreadingHTTPServer = server_class((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="leaseq-endpoint", daemon=True).start()
    return server
