"""Enqueue: what one enqueue or a batch sends, validated before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.observe.tracing import Send, check_traceparent
from leaseq.store import validate as v
from leaseq.store.flows import FlowCalls, check_parents, check_policy
from leaseq.store.groups import check_group
from leaseq.store.keys import check_job_id, new_job_ids
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op
from leaseq.types import JOB_OPTIONS, JobOptions

__all__ = [
    "ENQUEUE_CHUNK",
    "EnqueueCalls",
    "check_options",
    "enqueue_traced",
]

ENQUEUE_CHUNK = 1000
"""Jobs per enqueue script call: big enough to amortise the round trip,
small enough that one call never blocks the server for long."""


def check_options(options: JobOptions, caller: str) -> None:
    """Refuse an option ``JobOptions`` does not declare, as Python refuses an
    unknown keyword argument (``**options`` would otherwise swallow a typo)."""
    for name in options:
        if name not in JOB_OPTIONS:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")


class EnqueueCalls(FlowCalls, QueueSettings):
    """The enqueue calls of a queue."""

    def enqueue_calls(
        self,
        payloads: Sequence[Any],
        ids: Sequence[str | None] | None,
        options: JobOptions,
        traceparent: str = "",
        *,
        caller: str = "enqueue",
    ) -> tuple[list[str], list[Call[list[int]]]]:
        """The ids and the script calls (chunks of ENQUEUE_CHUNK) that enqueue ``payloads``.

        ``options`` are the job options every item gets (``leaseq.JobOptions``;
        an unknown one is a TypeError naming ``caller``, as Python would say it).
        Everything is validated and encoded here, before any call is made:
        one bad item raises and nothing is written. A missing id is made
        by the client (``new_job_ids``) so a replayed call is deduplicated.
        ``traceparent``: the W3C trace context stored in every row ('' = none;
        ``leaseq.observe.tracing``).
        """
        check_options(options, caller)
        if ids is not None and len(ids) != len(payloads):
            raise InvalidArgument(f"{len(ids)} ids for {len(payloads)} payloads")
        head = self._job_head(options)
        traceparent = traceparent and check_traceparent(traceparent)
        fresh = iter(new_job_ids(sum(1 for i in ids if i is None) if ids else len(payloads)))
        job_ids = [
            next(fresh) if ids is None or ids[i] is None else check_job_id(ids[i])
            for i in range(len(payloads))
        ]
        parents = check_parents(options.get("depends_on"), job_ids)
        policy = check_policy(options.get("on_parent_failure", "cancel"))
        encode = self.codec.encode
        calls: list[Call[list[int]]] = []
        keys = self.keys
        if parents is None:
            script = SCRIPTS["enqueue"]
            for start in range(0, len(payloads), ENQUEUE_CHUNK):
                jobs: list[str | bytes | int] = []
                for i in range(start, min(start + ENQUEUE_CHUNK, len(payloads))):
                    jobs += (job_ids[i], encode(payloads[i]))
                calls.append(
                    script.call(keys, _created, arg_tail=jobs, traceparent=traceparent, **head)
                )
            return job_ids, calls
        # With parents: the dependency script (leaseq.store.flows).
        encoded = [encode(p) for p in payloads]
        calls += self.dependent_calls(job_ids, encoded, head, policy, parents, traceparent)
        return job_ids, calls

    def _job_head(self, options: JobOptions) -> dict[str, Any]:
        """The job options every job of a call gets, checked and in script units."""
        max_attempts = options.get("max_attempts")
        group, kind = options.get("group"), options.get("kind")
        return {
            "max_attempts": self.max_attempts
            if max_attempts is None
            else v.integer(max_attempts, "max_attempts", 1, v.MAX_ATTEMPTS),
            "delay_ms": v.delay_ms(options.get("delay")),
            "priority": v.integer(options.get("priority", 0), "priority", 0, v.MAX_PRIORITY),
            "group": "" if group is None else check_group(group),
            "kind": "" if kind is None else check_job_id(kind, "kind"),
            "timeout_ms": v.timeout_ms(options.get("timeout")),
        }


def _created(reply: list[Any]) -> list[int]:
    return [int(x) for x in reply]


def enqueue_traced(
    queue: str, batch: bool, build: Callable[[str], tuple[list[str], list[Call[list[int]]]]]
) -> Op[list[str]]:
    """Run the enqueue calls ``build(traceparent)`` makes; return the ids.

    Inside a valid current span (opentelemetry installed) the calls run under
    a PRODUCER span whose traceparent every row stores (``leaseq.observe.tracing``);
    otherwise ``build("")``, and that is all the cost.
    """
    send = Send.start(queue)
    if send is None:
        ids, calls = build("")
        for call in calls:
            _ = yield call  # the replies (created flags) are not needed
        return ids
    error: BaseException | None = None
    try:
        ids, calls = build(send.traceparent)
        send.sent(ids, batch)
        for call in calls:
            _ = yield call
        return ids
    except BaseException as exc:
        error = exc
        raise
    finally:
        send.end(error)
