"""``leaseq.QueueSet``: several queues that one worker serves, in an order.

``leaseq.Worker([high, default, low], handler)`` (strict order) or
``leaseq.Worker([high, default, low], handler, weights=[5, 3, 1])`` makes one;
so does ``leaseq worker high,default,low ...`` / ``high:5,default:3,low:1``.
The operations are written once in ``leaseq.store.queue_set_ops``; this class
runs them on one client, as ``Queue`` runs ``QueueOps``. What the orders mean
and what stays per queue: docs/workers.md, "Several queues".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.protocols import QueueGroup, members
from leaseq.store.queue_set_ops import QueueSetOps
from leaseq.store.settings import QueueSettings
from leaseq.transport.drive import AsyncDriver, Operation, SyncDriver

__all__ = ["AsyncQueueSet", "QueueSet", "members", "parse_queue_spec", "queue_set"]

MAX_WEIGHT = 1000


def _checked_weights(weights: Sequence[int], count: int) -> list[int]:
    """One integer weight 1..MAX_WEIGHT per queue; raises InvalidArgument."""
    weights = list(weights)
    if len(weights) != count:
        raise InvalidArgument(f"{len(weights)} weights for {count} queues")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_WEIGHT:
            raise InvalidArgument(f"a weight is an integer 1..{MAX_WEIGHT}, not {w!r}")
    return weights


def _settings_of(queue: Any) -> QueueSettings:
    """A leaseq queue's settings; raises InvalidArgument for anything else."""
    core = getattr(queue, "_core", None)
    if not isinstance(core, QueueSettings):
        raise InvalidArgument(f"a queue set takes leaseq queues, not {queue!r}")
    return core


class QueueSetBase(QueueGroup):
    """The queues, their order and the operations a worker runs on them."""

    def __init__(self, queues: Sequence[Any], *, weights: Sequence[int] | None = None) -> None:
        queues = list(queues)
        if not queues:
            raise InvalidArgument("a worker needs at least one queue")
        names = [q.name for q in queues]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"a queue is listed twice: {', '.join(names)}")
        if weights is not None:
            weights = _checked_weights(weights, len(queues))
        first = queues[0]
        cores = [_settings_of(q) for q in queues]
        for q, core in zip(queues[1:], cores[1:], strict=True):
            if not _same_server(first.redis, q.redis):
                raise InvalidArgument(
                    f"queues {first.name!r} and {q.name!r} are on different clients: "
                    "the queues of one worker share one Redis (make them with one client)"
                )
            if (core.codec.name, core.durable) != (cores[0].codec.name, cores[0].durable):
                raise InvalidArgument(
                    f"queues {first.name!r} and {q.name!r} differ in serializer or "
                    "durable=: one worker writes their results alike"
                )
        self.queues = tuple(queues)
        self.redis = first.redis
        self._core = cores[0]
        self._checked = True  # each queue runs its own first checks
        together = not _is_cluster(first.redis)
        self._ops = QueueSetOps([q._ops for q in queues], names, weights, together)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def name(self) -> str:
        """``high,default,low`` (strict) or ``high:5,default:3,low:1`` (weighted)."""
        return self._ops.name

    @property
    def worker_id(self) -> str:
        """The worker id of the first queue."""
        return str(self.queues[0].worker_id)

    claim_now = Operation(QueueSetOps.claim_now)
    nudge = Operation(QueueSetOps.nudge)
    wait_for_wake = Operation(QueueSetOps.wait_for_wake)
    extend = Operation(QueueSetOps.extend)
    extend_many = Operation(QueueSetOps.extend_many)
    complete = Operation(QueueSetOps.complete)
    complete_many = Operation(QueueSetOps.complete_many)
    fail = Operation(QueueSetOps.fail)
    release = Operation(QueueSetOps.release)
    once = Operation(QueueSetOps.once)
    progress = Operation(QueueSetOps.progress)
    record_step = Operation(QueueSetOps.record_step)
    recorded_steps = Operation(QueueSetOps.recorded_steps)
    suspend = Operation(QueueSetOps.suspend)
    reap = Operation(QueueSetOps.reap)
    tick = Operation(QueueSetOps.tick)
    register_worker = Operation(QueueSetOps.register_worker)
    unregister_worker = Operation(QueueSetOps.unregister_worker)


class QueueSet(QueueSetBase, SyncDriver):
    """Several ``leaseq.Queue`` (or ``ShardedQueue``) served by one ``leaseq.Worker``."""


class AsyncQueueSet(QueueSetBase, AsyncDriver):
    """Several ``leaseq.aio.Queue`` served by one ``leaseq.aio.Worker``."""


def queue_set(queue: Any, weights: Sequence[int] | None, asynchronous: bool) -> Any:
    """What a worker serves: ``queue`` itself, or a set of the queues in a list."""
    if isinstance(queue, list | tuple):
        cls = AsyncQueueSet if asynchronous else QueueSet
        return cls(queue, weights=weights)
    if weights is not None:
        raise InvalidArgument("weights= needs a list of queues")
    return queue


def parse_queue_spec(spec: str) -> tuple[list[str], list[int] | None]:
    """``high,default,low`` -> names, None; ``high:5,default:3,low:1`` -> names,
    weights. Raises InvalidArgument (weights on some names only, a bad weight).
    One queue alone takes no weight, so ``emails:2`` is the queue named so (queue
    names may hold ':'); among several, write such a name with its weight,
    ``emails:2:1,other:1``."""
    names: list[str] = []
    weights: list[int | None] = []
    if "," not in spec:
        return [spec.strip()], None
    for part in spec.split(","):
        name, sep, weight = part.strip().rpartition(":") if ":" in part else (part, "", "")
        if sep and not weight.isdigit():  # a queue name may hold ':' itself
            name, weight = part.strip(), ""
        names.append(name.strip())
        weights.append(int(weight) if weight else None)
    if all(w is None for w in weights):
        return names, None
    if any(w is None for w in weights):
        raise InvalidArgument(f"give every queue a weight or none: {spec!r}")
    return names, [w for w in weights if w is not None]


def _same_server(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        ka, kb = a.connection_pool.connection_kwargs, b.connection_pool.connection_kwargs
    except AttributeError:
        return False
    if type(a) is not type(b):
        return False
    if ka.get("server") is not None:  # fakeredis (memory://): the same fake server
        return bool(ka["server"] is kb.get("server") and ka.get("db") == kb.get("db"))
    return all(ka.get(f) == kb.get(f) for f in ("host", "port", "db", "path", "username"))


def _is_cluster(client: Any) -> bool:
    return hasattr(client, "get_nodes")
