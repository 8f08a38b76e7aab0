"""What tracing costs: enqueue, enqueue_many and a worker drain, with opentelemetry
absent, installed with no current span, and inside a recording span (the SDK with
no exporter, so the figure is leaseq's and the SDK's span work, not an export).

    python -m bench.tracing [--jobs N]

Needs opentelemetry-sdk (the test extra). One throwaway redis-server; the cases
take turns (bench.timing.interleaved) and each prints its median.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import leaseq
from bench.server import Server
from bench.timing import Case, interleaved, rate, us
from leaseq.observe import tracing


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """absent: leaseq sees no opentelemetry; idle: no current span; span: inside one."""
    saved = tracing._otel
    if name == "absent":
        tracing._otel = False
    try:
        if name == "span":
            with trace.get_tracer("bench").start_as_current_span("bench"):
                yield
        else:
            yield
    finally:
        tracing._otel = saved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.jobs
    trace.set_tracer_provider(TracerProvider())  # records spans, exports none
    modes = ("absent", "idle", "span")
    with Server() as server:
        client = server.client()
        q = leaseq.Queue("bench", redis=client, keep_succeeded_count=0)
        q.enqueue({})  # load the scripts, import opentelemetry once
        tracing.available()

        def flush() -> None:
            client.flushall()

        def singles(m: str) -> Callable[[], float]:
            def trial() -> float:
                with mode(m):
                    return rate(n, lambda: [q.enqueue({"i": i}) for i in range(n)])

            return trial

        def batch(m: str) -> Callable[[], float]:
            payloads = [{"i": i} for i in range(n * 5)]

            def trial() -> float:
                with mode(m):
                    return rate(len(payloads), lambda: q.enqueue_many(payloads))

            return trial

        def drain(m: str) -> Case:
            def setup() -> None:
                flush()
                with mode(m):  # the rows carry a traceparent only when enqueued in a span
                    q.enqueue_many([{"i": i} for i in range(n)])

            def trial() -> float:
                with mode("absent" if m == "absent" else "idle"):
                    worker = leaseq.Worker(q, lambda lease: None, handle_signals=False)
                return rate(n, lambda: worker.run(burst=True))

            return setup, trial

        cases: dict[str, Case] = {}
        for m in modes:
            cases[f"enqueue, {m}"] = (flush, singles(m))
        for m in modes:
            cases[f"enqueue_many, {m}"] = (flush, batch(m))
        for m in modes:
            cases[f"worker drain, {m}"] = drain(m)
        got = interleaved(cases, repeats=args.repeats)
    width = max(map(len, got))
    for name, per_s in got.items():
        print(f"{name:<{width}}  {per_s:>10,.0f} jobs/s  {us(per_s):8.1f} µs/job")


if __name__ == "__main__":
    main()
