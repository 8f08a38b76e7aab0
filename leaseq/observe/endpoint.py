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
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from leaseq.observe.health import HEALTH, Verdict
from leaseq.types import Stats

__all__ = ["scale_doc", "serve"]

logger = logging.getLogger("leaseq.metrics")


def scale_doc(stats: Stats) -> dict[str, Any]:
    """What an autoscaler reads of one queue (the JSON of ``/scale``)."""
    return {
        "queue": stats.queue,
        "backlog": stats.backlog,
        "in_flight": stats.active,
        "oldest_ready_age": stats.oldest_pending_age or 0.0,
        "paused": stats.paused,
    }


def serve(
    host: str,
    port: int,
    metrics: tuple[str, Callable[[], bytes]],
    stats: Callable[[], Stats],
) -> ThreadingHTTPServer:
    """Serve the endpoint on ``host:port`` in a daemon thread; return the server
    (``shutdown()`` stops it). ``metrics``: the content type and the maker of
    the ``/metrics`` text; ``stats``: the queue's stats, read per ``/scale``.
    Raises OSError when the address cannot be bound."""

    def probe(verdict: Verdict) -> tuple[int, str, bytes]:
        body = json.dumps({"ok": verdict.ok, "reason": verdict.reason}).encode()
        return (200 if verdict.ok else 503), "application/json", body

    def scale() -> tuple[int, str, bytes]:
        try:
            body = json.dumps(scale_doc(stats()))
        except Exception as exc:  # Redis down: the scaler keeps its last figure
            logger.warning("scale: cannot read stats: %s", exc)
            return 503, "application/json", json.dumps({"error": str(exc)}).encode()
        return 200, "application/json", body.encode()

    routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
        "/metrics": lambda: (200, metrics[0], metrics[1]()),
        "/healthz": lambda: probe(HEALTH.live()),
        "/readyz": lambda: probe(HEALTH.ready()),
        "/scale": scale,
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                status, kind, body = 404, "text/plain", b"not found\n"
            else:
                status, kind, body = route()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds: no line each

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="leaseq-endpoint", daemon=True).start()
    return server
