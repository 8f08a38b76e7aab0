"""What ``leaseq.Queue`` and ``leaseq.aio.Queue`` share: settings and naming.

The settings are declared here once, keyword-only, with their defaults;
``QueueCore`` checks them. The two queues add only their transport.
"""

from __future__ import annotations

from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.store.core import DEFAULT_KEEP_SUCCEEDED_COUNT, QueueCore
from leaseq.store.keys import QueueKeys
from leaseq.store.ops import Command, Op, QueueOps
from leaseq.types import DEFAULT_BACKOFF, Backoff

__all__ = ["QueueBase"]


def _decodes_responses(client: Any) -> bool:
    try:
        return bool(client.get_encoder().decode_responses)
    except AttributeError:  # a client without redis-py's encoder: cannot tell
        return False


class QueueBase:
    """Settings, keys and worker id of one named queue on one client.

    Settings are keyword-only and checked at construction; an unknown one is
    a TypeError. Durations are seconds (float). ``shard`` is set by
    ``ShardedQueue`` only (keys under the hash tag ``{<name>#<shard>}``);
    ``durable`` and ``durable_timeout`` are described in docs/scaling.md.
    """

    _kind = "Queue"

    def __init__(
        self,
        name: str,
        *,
        redis: Any,
        prefix: str = "leaseq",
        max_attempts: int = 5,
        backoff: float | Backoff = DEFAULT_BACKOFF,
        keep_succeeded: float | None = 3600.0,
        keep_succeeded_count: int | None = DEFAULT_KEEP_SUCCEEDED_COUNT,
        serializer: str = "json",
        payload_type: Any = None,
        max_payload_bytes: int = 1_048_576,
        lease_cap: float = 86_400.0,
        worker_id: str | None = None,
        shard: int | None = None,
        durable: int = 0,
        durable_timeout: float = 1.0,
    ) -> None:
        self._core = QueueCore(
            name,
            prefix=prefix,
            max_attempts=max_attempts,
            backoff=backoff,
            keep_succeeded=keep_succeeded,
            keep_succeeded_count=keep_succeeded_count,
            serializer=serializer,
            payload_type=payload_type,
            max_payload_bytes=max_payload_bytes,
            lease_cap=lease_cap,
            worker_id=worker_id,
            shard=shard,
            durable=durable,
            durable_timeout=durable_timeout,
        )
        if redis is None:
            raise InvalidArgument(f"{self._kind} needs a redis client (or use from_url)")
        if serializer == "msgpack" and _decodes_responses(redis):
            # msgpack payloads are binary: a client that decodes every reply as
            # UTF-8 would fail on them at the first claim, far from the cause.
            raise InvalidArgument(
                "serializer='msgpack' needs a client made with decode_responses=False"
            )
        self.redis = redis
        self._checked = False
        self._owns_client = False
        self._ops = QueueOps(self._core)

    def _first_checks(self) -> Op[None]:
        # A plain queue named like a sharded one would hide its shards' jobs
        # (and break dedup by id): refuse it before the first call.
        if self.keys.shard is not None:
            return  # a shard of a ShardedQueue, which checks for itself
        shards = yield Command("hget", (self.keys.sharding, "shards"))
        if shards is not None:
            n = int(shards)
            raise InvalidArgument(
                f"{self.name!r} is a sharded queue of {n} shards: use "
                f"leaseq.ShardedQueue({self.name!r}, shards={n}, ...)"
            )

    def __repr__(self) -> str:
        return f"{self._kind}({self.name!r}, prefix={self.keys.prefix!r})"

    @property
    def name(self) -> str:
        """The queue's name (for a shard, the logical queue's name)."""
        return self._core.name

    @property
    def keys(self) -> QueueKeys:
        """The key names of this queue (read-only)."""
        return self._core.keys

    @property
    def worker_id(self) -> str:
        """The worker id claims use when they are given none."""
        return self._core.worker_id
