"""Enqueue: what one enqueue or a batch sends, validated before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leaseq.errors import DamagedRow, InvalidArgument, JobNotFound, ScriptError
from leaseq.observe.tracing import Send, check_traceparent
from leaseq.store import validate as v
from leaseq.store.groups import check_group
from leaseq.store.keys import check_job_id, new_job_ids
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op
from leaseq.types import JOB_OPTIONS, JobOptions, Step

__all__ = [
    "ENQUEUE_CHUNK",
    "MAX_FLOW_STEPS",
    "MAX_PARENTS",
    "EnqueueCalls",
    "check_options",
    "enqueue_traced",
]

ENQUEUE_CHUNK = 1000
"""Jobs per enqueue script call: big enough to amortise the round trip,
small enough that one call never blocks the server for long."""


MAX_FLOW_STEPS = 100_000
"""Most steps one ``enqueue_flow`` call takes: one script call, all or nothing."""
MAX_PARENTS = 100_000
"""Most parents one job may name (a fan-in)."""


def check_options(options: JobOptions, caller: str) -> None:
    """Refuse an option ``JobOptions`` does not declare, as Python refuses an
    unknown keyword argument (``**options`` would otherwise swallow a typo)."""
    for name in options:
        if name not in JOB_OPTIONS:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")


class EnqueueCalls(QueueSettings):
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
        # With parents: the dependency script, every item a step with the same
        # parents (a fan-out), chunk by chunk, each chunk one call.
        steps = [
            _step_args(job_ids[i], encode(payloads[i]), head, policy, " ".join(parents))
            for i in range(len(payloads))
        ]
        for start in range(0, len(steps), ENQUEUE_CHUNK):
            tail = [arg for step in steps[start : start + ENQUEUE_CHUNK] for arg in step]
            calls.append(self._flow_call(tail, traceparent, "", dedup=True))
        return job_ids, calls

    def flow_calls(
        self, steps: Sequence[Step], traceparent: str = "", flow: str | None = None
    ) -> tuple[list[str], list[Call[list[int]]]]:
        """The ids and the one script call that enqueue a workflow (``enqueue_flow``);
        ``flow``: its name, stored in every row (None: a fresh one).

        Every step is validated and encoded here: a bad payload or option, a
        repeated id, a step naming itself or a later step raise before any call;
        the script refuses the whole call, writing nothing, when a parent does
        not exist or a step's id is taken (``JobNotFound``, ``InvalidArgument``).
        """
        if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
            raise InvalidArgument(f"enqueue_flow takes a list of leaseq.Step, not {steps!r}")
        if len(steps) > MAX_FLOW_STEPS:
            raise InvalidArgument(
                f"enqueue_flow takes at most {MAX_FLOW_STEPS} steps, not {len(steps)}"
            )
        for n, step in enumerate(steps):
            if not isinstance(step, Step):
                raise InvalidArgument(f"step {n} is {type(step).__name__}, not a leaseq.Step")
        fresh = iter(new_job_ids(sum(1 for step in steps if step.id is None)))
        job_ids = [next(fresh) if step.id is None else check_job_id(step.id) for step in steps]
        seen: dict[str, int] = {}
        for n, job_id in enumerate(job_ids):
            if job_id in seen:
                raise InvalidArgument(f"steps {seen[job_id]} and {n} have the same id {job_id!r}")
            seen[job_id] = n
        encode = self.codec.encode
        traceparent = traceparent and check_traceparent(traceparent)
        tail: list[str | bytes | int] = []
        for n, step in enumerate(steps):
            parents = check_parents(step.depends_on, [job_ids[n]]) or []
            for parent in parents:
                if seen.get(parent, -1) > n:
                    raise InvalidArgument(
                        f"step {n} ({job_ids[n]!r}) depends on {parent!r}, a later step: "
                        "list every step after its parents"
                    )
            options: JobOptions = {
                "max_attempts": step.max_attempts,
                "delay": step.delay,
                "priority": step.priority,
                "group": step.group,
                "kind": step.kind,
                "timeout": step.timeout,
            }
            head = self._job_head(options)
            policy = check_policy(step.on_parent_failure)
            tail += _step_args(job_ids[n], encode(step.payload), head, policy, " ".join(parents))
        if not steps:
            return [], []
        name = new_job_ids(1)[0] if flow is None else flow
        return job_ids, [self._flow_call(tail, traceparent, name, dedup=False)]

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

    def _flow_call(
        self, tail: list[str | bytes | int], traceparent: str, flow: str, *, dedup: bool
    ) -> Call[list[int]]:
        return SCRIPTS["enqueue_flow"].call(
            self.keys,
            _flow_reply,
            arg_tail=tail,
            traceparent=traceparent,
            flow=flow,
            dedup=1 if dedup else 0,
        )


def _step_args(
    job_id: str, payload: bytes, head: dict[str, Any], policy: str, parents: str
) -> tuple[str | bytes | int, ...]:
    """The ten ARGV values of one step of enqueue_flow.lua, in its header's order."""
    return (
        job_id,
        payload,
        head["max_attempts"],
        head["delay_ms"],
        head["priority"],
        head["group"],
        head["kind"],
        head["timeout_ms"],
        policy,
        parents,
    )


def check_parents(depends_on: object, children: Sequence[str]) -> list[str] | None:
    """``depends_on`` as a list of distinct ids in the order given (None for none).

    A single string is refused (it would read as its characters), and so is a
    job that names itself: a job never depends on itself, and since a parent
    must exist before its child, no cycle can be built.
    """
    if depends_on is None:
        return None
    if isinstance(depends_on, (str, bytes)) or not isinstance(
        depends_on, Sequence | set | frozenset | tuple
    ):
        raise InvalidArgument(f"depends_on must be a list of job ids, not {depends_on!r}")
    parents = list(dict.fromkeys(check_job_id(p, "parent id") for p in depends_on))
    if len(parents) > MAX_PARENTS:
        raise InvalidArgument(f"a job may depend on at most {MAX_PARENTS} jobs, not {len(parents)}")
    mine = set(parents).intersection(children)
    if mine:
        raise InvalidArgument(f"job {min(mine)!r} cannot depend on itself")
    return parents or None


def check_policy(value: object) -> str:
    """``on_parent_failure``: ``"cancel"`` or ``"run"``."""
    if value not in ("cancel", "run"):
        raise InvalidArgument(f'on_parent_failure must be "cancel" or "run", not {value!r}')
    return str(value)


def _created(reply: list[Any]) -> list[int]:
    return [int(x) for x in reply]


def _flow_reply(reply: list[Any]) -> list[int]:
    """enqueue_flow.lua's answer: created flags, or the refusal as an exception."""
    if reply and isinstance(reply[0], (bytes, str)):
        code = as_text(reply[0])
        if code == "GONE":
            raise JobNotFound(as_text(reply[1]))
        if code == "USED":
            raise InvalidArgument(
                f"step id {as_text(reply[1])!r} is already in use: nothing was enqueued"
            )
        if code == "DAMAGED":
            raise DamagedRow(
                as_text(reply[1]),
                "<key>" if "hash" in as_text(reply[2]) else "state",
                None,
                as_text(reply[2]),
            )
        raise ScriptError(f"enqueue_flow: unexpected reply {reply!r}")
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
