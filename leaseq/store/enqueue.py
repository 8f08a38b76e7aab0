"""Enqueueing: what one enqueue or a batch sends (``lua/enqueue.lua``; with
parents, ``leaseq.store.parents``), validated before anything is written, the
producer span around it, and the ``enqueue`` and ``enqueue_many`` operations."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from leaseq.errors import InvalidArgument, NotReplicated
from leaseq.observe.tracing import Send, check_traceparent
from leaseq.store import validate as v
from leaseq.store.groups import check_group
from leaseq.store.keys import check_job_id, new_job_ids
from leaseq.store.parents import check_parents, check_policy, dependent_calls
from leaseq.store.replies import as_text
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Batch, Call, Op, Partial, joined
from leaseq.types import JOB_OPTIONS, JobOptions, Unique

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ENQUEUE_CHUNK",
    "Enqueued",
    "check_options",
    "enqueue",
    "enqueue_calls",
    "enqueue_many",
    "enqueue_traced",
    "option_args",
    "unique_keys",
]

Enqueued = list[int | str]
"""An enqueue call's reply, one value per job: 1 created, 0 the id existed, or
the id of the job holding the job's uniqueness key (then nothing was created)."""

ENQUEUE_CHUNK = 128
"""Most jobs one enqueue script call is sent: about what its time budget
(lua/lib/over_budget.lua) holds of small jobs (~6-10 us each on the server), so
few calls stop short and little is sent twice: a cut call's rest is encoded
and sent again, and Redis copies a call's whole ARGV however few it does. At
256, every call was cut once; 128 ran `enqueue_many` 1.03-1.08x as fast on
shared cores and 1.15x with the server on its own core, on 0.75-0.85x the
client CPU (bench/RESULTS.md, "A good neighbour, fourth pass")."""
ENQUEUE_BYTES = 128 * 1024
"""Most payload bytes one enqueue call is sent (one job at least): Redis copies
a call's whole ARGV before the script runs, ~1.3 ms a MB on a slow box, and no
time budget inside the script can stop that."""
UNIQUE_CHUNK = 32
"""Most jobs one enqueue call with uniqueness keys is sent: such a call is one
page (lua/enqueue.lua: keep-last may rewrite any earlier job of the call), so
it cannot stop at its budget, and 256 held a slow server ~9 ms."""


def _enqueued(reply: list[Any]) -> Enqueued:
    return [x if isinstance(x, int) else as_text(x) for x in reply]


def unique_keys(unique: object, payloads: Sequence[Any]) -> tuple[list[str], int, int]:
    """The uniqueness ARGV of ``payloads``: one key per job ('{}' for none; an
    empty list when ``unique`` is None), the window in ms (0 = none), replace 0/1.
    Raises InvalidArgument or InvalidName before anything is written."""
    if unique is None:
        return [], 0, 0
    if not isinstance(unique, Unique):
        raise InvalidArgument(f"unique must be a leaseq.Unique, not {unique!r}")
    key = unique.key
    keys = []
    for payload in payloads:
        value = key if isinstance(key, str) else key(payload)
        keys.append("{}" if value is None else check_job_id(value, "unique key"))
    period = 0 if unique.period is None else max(1, round(unique.period * 1000))
    return keys, period, int(unique.replace)


def check_options(options: JobOptions, caller: str) -> None:
    """Refuse an option ``JobOptions`` does not declare, as Python refuses an
    unknown keyword argument (``**options`` would otherwise swallow a typo)."""
    for name in options:
        if name not in JOB_OPTIONS:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")


def option_args(queue: QueueSettings, options: JobOptions, caller: str) -> dict[str, Any]:
    """The job options as stored (script ARGV by name: max_attempts, delay_ms,
    priority, group, kind, timeout_ms, cost ('' = the default, 1), expires), each checked;
    the one check of them for enqueue and schedules alike. ``unique`` is checked
    by ``unique_keys``."""
    check_options(options, caller)
    max_attempts = options.get("max_attempts")
    group, kind = options.get("group"), options.get("kind")
    delay_ms = v.delay_ms(options.get("delay"))
    return {
        "max_attempts": queue.max_attempts
        if max_attempts is None
        else v.integer(max_attempts, "max_attempts", 1, v.MAX_ATTEMPTS),
        "delay_ms": delay_ms,
        "priority": v.integer(options.get("priority", 0), "priority", 0, v.MAX_PRIORITY),
        "group": "" if group is None else check_group(group),
        "kind": "" if kind is None else check_job_id(kind, "kind"),
        "timeout_ms": v.timeout_ms(options.get("timeout")),
        "cost": "" if options.get("cost") is None else v.cost(options.get("cost")),
        "expires": v.expires(options.get("expires"), delay_ms),
    }


def enqueue_calls(
    queue: QueueSettings,
    payloads: Sequence[Any],
    ids: Sequence[str | None] | None,
    options: JobOptions,
    traceparent: str = "",
    *,
    caller: str = "enqueue",
) -> tuple[list[str], Sequence[Call[Batch[int | str]]]]:
    """The ids and the script calls (chunks of ENQUEUE_CHUNK) that enqueue ``payloads``.

    ``options`` are the job options every item gets (``leaseq.JobOptions``;
    an unknown one is a TypeError naming ``caller``, as Python would say it).
    Everything is validated and encoded here, before any call is made:
    one bad item raises and nothing is written. A missing id is made
    by the client (``new_job_ids``) so a replayed call is deduplicated.
    ``traceparent``: the W3C trace context stored in every row ('' = none;
    ``leaseq.observe.tracing``).
    """
    if ids is not None and len(ids) != len(payloads):
        raise InvalidArgument(f"{len(ids)} ids for {len(payloads)} payloads")
    head = option_args(queue, options, caller)  # the ARGV of every chunk, by name
    queue.check_calls(options.get("kind"), payloads)  # a typed task's calls must fit it
    traceparent = traceparent and check_traceparent(traceparent)
    head["traceparent"] = traceparent
    ukeys, head["unique_period_ms"], head["unique_replace"] = unique_keys(
        options.get("unique"), payloads
    )
    fresh = iter(new_job_ids(sum(1 for i in ids if i is None) if ids else len(payloads)))
    job_ids = [
        next(fresh) if ids is None or ids[i] is None else check_job_id(ids[i])
        for i in range(len(payloads))
    ]
    parents = check_parents(options.get("depends_on"), job_ids)
    policy = check_policy(options.get("on_parent_failure", "cancel"))
    if parents is None:
        return job_ids, _plain_calls(queue, payloads, ids, job_ids, ukeys, head)
    if ukeys:
        raise InvalidArgument(
            "unique= and depends_on= cannot be combined yet: enqueue the job with "
            "depends_on= under an id of your own instead (ids deduplicate)"
        )
    # With parents: the dependency script (leaseq.store.parents).
    encoded = [queue.codec.encode(p) for p in payloads]
    picked = [ids is not None and ids[i] is not None for i in range(len(job_ids))]
    return job_ids, dependent_calls(
        queue, job_ids, encoded, head, policy, parents, traceparent, picked
    )


def _plain_calls(
    queue: QueueSettings,
    payloads: Sequence[Any],
    ids: Sequence[str | None] | None,
    job_ids: list[str],
    ukeys: list[str],
    head: dict[str, Any],
) -> list[Call[Batch[int | str]]]:
    """The ``enqueue.lua`` calls of jobs without parents, one per window
    (``_windows``); a call that stops at its time budget replies with the call
    for its rest (``Partial``), sized by what it did (the rest is sent again
    whole otherwise, and read whole however little is done), keeping the FIFO
    numbers its window reserved. Every payload is encoded here, before any
    call runs."""
    encode = queue.codec.encode
    encoded = [encode(p) for p in payloads]
    script, keys = SCRIPTS["enqueue"], queue.keys

    def call(start: int, stop: int, end: int, seq_from: str = "") -> Call[Batch[int | str]]:
        """The call for jobs start..stop of the window that ends at ``end``;
        ``seq_from`` as lua/enqueue.lua takes it ('' for a window's first call,
        which is sent the whole window)."""
        jobs: list[str | bytes | int] = []
        for i in range(start, stop):
            jobs += (job_ids[i], encoded[i])
        unique = " ".join(ukeys[start:stop])
        # A row under an id this client made needs no incarnation of its own
        # (lua/lib/row_number.lua): only a call with a chosen id or a
        # uniqueness key numbers its rows.
        chosen = ids is not None and any(ids[i] is not None for i in range(start, stop))
        numbered = int(chosen or bool(ukeys))

        def parse(reply: list[Any]) -> Batch[int | str]:
            if reply and isinstance(reply[0], list) and as_text(reply[0][0]) == "COST":
                raise InvalidArgument(f"{as_text(reply[0][1])}: nothing was enqueued")
            cut = bool(reply) and isinstance(reply[-1], list)  # {'SEQ', base} ends it
            got = _enqueued(reply[:-1] if cut else reply)
            at = start + len(got)
            if at >= end:
                return got
            if cut:  # the rest: what it did and half again
                first, size = int(reply[-1][1]) + len(got), max(16, len(got) + len(got) // 2)
            else:  # a piece of a rest that did all it was sent: the window goes on
                first, size = int(seq_from) + len(got), 2 * (stop - start)
            return Partial(got, call(at, min(end, at + size), end, str(first)))

        return script.call(
            keys, parse, arg_tail=jobs, unique=unique, numbered=numbered, seq_from=seq_from, **head
        )

    most = UNIQUE_CHUNK if ukeys else ENQUEUE_CHUNK
    return [call(start, stop, stop) for start, stop in _windows(encoded, most)]


def _windows(encoded: Sequence[bytes], most: int) -> list[tuple[int, int]]:
    """The batch cut into windows (start, stop) of at most ``most`` jobs and
    ENQUEUE_BYTES of payload (one job at least), in order."""
    out: list[tuple[int, int]] = []
    start = size = 0
    for i, body in enumerate(encoded):
        if i > start and (i - start >= most or size + len(body) > ENQUEUE_BYTES):
            out.append((start, i))
            start, size = i, 0
        size += len(body)
    if encoded:
        out.append((start, len(encoded)))
    return out


def _run(ids: list[str], calls: Sequence[Call[Batch[int | str]]]) -> Op[list[str]]:
    """Run the calls in turn; a job not created for its uniqueness key gets its
    holder's id. NotReplicated (``durable=``) comes once the whole batch is
    applied, with the ids as its result."""
    try:
        replies = yield from joined(calls)
    except NotReplicated as exc:
        _holders(ids, cast(list[Any], exc.result))  # joined's: the batch's replies
        raise NotReplicated(exc.op, exc.wanted, exc.acked, ids) from None
    _holders(ids, replies)
    return ids


def _holders(ids: list[str], replies: Sequence[Any]) -> None:
    for k, reply in enumerate(replies):
        if isinstance(reply, str):
            ids[k] = reply


def enqueue_traced(
    queue: str,
    batch: bool,
    build: Callable[[str], tuple[list[str], Sequence[Call[Batch[int | str]]]]],
) -> Op[list[str]]:
    """Run the enqueue calls ``build(traceparent)`` makes, one after another
    (each a short call on the server: other clients' commands run between
    them); return the ids (a job deduplicated by its uniqueness key: its
    holder's id).

    Inside a valid current span (opentelemetry installed) the calls run under
    a PRODUCER span whose traceparent every row stores (``leaseq.observe.tracing``);
    otherwise ``build("")``, and that is all the cost.
    """
    send = Send.start(queue)
    if send is None:
        ids, calls = build("")
        return (yield from _run(ids, calls))
    error: BaseException | None = None
    try:
        ids, calls = build(send.traceparent)
        send.sent(ids, batch)
        return (yield from _run(ids, calls))
    except BaseException as exc:
        error = exc
        raise
    finally:
        send.end(error)


def enqueue(
    queue: QueueSettings, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
) -> Op[str]:
    """Add one job; return its id (also when ``id`` already existed: then nothing changes).

    ``options`` (``leaseq.JobOptions``): ``max_attempts``, ``delay`` seconds
    (>= 0) before it may run, ``priority`` 0..1,000,000 (lower first, FIFO
    within one), ``group``, ``kind``, ``timeout``. Raises InvalidPayload,
    PayloadTooLarge, InvalidName or InvalidArgument before writing anything.
    """
    try:
        ids = yield from enqueue_traced(
            queue.name, False, lambda tp: enqueue_calls(queue, [payload], [id], options, tp)
        )
    except NotReplicated as exc:  # durable=: applied; its result is the id
        raise NotReplicated(exc.op, exc.wanted, exc.acked, cast(list[str], exc.result)[0]) from None
    return ids[0]


def enqueue_many(
    queue: QueueSettings,
    payloads: Iterable[Any],
    *,
    ids: Sequence[str] | None = None,
    **options: Unpack[JobOptions],
) -> Op[list[str]]:
    """Add many jobs, ENQUEUE_CHUNK a call (fewer where a call stops at its time
    budget: its rest is the next call); return their ids in order.
    Every job gets the same ``options`` (as for ``enqueue``).

    Every item is validated and encoded first: one bad item rejects the
    whole call and nothing is written.
    """
    items = list(payloads)
    return (
        yield from enqueue_traced(
            queue.name,
            True,
            lambda tp: enqueue_calls(queue, items, ids, options, tp, caller="enqueue_many"),
        )
    )
