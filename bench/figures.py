"""Each figure of the benchmark, measured for leaseq, the baseline and the raw ceiling.

Every function takes a fresh-able redis client and a ``Size`` and returns
plain numbers (medians of ``timing.REPEATS`` trials). The database is
flushed between figures so one figure's leftovers never slow another.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import leaseq
from bench import baseline
from bench.timing import interleaved, median_rate, rate

TRIVIAL = "return 1"
TTL = 3600.0
"""Leases in the benchmark never expire while it runs."""


@dataclass(frozen=True)
class Size:
    """How much work each figure does (``--quick`` shrinks it)."""

    single: int = 5000
    """Calls per trial of the one-by-one figures."""
    bulk: int = 100_000
    """Jobs per trial of enqueue_many and of the claim_many loop."""
    backlog: int = 1_000_000
    """Pending jobs behind the in-flight scan."""
    in_flight: tuple[int, ...] = (0, 1000, 10_000, 100_000)
    steady_budget: float = 0.4
    """Seconds per trial of a steady-state point (at most ``single`` pairs)."""
    memory_jobs: int = 100_000


QUICK = Size(single=2000, bulk=30_000, backlog=150_000, steady_budget=0.15)


def queue(r: Any, name: str = "bench", **settings: Any) -> leaseq.Queue:
    q = leaseq.Queue(name, redis=r, **settings)
    q.stats()  # the first call checks the server's config; keep it out of the timing
    return q


def payloads(n: int, start: int = 0) -> list[dict[str, int]]:
    return [{"i": i} for i in range(start, start + n)]


# -- raw ceilings ---------------------------------------------------------------


def ceilings(r: Any, size: Size) -> dict[str, float]:
    """EVALSHA of a trivial one-key script: calls/s unpipelined and 32 deep."""
    sha = r.script_load(TRIVIAL)
    n = size.single

    def one() -> float:
        evalsha = r.evalsha
        return rate(n, lambda: [evalsha(sha, 1, "k") for _ in range(n)])

    def piped() -> float:
        def go() -> None:
            pipe = r.pipeline(transaction=False)
            for _ in range(n * 4 // 32):
                for _ in range(32):
                    pipe.evalsha(sha, 1, "k")
                pipe.execute()

        return rate(n * 4 // 32 * 32, go)

    return {"evalsha": median_rate(one), "evalsha_pipe32": median_rate(piped)}


# -- enqueue --------------------------------------------------------------------


def enqueue_one(r: Any, size: Size) -> dict[str, float]:
    """Jobs/s enqueued one call at a time; ``ceiling``: trivial EVALSHA calls/s,
    measured in turns with the other two."""
    n = size.single
    q = queue(r)
    sha = r.script_load(TRIVIAL)

    def leaseq_trial() -> float:
        return rate(n, lambda: [q.enqueue({"i": i}) for i in range(n)])

    def ceiling() -> float:
        return rate(n, lambda: [r.evalsha(sha, 1, "k") for _ in range(n)])

    def flush() -> None:
        r.flushall()
        r.script_load(TRIVIAL)

    return interleaved(
        {
            "leaseq": (flush, leaseq_trial),
            "baseline": (flush, lambda: rate(n, lambda: baseline.enqueue(r, n))),
            "ceiling": (None, ceiling),
        }
    )


def enqueue_many(r: Any, size: Size) -> dict[str, float]:
    """Jobs/s through the bulk path (payloads built before the clock starts)."""
    n = size.bulk
    q = queue(r)
    items = payloads(n)
    return interleaved(
        {
            "leaseq": (lambda: _reset(r), lambda: rate(n, lambda: q.enqueue_many(items))),
            "baseline": (lambda: _reset(r), lambda: rate(n, lambda: baseline.enqueue_bulk(r, n))),
        }
    )


# -- claim + complete ------------------------------------------------------------


def batch_loop(r: Any, size: Size, batch: int = 500) -> dict[str, float]:
    """Jobs/s of a loop of claim_many(batch) + complete_many until the queue is empty."""
    n = size.bulk
    q = queue(r)

    def fill() -> None:
        _reset(r)
        q.enqueue_many(payloads(n))

    def drain() -> None:
        done = 0
        while True:
            leases = q.claim_many(batch, ttl=TTL)
            if not leases:
                break
            if q.complete_many(leases):
                raise RuntimeError("a lease was lost in the benchmark")
            done += len(leases)
        if done != n:
            raise RuntimeError(f"drained {done} of {n}")

    def base_fill() -> None:
        r.flushall()
        baseline.enqueue_bulk(r, n)

    def base_drain() -> None:
        while baseline.batch_cycle(r, batch):
            pass

    return interleaved(
        {
            "leaseq": (fill, lambda: rate(n, drain)),
            "baseline": (base_fill, lambda: rate(n, base_drain)),
        }
    )


def single_pair(r: Any, size: Size) -> dict[str, float]:
    """Pairs/s of one claim then one complete, unpipelined, on a small queue;
    ``ceiling``: pairs of trivial EVALSHA calls per second, measured in turns."""
    n = size.single
    q = queue(r)

    def fill() -> None:
        _reset(r)
        q.enqueue_many(payloads(n))

    def pairs() -> None:
        for _ in range(n):
            lease = q.claim(ttl=TTL)
            assert lease is not None
            q.complete(lease)

    def base_fill() -> None:
        r.flushall()
        baseline.enqueue_bulk(r, n)

    def base_pairs() -> None:
        for _ in range(n):
            job = baseline.claim(r)
            assert job is not None
            baseline.complete(r, job)

    sha = r.script_load(TRIVIAL)

    def ceiling() -> float:
        return rate(n, lambda: [r.evalsha(sha, 1, "k") for _ in range(2 * n)])

    return interleaved(
        {
            "leaseq": (fill, lambda: rate(n, pairs)),
            "baseline": (base_fill, lambda: rate(n, base_pairs)),
            "ceiling": (lambda: r.script_load(TRIVIAL), ceiling),
        }
    )


# -- flat with load ----------------------------------------------------------------


class _LeaseqSteady:
    """``k`` leases stay held: each step claims one and completes the oldest
    (FIFO, as ``k`` equal workers would), like ``baseline.Steady``."""

    def __init__(self, q: leaseq.Queue) -> None:
        self.q = q
        self.held: deque[leaseq.Lease] = deque()

    def hold(self, in_flight: int) -> None:
        while len(self.held) < in_flight:
            got = self.q.claim_many(min(1000, in_flight - len(self.held)), ttl=TTL)
            if not got:
                raise RuntimeError("leaseq ran out of pending jobs")
            self.held.extend(got)

    def step(self) -> None:
        lease = self.q.claim(ttl=TTL)
        if lease is None:
            raise RuntimeError("leaseq ran out of pending jobs")
        self.held.append(lease)
        self.q.complete(self.held.popleft())


def _steady_trial(step: Callable[[], None], size: Size) -> Callable[[], float]:
    """A trial: ``step`` (one pair) repeated for ``size.steady_budget`` s, as pairs/s."""

    def trial() -> float:
        n = 0
        start = time.perf_counter()
        deadline = start + size.steady_budget
        while n < size.single and (n < 50 or time.perf_counter() < deadline):
            step()
            n += 1
        return n / (time.perf_counter() - start)

    return trial


def in_flight_scan(r: Any, size: Size) -> dict[str, dict[int | str, float]]:
    """µs per claim+complete pair: on an empty queue ('empty'), then with
    ``size.backlog`` pending and each of ``size.in_flight`` jobs held. Both
    designs live in the same database and are measured in turns."""
    out: dict[str, dict[int | str, float]] = {
        "leaseq": {},
        "baseline": {},
        "leaseq_server": {},
        "baseline_server": {},
    }
    spare = size.single * 3 * (len(size.in_flight) + 1)
    q = queue(r)

    def both(point: int | str, lq: Callable[[], None], base: Callable[[], None]) -> None:
        r.config_resetstat()
        got = interleaved(
            {
                "leaseq": (None, _steady_trial(lq, size)),
                "baseline": (None, _steady_trial(base, size)),
            }
        )
        for who, per_second in got.items():
            out[who][point] = 1e6 / per_second
        # Server time per pair (INFO commandstats): the scripts' own cost, far
        # less noisy than wall time on a shared machine.
        st = r.info("commandstats")
        ev, lrem = st.get("cmdstat_evalsha", {}), st.get("cmdstat_lrem", {})
        out["leaseq_server"][point] = ev.get("usec", 0) / max(ev.get("calls", 0) / 2, 1)
        base_us = lrem.get("usec", 0) + st.get("cmdstat_lmove", {}).get("usec", 0)
        out["baseline_server"][point] = base_us / max(lrem.get("calls", 0), 1)

    _reset(r)
    q.enqueue_many(payloads(spare))
    baseline.enqueue_bulk(r, spare)
    both("empty", _LeaseqSteady(q).step, baseline.Steady(r).step)

    _reset(r)
    _fill_leaseq(q, size.backlog + max(size.in_flight) + spare)
    baseline.enqueue_bulk(r, size.backlog + max(size.in_flight) + spare)
    steady, base = _LeaseqSteady(q), baseline.Steady(r)
    for k in sorted(size.in_flight):
        steady.hold(k)
        base.hold(k)
        both(k, steady.step, base.step)
    r.flushall()
    return out


def _fill_leaseq(q: leaseq.Queue, n: int) -> None:
    for start in range(0, n, 100_000):
        q.enqueue_many(payloads(min(100_000, n - start), start))


# -- memory --------------------------------------------------------------------------


def memory(r: Any, size: Size) -> dict[str, Any]:
    """Bytes of used_memory per pending job, and what a drained queue keeps."""
    n = size.memory_jobs
    items = payloads(n)
    q = queue(r, "mem")
    _reset(r)
    q.enqueue({"i": -1})  # the fixed keys (meta, pending) exist before the count starts
    before = _used(r)
    ids = q.enqueue_many(items)
    per_job = (_used(r) - before) / n
    one = q.keys.job(ids[0])
    row = r.memory_usage(one)
    encoding = r.object("encoding", one)
    pending_per_job = r.memory_usage(q.keys.pending, samples=0) / (n + 1)

    r.flushall()
    baseline.enqueue(r, 1)
    before = _used(r)
    baseline.enqueue_bulk(r, n)
    base_per_job = (_used(r) - before) / n

    r.flushall()
    d = queue(r, "drained", keep_succeeded=0)
    d.enqueue_many(payloads(1000))
    while leases := d.claim_many(500, ttl=TTL):
        d.complete_many(leases)
    stem = d.keys.stem
    left = sorted(k.decode()[len(stem) :] for k in r.scan_iter(match=_glob(stem) + "*"))
    r.flushall()
    return {
        "leaseq": per_job,
        "baseline": base_per_job,
        "row_bytes": row,
        "row_encoding": encoding.decode() if isinstance(encoding, bytes) else encoding,
        "pending_entry_bytes": pending_per_job,
        "drained_keys": left,
    }


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _used(r: Any) -> int:
    return int(r.info("memory")["used_memory"])


def _reset(r: Any) -> None:
    r.flushall()
