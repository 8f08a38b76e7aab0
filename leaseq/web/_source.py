"""What the dashboard reads and does, over the public Queue API only.

``Source`` finds the queues under a prefix (SCAN of meta keys, cached for a
while so a refreshing page never walks the keyspace each time), hands out a
``Queue`` or ``ShardedQueue`` per name, and runs operator actions. Nothing
here formats a key except through ``Queue.keys``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from leaseq.errors import (
    DamagedKey,
    DamagedRow,
    InvalidArgument,
    JobNotFound,
    JobStateError,
    ScriptError,
)
from leaseq.queue import Queue
from leaseq.sharded import ShardedQueue, known_queues, stats_many
from leaseq.store import filters as _filters
from leaseq.store.events import Event, parse_entry
from leaseq.store.filters import FoundPage, JobFilter, Mark
from leaseq.store.history import History
from leaseq.store.registry import WorkerInfo
from leaseq.store.sharded_ops import merge_stats
from leaseq.store.steps import Op
from leaseq.transport import client as _redis
from leaseq.transport.drive import drive_many
from leaseq.types import Job, State, Stats
from leaseq.work.tasks import adopt_tasks

__all__ = ["SCAN_LIMIT", "Found", "Source"]

SCAN_LIMIT = 10_000
ACTIVE_READ = 500
"""Active rows per queue the workers page reads to show what each worker runs."""
GROUPS_SHOWN = 200
"""Fair groups the limits page lists per queue (the busiest first)."""
EVENTS_READ = 500
"""Newest event-stream entries the events page reads per shard (10 transitions each at most)."""
HISTORY_ENTRIES = 2_000
"""Event-stream entries a job page reads, newest first (10 transitions each at most)."""
"""Most rows one substring search reads (it says how many of how many)."""
SEARCH_PAGE = 500
DAMAGED = (DamagedKey, ScriptError)
"""What a queue's keys edited by hand raise: shown for that queue, not for the page."""
MAX_MATCHES = 100
LIVELIEST_READ = 200
"""Most queues the events page looks at for the one with the newest event
(one pipelined read each; past that, the first by name)."""

Target = Queue | ShardedQueue


@dataclass(frozen=True, slots=True)
class Found:
    """A substring search's outcome: the matches and how much it read."""

    jobs: list[Job]
    scanned: int
    total: int
    damaged: int


@dataclass(frozen=True, slots=True)
class Trail:
    """A job's transitions found in the newest part of its queue's event stream."""

    events: list[Event]
    """Oldest first."""
    scanned: int
    """Entries read (at most HISTORY_ENTRIES)."""
    total: int
    """Entries the stream holds."""
    enabled: bool


class Source:
    """The queues of one Redis client under one prefix."""

    def __init__(
        self,
        redis: Any,
        prefix: str = "leaseq",
        rescan: float = 30.0,
        tasks: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.rescan = rescan
        self.tasks = tasks or {}
        """Typed tasks by queue name: the queues made here check edits by them."""
        self._lock = threading.Lock()
        self._names: dict[str, int] = {}
        self._scanned_at = float("-inf")
        self._targets: dict[tuple[str, int], Target] = {}
        self._stats_calls: dict[str, Any] = {}

    # -- finding queues ---------------------------------------------------------

    def names(self, fresh: bool = False) -> dict[str, int]:
        """``{queue: shards}`` (0 for a plain queue), by SCAN at most every ``rescan`` s."""
        with self._lock:
            if fresh or time.monotonic() - self._scanned_at > self.rescan:
                self._names = known_queues(self.redis, self.prefix)
                self._scanned_at = time.monotonic()
            return dict(self._names)

    def queue(self, name: str, known: dict[str, int] | None = None) -> Target:
        """The queue named ``name``; InvalidArgument when there is none. ``known``:
        a ``names()`` already read (a loop over thousands of queues reads it once)."""
        shards = (known if known is not None else self.names()).get(name)
        if shards is None:
            shards = self.names(fresh=True).get(name)
        if shards is None:
            raise InvalidArgument(f"no queue named {name!r} under prefix {self.prefix!r}")
        # Kept: a queue object is cheap to use but not to make 5,000 times a page.
        target = self._targets.get((name, shards))
        if target is None:
            if shards:
                target = ShardedQueue(name, shards=shards, redis=self.redis, prefix=self.prefix)
            else:
                target = Queue(name, redis=self.redis, prefix=self.prefix)
            self._targets[(name, shards)] = adopt_tasks(target, self.tasks)
        return target

    def each_queue(
        self, op: Callable[[Target], Op[Any]], only: Iterable[str] | None = None
    ) -> dict[str, Any]:
        """``{queue: the result of its operation op}`` (``stats``, ``history``,
        ``workers``...) for every queue (or those in ``only``), all pipelined
        together (a few round trips however many queues); a failure is in the
        dict as its error."""
        known = self.names()
        targets = []
        for name in sorted(known if only is None else set(only) & set(known)):
            targets.append(self.queue(name, known))
        found = drive_many(self.redis, [(t, op(t)) for t in targets])
        return {t.name: result for t, result in zip(targets, found, strict=True)}

    def stats(self, target: Target) -> Stats:
        """The queue's stats; a sharded queue is paused when any shard is."""
        got: Stats = target._drive(_stats_op(target))
        return got

    def overview(self) -> list[Stats]:
        return self.overview_checked()[0]

    def overview_checked(self) -> tuple[list[Stats], dict[str, str]]:
        """Every queue's stats, and ``{queue: why not}`` for those whose keys were
        damaged by hand (a key of the wrong type, a counter that is not a number):
        one such queue must not take the page, or /metrics, away from the rest.
        A sharded queue is paused when any shard is."""
        out, broken = [], {}
        known = self.names()
        targets = [self.queue(name, known) for name in sorted(known)]
        plain = [t for t in targets if not isinstance(t, ShardedQueue)]
        got_plain = stats_many(self.redis, plain, self._stats_calls)
        found = dict(zip([t.name for t in plain], got_plain, strict=True))
        sharded = [t.name for t in targets if isinstance(t, ShardedQueue)]
        if sharded:
            found.update(self.each_queue(_stats_op, sharded))
        for name in sorted(found):
            got = found[name]
            if isinstance(got, DAMAGED):
                broken[name] = _redis.redact(str(got))
            elif isinstance(got, Exception):
                raise got
            else:
                out.append(got)
        return out, broken

    def histories(self, only: Iterable[str] | None = None) -> list[History]:
        """Every queue's (or those in ``only``) history buckets (no writes); a
        queue whose buckets were damaged by hand is left out."""
        found = self.each_queue(lambda t: t._ops.history(), only)
        return [h for h in found.values() if isinstance(h, History)]

    def workers(self, only: Iterable[str] | None = None) -> dict[str, list[WorkerInfo]]:
        """``{queue: its live workers}`` for every queue (or those in ``only``); a
        queue whose registry was damaged by hand is left out."""
        found = self.each_queue(lambda t: t._ops.workers(), only)
        return {n: ws for n, ws in found.items() if isinstance(ws, list)}

    def current_jobs(self, names: Iterable[str], limit: int = ACTIVE_READ) -> dict[str, list[Job]]:
        """``{worker id: the active jobs it holds}`` over the queues ``names``: the
        first ``limit`` active rows of each (read by rank through the index)."""
        held: dict[str, list[Job]] = {}
        known = self.names()
        for name in names:
            if name not in known:
                continue
            try:
                jobs = self.queue(name, known).ls("active", limit=limit, damaged=[])
            except DAMAGED:
                continue
            for job in jobs:
                held.setdefault(job.worker or "", []).append(job)
        return held

    def groups(self, target: Target, limit: int = GROUPS_SHOWN) -> list[dict[str, Any]]:
        """A queue's fair groups (every shard's): per group its ready jobs, its
        active leases and whether it is held at ``group_concurrency``; the
        ``limit`` groups with the most work first."""
        found: dict[str, dict[str, Any]] = {}
        for part in self.parts(target):
            k = part.keys
            with _redis.translate_errors():
                ready = self.redis.zrange(k.groups, 0, limit - 1)
                active = self.redis.hgetall(k.group_active)
                held = self.redis.hgetall(k.group_held)
                names = (
                    {_text(n) for n in ready}
                    | {_text(n) for n in active}
                    | {_text(n) for n in held}
                )
                names_list = sorted(names)[: limit * 2]
                pipe = self.redis.pipeline(transaction=False)
                for n in names_list:
                    pipe.zcard(k.group(n))
                sizes = pipe.execute(raise_on_error=False) if names_list else []
            act = {_text(n): _int(v) for n, v in active.items()}
            hold = {_text(n) for n in held}
            for n, size in zip(names_list, sizes, strict=True):
                g = found.setdefault(n, {"name": n, "ready": 0, "active": 0, "held": False})
                g["ready"] += size if isinstance(size, int) else 0
                g["active"] += act.get(n, 0)
                g["held"] = g["held"] or n in hold
        ordered = sorted(found.values(), key=lambda g: (-(g["ready"] + g["active"]), g["name"]))
        return ordered[:limit]

    def liveliest(self, limit: int = LIVELIEST_READ) -> str:
        """The queue whose event stream has the newest entry (stream ids are the
        server's ms): what the events page opens on. One pipelined ``XREVRANGE
        COUNT 1`` per queue (every shard), of the first ``limit`` names; ''
        for none, or none with events."""
        known = self.names()
        names = sorted(known)[:limit]
        keys: list[tuple[str, str]] = []
        for name in names:
            keys += [(name, p.keys.events) for p in self.parts(self.queue(name, known))]
        with _redis.translate_errors():
            pipe = self.redis.pipeline(transaction=False)
            for _, key in keys:
                pipe.xrevrange(key, "+", "-", count=1)
            got = pipe.execute(raise_on_error=False) if keys else []
        newest: dict[str, tuple[int, int]] = {}
        for (name, _), entries in zip(keys, got, strict=True):
            if isinstance(entries, list) and entries:
                ms, _, seq = _text(entries[0][0]).partition("-")
                newest[name] = max(newest.get(name, (0, 0)), (int(ms), int(seq or 0)))
        return max(newest, key=lambda n: newest[n]) if newest else ""

    def kinds(self, target: Target, ids: Iterable[str]) -> dict[str, str]:
        """``{job id: its kind}`` ('' for none, or a row that is gone), one
        pipelined ``HGET`` per job."""
        wanted = sorted(set(ids))
        with _redis.translate_errors():
            pipe = self.redis.pipeline(transaction=False)
            for job_id in wanted:
                part = target.shard_for(job_id) if isinstance(target, ShardedQueue) else target
                pipe.hget(part.keys.job(job_id), "kind")
            got = pipe.execute(raise_on_error=False) if wanted else []
        return {
            i: _text(k) if isinstance(k, (bytes, str)) else ""
            for i, k in zip(wanted, got, strict=True)
        }

    def newest_events(
        self, target: Target, limit: int, job_id: str = "", state: str = "", kind: str = ""
    ) -> list[Event]:
        """The newest ``limit`` transitions of a queue (every shard's, merged by
        time), optionally only of one job, into one state, or of jobs of one
        kind (read from their rows); a bounded read of the newest
        ``EVENTS_READ`` stream entries per shard."""
        out: list[Event] = []
        for part in self.parts(target):
            with _redis.translate_errors():
                if self.redis.type(part.keys.events) not in (b"stream", "stream"):
                    continue
                entries = self.redis.xrevrange(part.keys.events, "+", "-", count=EVENTS_READ)
            for entry_id, fields in entries:
                try:
                    events = parse_entry(_text(entry_id), fields)
                except (ValueError, KeyError, TypeError):
                    continue
                for e in events:
                    if job_id and e.job_id != job_id:
                        continue
                    if state and (e.to_state.value if e.to_state else "deleted") != state:
                        continue
                    out.append(e)
        out.sort(key=lambda e: (e.at, e.stream_id, e.index), reverse=True)
        if kind:
            of = self.kinds(target, (e.job_id for e in out))
            out = [e for e in out if of.get(e.job_id) == kind]
        return out[:limit]

    def fire(self, target: Target, schedule: str) -> str:
        """Enqueue one job of the schedule ``schedule`` now, as its next due time
        would (payload, max_attempts, priority), leaving its timetable as it is;
        the new job's id. InvalidArgument when the queue has no such schedule."""
        for s in target.schedules():
            if s.name == schedule:
                return target.enqueue(s.payload, max_attempts=s.max_attempts, priority=s.priority)
        raise InvalidArgument(f"no schedule named {schedule!r} on {target.name}")

    def server(self) -> dict[str, Any]:
        """What the server says about itself (INFO), for the server page."""
        with _redis.translate_errors():
            info: dict[str, Any] = dict(self.redis.info())
        return info

    # -- reading jobs -------------------------------------------------------------

    @staticmethod
    def parts(target: Target) -> list[Queue]:
        return list(target.shards) if isinstance(target, ShardedQueue) else [target]

    def holder(self, target: Target, job_id: str) -> Queue:
        """The plain queue (the shard, for a sharded one) whose keys hold ``job_id``."""
        for part in self.parts(target):
            with _redis.translate_errors():
                if self.redis.exists(part.keys.job(job_id)):
                    return part
        raise JobNotFound(job_id)

    def row(self, target: Target, job_id: str) -> tuple[dict[str, str], Job | None, str]:
        """The stored row of a job (every field, as text), the typed Job (None when
        the row will not read), and why it will not. JobNotFound for no row."""
        part = self.holder(target, job_id)
        with _redis.translate_errors():
            raw = self.redis.hgetall(part.keys.job(job_id))
        if not isinstance(raw, dict):
            raw = {}
        text = {_text(k): _text(v) for k, v in raw.items()}
        try:
            return text, part.get(job_id), ""
        except DamagedRow as exc:
            return text, None, str(exc)

    def trail(self, target: Target, job_id: str, entries: int = HISTORY_ENTRIES) -> Trail:
        """``job_id``'s transitions in the newest ``entries`` entries of the event
        stream of the queue (the shard) holding it: a bounded read, however long
        the stream, that says how much of it it covered."""
        part = self.holder(target, job_id)
        key = part.keys.events
        with _redis.translate_errors():
            settings = part.event_settings()
            if self.redis.type(key) not in (b"stream", "stream"):
                return Trail([], 0, 0, settings.enabled)  # none yet, or damaged by hand
            newest = self.redis.xrevrange(key, "+", "-", count=entries)
        found: list[Event] = []
        for entry_id, fields in reversed(newest):
            try:
                events = parse_entry(_text(entry_id), fields)
            except (ValueError, KeyError, TypeError):
                continue  # an entry written by hand: not ours to read
            found += [e for e in events if e.job_id == job_id]
        return Trail(found, len(newest), settings.entries, settings.enabled)

    def search(self, target: Target, needle: str, limit: int = SCAN_LIMIT) -> Found:
        """Jobs whose id, payload or last_error contain ``needle``: a bounded read of
        at most ``limit`` rows, page by page through the state indexes."""
        s = self.stats(target)
        total = sum(s.counts().values())
        jobs: list[Job] = []
        scanned = damaged_count = 0
        for job in self._walk(target, limit):
            if job is None:
                damaged_count += 1
                scanned += 1
                continue
            scanned += 1
            if len(jobs) < MAX_MATCHES and _matches(job, needle):
                jobs.append(job)
        return Found(jobs, scanned, max(total, scanned), damaged_count)

    def _walk(self, target: Target, limit: int) -> Iterator[Job | None]:
        read = 0
        for state in State:
            offset = 0
            while read < limit:
                damaged: list[DamagedRow] = []
                page = target.ls(
                    state, offset=offset, limit=min(SEARCH_PAGE, limit - read), damaged=damaged
                )
                if not page and not damaged:
                    break
                yield from page
                for _ in damaged:
                    yield None
                got = len(page) + len(damaged)
                read += got
                offset += got

    def find(
        self,
        target: Target,
        state: str,
        flt: JobFilter,
        mark: Mark | None,
        want: int,
        budget: int,
        *,
        now_ms: int,
        acting: bool = False,
    ) -> FoundPage:
        """The next ``want`` jobs of ``state`` that match ``flt`` from ``mark`` on,
        looking at ``budget`` index entries at most (``leaseq.store.filters``)."""
        cores = [part._core for part in self.parts(target)]
        op = _filters.find_page(
            cores, state, flt, mark, want=want, budget=budget, acting=acting, now_ms=now_ms
        )
        found: FoundPage = target._drive(op)
        return found

    def in_range(self, target: Target, state: str, flt: JobFilter, now_ms: int) -> int:
        """How many entries of ``state``'s index a find with ``flt`` walks over."""
        cores = [part._core for part in self.parts(target)]
        got: int = target._drive(_filters.count_in_range(cores, state, flt, now_ms))
        return got

    def act_on(
        self, target: Target, found: FoundPage, act: Callable[[Queue, str], Op[Any]]
    ) -> tuple[int, dict[str, str]]:
        """Run ``act(part, id)`` (an operation of the part that holds the job) on
        every job ``found``, pipelined together; (how many worked, ``{id: why
        not}`` for the refused)."""
        parts = self.parts(target)
        pairs = zip(found.parts, found.jobs, strict=True)
        work = [(parts[i], act(parts[i], job.id)) for i, job in pairs]
        got = drive_many(self.redis, work) if work else []
        refused = {
            job.id: str(result)
            for job, result in zip(found.jobs, got, strict=True)
            if isinstance(result, Exception)
        }
        return len(work) - len(refused), refused

    # -- actions --------------------------------------------------------------------

    def pause(self, target: Target, on: bool) -> bool:
        done = [part.pause() if on else part.resume() for part in self.parts(target)]
        return any(done)

    def delete(self, target: Target, job_id: str) -> str:
        return self.holder(target, job_id).delete(job_id)

    def limits(self, target: Target) -> Any:
        """A plain queue's limits (None for a sharded one, which has none)."""
        if isinstance(target, ShardedQueue):
            return None
        with _redis.translate_errors():
            return target.limits()

    def retry(self, target: Target, job_id: str) -> int:
        return self.holder(target, job_id).retry_dead(job_id)

    def run_now(self, target: Target, job_id: str) -> None:
        self.holder(target, job_id).run_now(job_id)

    def cancel(self, target: Target, job_id: str) -> bool:
        return self.holder(target, job_id).cancel(job_id)

    def each(self, ids: list[str], act: Any) -> tuple[int, list[str]]:
        """Run ``act(id)`` on every id; (how many worked, one line per refusal)."""
        ok, refused = 0, []
        for job_id in ids:
            try:
                act(job_id)
                ok += 1
            except (JobNotFound, JobStateError, DamagedRow, InvalidArgument) as exc:
                refused.append(str(exc))
        return ok, refused


def _stats_op(target: Target) -> Op[Stats]:
    """A queue's stats; a sharded queue's summed, and paused when any shard is."""
    if not isinstance(target, ShardedQueue):
        got: Stats = yield from target._ops.stats()
        return got
    parts: list[Stats] = yield from target._ops.shard_stats()
    merged = merge_stats(target.name, parts)
    paused = [p.paused_at for p in parts if p.paused]
    if not paused:
        return merged
    return msgspec.structs.replace(
        merged, paused=True, paused_at=min(t for t in paused if t is not None)
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _matches(job: Job, needle: str) -> bool:
    if needle in job.id or (job.last_error and needle in job.last_error):
        return True
    try:
        text = json.dumps(job.payload, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(job.payload)
    return needle in text
