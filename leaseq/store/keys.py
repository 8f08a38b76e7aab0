"""The one place that builds Redis key names, and the naming rules.

Every key of a queue shares the hash tag ``{<queue>}``, so on Redis Cluster
a queue lives in one slot and every script sees all of its keys.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass

from leaseq.errors import InvalidName
from leaseq.types import State

__all__ = [
    "MAX_SHARDS",
    "QueueKeys",
    "check_job_id",
    "check_queue_name",
    "new_job_ids",
    "shard_of",
    "split_shard",
]

_STATE_NAMES = frozenset(state.value for state in State)
"""The names under which ``QueueKeys`` answers a state's index (``keys.pending``)."""

_QUEUE_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Printable ASCII (0x21-0x7e) is already free of whitespace; braces are out
# because they would break the hash tag.
_JOB_ID = re.compile(r"[!-z|~]{1,256}")


def check_queue_name(name: object, what: str = "queue name") -> str:
    """Return ``name`` if it is 1-128 characters of ``A-Z a-z 0-9 . _ - :``."""
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise InvalidName(
            f"invalid {what} {_show(name)}: use 1-128 characters of A-Z a-z 0-9 . _ - :"
        )
    return name


def check_job_id(job_id: object, what: str = "job id") -> str:
    """Return ``job_id`` if it is 1-256 printable ASCII characters, no space or braces."""
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise InvalidName(
            f"invalid {what} {_show(job_id)}: use 1-256 printable ASCII characters "
            "other than whitespace, '{' and '}'"
        )
    return job_id


_ALPHABET = b"0123456789abcdefghjkmnpqrstvwxyz"
"""Crockford's base32 alphabet, lowercase: digits and letters without i, l, o
and u, none of which an operator can misread for another (ids are still
matched exactly: case and all)."""
_TO_BASE32 = bytes(_ALPHABET[b % 32] for b in range(256))
"""A random byte to a character: its low 5 bits (256 = 8 x 32, so each character
is equally likely). One ``bytes.translate`` makes a whole batch's ids in C;
``base64.b32encode`` loops in Python: ~1 ms per 1,000 ids, ~9% of ``enqueue_many``."""


def new_job_ids(n: int) -> list[str]:
    """``n`` fresh job ids: 16 base32 characters (Crockford's alphabet,
    lowercase), 80 random bits each.

    Ids are made by the client, not numbered by the server, so that a
    replayed enqueue (redis-py retries a call whose reply was lost) finds
    the rows it already wrote and creates nothing twice. 80 bits keep a
    collision among even a billion live jobs below one in a million.
    Why base32 and not hex: an id is stored in the ready list, in every event
    and in each index a job passes through, so 16 characters instead of 20
    save ~8 bytes a pending job (docs/limits-and-costs.md, "Memory per job").
    """
    text = os.urandom(16 * n).translate(_TO_BASE32).decode()
    return [text[i : i + 16] for i in range(0, 16 * n, 16)]


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Key names of one queue: ``{prefix}:{<queue>}:...``. Immutable."""

    prefix: str
    queue: str
    shard: int | None = None
    """Set for one shard of a ``ShardedQueue``: the hash tag becomes
    ``{<queue>#<shard>}``. ``#`` is not allowed in queue names, so a shard's
    keys can never collide with a plain queue's."""

    def __post_init__(self) -> None:
        check_queue_name(self.prefix, "prefix")
        check_queue_name(self.queue)
        if self.shard is not None and not (
            isinstance(self.shard, int) and 0 <= self.shard < MAX_SHARDS
        ):
            raise InvalidName(f"shard must be an integer 0..{MAX_SHARDS - 1}, not {self.shard!r}")

    @property
    def sharding(self) -> str:
        """The meta HASH of shard 0 of the sharded queue with this name: field
        ``shards`` records how many shards it has (read by every sharded queue
        and plain queue of the name, so the two never mix)."""
        return f"{self.prefix}:{{{self.queue}#0}}:meta"

    def markers(self) -> tuple[str, ...]:
        """The keys whose presence means this queue exists (one ``EXISTS`` of
        them all, one slot): its meta hash, every state's index, and the
        schedules, limits and workers keys. Any one is enough, so a queue whose
        meta hash was deleted by hand is still this queue."""
        return (
            self.meta,
            self.ready,
            *(self.index(state.value) for state in State),
            self.schedules,
            self.limits,
            self.workers,
        )

    def plain_markers(self) -> tuple[str, ...]:
        """:meth:`markers` of the plain queue with this name (even for a shard)."""
        return QueueKeys(self.prefix, self.queue).markers()

    @property
    def tag(self) -> str:
        """The hash tag's content: ``<queue>``, or ``<queue>#<shard>`` for a shard."""
        return self.queue if self.shard is None else f"{self.queue}#{self.shard}"

    @property
    def stem(self) -> str:
        """``{prefix}:{<queue>}:``, the start of every key of this queue."""
        return f"{self.prefix}:{{{self.tag}}}:"

    def job(self, job_id: str) -> str:
        """The job row (HASH) of ``job_id``."""
        return self.stem + "job:" + job_id

    @property
    def job_prefix(self) -> str:
        """What scripts prepend to an id to get its row, ``{prefix}:{<queue>}:job:``."""
        return self.stem + "job:"

    @property
    def meta(self) -> str:
        """HASH of the queue's counters, FIFO sequence and id counter."""
        return self.stem + "meta"

    @property
    def ready(self) -> str:
        """LIST of pending ids that are ungrouped and of priority 0, in FIFO order: the
        first to run, kept without a score (docs/keys-and-rows.md#the-ready-list). Entries of
        jobs that left without a claim (cancel, delete) stay until a claim pops them,
        counted in meta field ``ready_stale``; meta ``ready_popped`` counts the ids
        ever taken off its head, so an entry's place is ``ready_popped + index``."""
        return self.stem + "ready"

    @property
    def wake(self) -> str:
        """LIST of wake-up tokens that blocked claimers wait on."""
        return self.stem + "wake"

    @property
    def done(self) -> str:
        """STREAM of finished job ids (field ``ids``) that ``wait`` listens on
        (lua/lib/signal_done.lua; passed in KEYS to every script that finishes jobs)."""
        return self.stem + "done"

    @property
    def events(self) -> str:
        """STREAM of job transitions, one entry per script call (lua/lib/flush_events.lua:
        fields ``at``, ``n``, then ``<from>><to>`` = space-separated ``<id>:<attempt>``);
        trimmed to about meta ``events_maxlen`` entries; off while meta ``events`` = off."""
        return self.stem + "events"

    @property
    def schedules(self) -> str:
        """ZSET of schedule names; score = next due time, ms epoch (+inf: parked)."""
        return self.stem + "schedules"

    def schedule(self, name: str) -> str:
        """The HASH of one schedule (definition, payload, next due, last fired)."""
        return self.stem + "schedule:" + name

    @property
    def schedule_prefix(self) -> str:
        """What scripts prepend to a schedule name, ``{prefix}:{<queue>}:schedule:``."""
        return self.stem + "schedule:"

    @property
    def limits(self) -> str:
        """HASH of the queue's global limits (concurrency, rate, per_ms, ...)."""
        return self.stem + "limits"

    @property
    def claims(self) -> str:
        """ZSET of recent claims for the rate limit; score = claim time, ms epoch."""
        return self.stem + "claims"

    @property
    def workers(self) -> str:
        """ZSET of registered worker ids; score = when the worker's row expires, ms epoch."""
        return self.stem + "workers"

    def worker(self, worker_id: str) -> str:
        """The HASH a worker keeps alive while it runs (id, host, pid, counts; a TTL)."""
        return self.stem + "worker:" + worker_id

    @property
    def worker_prefix(self) -> str:
        """What scripts prepend to a worker id, ``{prefix}:{<queue>}:worker:``."""
        return self.stem + "worker:"

    @property
    def history_prefix(self) -> str:
        """What scripts prepend to a history bucket: ``{prefix}:{<queue>}:history:``
        (``m:<minute>`` and ``t:<ten-minute>`` HASHes of counts, expiring)."""
        return self.stem + "history:"

    def graph(self, job_id: str) -> str:
        """SET of the children of ``job_id`` still waiting for it to finish (workflows:
        docs/workflows.md); deleted when it finishes and its children are settled."""
        return self.stem + "graph:" + job_id

    @property
    def graph_prefix(self) -> str:
        """What scripts prepend to a job id to get its children's SET,
        ``{prefix}:{<queue>}:graph:`` (ids are data, so it goes in ARGV)."""
        return self.stem + "graph:"

    @property
    def releasing(self) -> str:
        """LIST of ``<how> <id>``: finished parents whose children a later claim or
        reap goes on settling (a parent with more children than one call settles)."""
        return self.stem + "releasing"

    @property
    def groups(self) -> str:
        """ZSET of the fair groups with ready jobs; score = round-robin turn (meta ``gseq``)."""
        return self.stem + "groups"

    def group(self, name: str) -> str:
        """ZSET of one group's ready ids; score = priority * 2**33 + FIFO sequence."""
        return self.stem + "group:" + name

    @property
    def group_prefix(self) -> str:
        """What scripts prepend to a group's name to get its ready ZSET,
        ``{prefix}:{<queue>}:group:`` (passed in ARGV: group names are data)."""
        return self.stem + "group:"

    @property
    def group_active(self) -> str:
        """HASH group -> leases active now (claim adds, a lease's end takes away)."""
        return self.stem + "group_active"

    @property
    def group_held(self) -> str:
        """HASH group -> 1 of groups with ready jobs taken out of the rotation at
        group_concurrency (a hash, not a set: no extra commands for an ACL user)."""
        return self.stem + "group_held"

    @property
    def unique(self) -> str:
        """HASH uniqueness key -> ``<holder id>``, or ``<holder id> <window end ms>``
        for a throttle window (``leaseq.Unique``; lua/lib/unique_holder.lua)."""
        return self.stem + "unique"

    @property
    def unique_windows(self) -> str:
        """ZSET of uniqueness keys with a throttle window; score = its end, ms epoch."""
        return self.stem + "unique_windows"

    @property
    def group_claims_prefix(self) -> str:
        """What scripts prepend to a group's name to get its ZSET of recent claim
        times (the per-group rate window; score = claim time, ms epoch; it expires
        one window after its last claim), ``{prefix}:{<queue>}:group_claims:``."""
        return self.stem + "group_claims:"

    @property
    def deadlines(self) -> str:
        """ZSET of the ids enqueued with a start-by deadline (``expires=``); score = the
        deadline, ms epoch. Claims and reaps dead-letter what is still waiting at it
        (lua/lib/expire_due.lua); an entry leaves once its time has come."""
        return self.stem + "deadlines"

    @property
    def costs(self) -> str:
        """ZSET, the queue's cost window (cost limits): one member per claim,
        ``<cost>:<claim ms>:<id>:<attempts>:<row number>`` scored by its claim time, and
        ``sum:<total>`` at +inf (lua/lib/cost_window.lua); expires one window after its
        last claim."""
        return self.stem + "costs"

    @property
    def group_costs_prefix(self) -> str:
        """What scripts prepend to a group's name to get its cost window (a ZSET like
        ``costs``), ``{prefix}:{<queue>}:group_costs:``."""
        return self.stem + "group_costs:"

    @property
    def group_rate_held(self) -> str:
        """ZSET of groups held out of the rotation at their rate; score = when they
        may claim again, ms epoch."""
        return self.stem + "group_rate_held"

    @property
    def waiters(self) -> str:
        """ZSET, score 0, of ``<signal key> <id>`` for every job waiting for a signal
        (``current_job().wait_for``): a key's waiters sort together, by id."""
        return self.stem + "waiters"

    @property
    def signals(self) -> str:
        """HASH signal key -> payload of the signals kept for later waiters (``q.signal``)."""
        return self.stem + "signals"

    @property
    def signal_ends(self) -> str:
        """ZSET of the kept signals' keys; score = until when each is kept, ms epoch."""
        return self.stem + "signal_ends"

    def index(self, state: str) -> str:
        """The index ZSET of a state (every state has exactly one), named as the state:
        ``{prefix}:{<queue>}:pending``. Its score per state is in docs/keys-and-rows.md."""
        return self.stem + state

    def indexes(self) -> dict[State, str]:
        """Every state's index ZSET, in ``State`` order."""
        return {state: self.stem + state.value for state in State}

    def __getattr__(self, name: str) -> str:
        """``keys.pending``, ``keys.dead``, ...: a state's index by the state's name, as
        the scripts' headers name it (``K.pending``) and ``Script.call`` builds it. Only
        reached for a name that is no attribute, so the other keys are unaffected."""
        if name in _STATE_NAMES:
            return self.stem + name
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @staticmethod
    def queue_pattern(prefix: str) -> str:
        """SCAN pattern that finds every queue under ``prefix`` by the keys it keeps:
        ``{prefix}:{*}:[^jhg]*``, every key of a queue but its job rows (``job:``),
        history buckets (``history:``), fair-group keys (``group...``) and
        workflow edges (``graph:``), the kinds whose number grows with jobs,
        time or groups. So a queue whose
        ``meta`` hash was deleted by hand is still found by its indexes (a job
        row is never without its index entry; a group key never without a
        ``pending`` index), and a listing reads about ten keys a queue."""
        return f"{check_queue_name(prefix, 'prefix')}:{{*}}:[^jhg]*"

    @staticmethod
    def queue_of_key(prefix: str, key: str) -> str | None:
        """The hash tag of a key found by :meth:`queue_pattern`, else None
        (``<queue>``, or ``<queue>#<shard>`` for a shard: see :func:`split_shard`).
        Neither queue names nor ids hold braces, so the tag ends at the first ``}``."""
        head = f"{prefix}:{{"
        if not key.startswith(head):
            return None
        tag, sep, rest = key[len(head) :].partition("}")
        return tag if sep and tag and rest.startswith(":") else None


MAX_SHARDS = 1024
"""Most shards one ShardedQueue may have (far beyond any cluster's masters)."""


def shard_of(job_id: str, shards: int) -> int:
    """The shard of ``job_id`` among ``shards``: CRC32 of its bytes, modulo.

    Stable across processes, versions and Python's hash randomisation, so
    every producer and consumer agrees on where an id lives (dedup by id
    depends on it). Changing the shard count moves ids: see docs/scaling.md.
    """
    return zlib.crc32(job_id.encode("ascii")) % shards


def split_shard(tag: str) -> tuple[str, int | None]:
    """``("emails", 3)`` for the tag ``emails#3``; ``("emails", None)`` for ``emails``."""
    name, sep, index = tag.rpartition("#")
    if sep and index.isdigit() and name:
        return name, int(index)
    return tag, None
