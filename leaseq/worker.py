"""``leaseq.Worker``: runs a handler over one queue with leases, heartbeats and clean shutdown.

The threaded face of the one worker core, ``leaseq.work.engine`` (docs/workers.md,
"The worker loop"): everything it does is the core's; this module only names
it and takes a synchronous queue, or a list of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from leaseq.handler import Handlers
from leaseq.observe.observer import JobObserver
from leaseq.protocols import QueueLike
from leaseq.queue_set import queue_set
from leaseq.work.engine import Engine

__all__ = ["Worker"]


class Worker(Engine):
    """Run ``handler(lease)`` for the jobs of ``queue``, ``concurrency`` at a time.

    The return value completes the job (stored as its result); ``leaseq.Retry``
    retries it after a delay, ``leaseq.Dead`` dead-letters it, any other
    exception fails it with type, message and the innermost frames in
    ``last_error``; a result that can never be stored dead-letters it (see
    ``leaseq.work.outcomes.decide``). ``handler`` may be ``async def``: it runs on an event
    loop of its handler thread. Inside the handler, ``leaseq.current_job().lost``
    is set once the lease is gone; the outcome is then discarded, and an
    ``async def`` handler is cancelled.

    ``run()`` retries transient Redis errors (``ServerUnavailable`` and its
    subclasses) with backoff, logging one line per outage; any other leaseq
    error of its own calls (bad credentials, say) ends ``run()`` with it, after
    the held leases are released.

    ``ttl``: lease length in seconds, extended every ``ttl / 3`` while the
    handler runs. ``prefetch``: leases held beyond ``concurrency`` so that
    handler threads never wait for a round trip. By default it adapts: about
    ``PREFETCH_HORIZON`` (50 ms) of work at the rate handlers finish, never
    fewer than ``concurrency`` nor more than ``CLAIM_BATCH``. Prefetched leases
    are heartbeated too, and released at once on shutdown. ``grace``:
    seconds in-flight handlers get after a stop before their jobs are
    released. ``reap_interval``: seconds between full reaps (claims also
    reap a bounded number of expired leases each time). ``trace_parent``:
    with opentelemetry installed, each run gets a span that links to the
    enqueuer's (``"link"``) or is its child (``"parent"``); see ``leaseq.observe.tracing``.
    ``queue`` may be a list of queues, served in strict order (the first with
    a ready job), or weighted by ``weights`` (one integer per queue): see
    ``leaseq.queue_set`` and docs/workers.md, "Several queues".
    ``timeout``: seconds a handler may run when its job has no ``timeout`` of
    its own (None: no limit); past it the attempt fails with "timed out after
    N s" and its lease is freed at once; an ``async def`` handler is
    cancelled, while a plain one's thread, which cannot be killed, keeps its
    slot until it returns (``leaseq.work.timeouts``; ``on_stuck(n)`` hears how
    many are stuck).
    """

    def __init__(
        self,
        queue: QueueLike | Sequence[QueueLike],
        handler: Handlers,
        *,
        weights: Sequence[int] | None = None,
        concurrency: int = 4,
        ttl: float = 30.0,
        prefetch: int | None = None,
        grace: float = 30.0,
        reap_interval: float = 10.0,
        worker_id: str | None = None,
        handle_signals: bool = True,
        metrics: JobObserver | None = None,
        trace_parent: str = "link",
        timeout: float | None = None,
        on_stuck: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(
            queue_set(queue, weights, asynchronous=False),  # several: a QueueSet
            handler,
            concurrency=concurrency,
            ttl=ttl,
            prefetch=prefetch,
            grace=grace,
            reap_interval=reap_interval,
            worker_id=worker_id,
            handle_signals=handle_signals,
            metrics=metrics,
            trace_parent=trace_parent,
            timeout=timeout,
            on_stuck=on_stuck,
        )
