"""What one job's run tells the worker's observer (metrics) and its span (tracing).

Both workers make one :class:`Told` per job run when an observer or a tracer
is set (none otherwise: the hot path of a worker without either makes
nothing), so the two report alike: started as the handler starts, then one
``finished`` with the outcome's kind and one end of the span.
"""

from __future__ import annotations

import time

from leaseq.observe.observer import JobObserver
from leaseq.observe.tracing import JobTracer
from leaseq.types import Lease
from leaseq.work.outcomes import Outcome


class Told:
    """What one job's run tells its observer (metrics) and its span (tracing), each
    at most once: started as it is made, then how it finished."""

    __slots__ = ("began", "observer", "queue", "span")

    def __init__(
        self,
        queue: str,
        observer: JobObserver | None,
        lease: Lease,
        ttl: float,
        tracer: JobTracer | None,
    ) -> None:
        self.queue, self.observer = queue, observer
        self.began = 0.0
        if observer is not None:
            observer.started(queue, lease, ttl)
            self.began = time.perf_counter()
        self.span = None if tracer is None else tracer.start(lease)

    def detach(self) -> None:
        if self.span is not None:
            self.span.detach()

    def finished(self, kind: str, lease: Lease) -> None:
        """The handler is done (``kind``: the outcome's, or release / lost), ``lease``
        as it stands now."""
        if self.observer is not None:
            spent = time.perf_counter() - self.began
            self.observer.finished(self.queue, kind, spent, lease)

    def span_end(self, outcome: Outcome | None, raised: BaseException | None, lost: bool) -> None:
        if self.span is not None:
            self.span.finish(outcome, raised, lost)
            self.span = None
