"""Another client's view of a Redis server while something else works it: a
``PING`` every millisecond from a separate process (``probing``), and the
server's own ``SLOWLOG`` of the calls that held it (``watching``).

Standard library and redis-py only, and nothing imported from ``bench`` or
``leaseq`` at import: ``bench.guard`` loads this file by path into processes
whose leaseq is another revision's, and into huey's side.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import redis

SLOW_US = 250
"""SLOWLOG threshold while watching: calls under it are not logged."""
HOLD_TARGET_US = 2000
"""No call may hold a shared server longer: the hold-time target."""


def _probe(url: str, stop: Any, out: Any) -> None:
    r = redis.Redis.from_url(url)
    r.ping()
    lat: list[float] = []
    tick = time.perf_counter()
    while not stop.is_set():
        t0 = time.perf_counter()
        r.ping()
        lat.append(time.perf_counter() - t0)
        tick += 0.001
        pause = tick - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        else:
            tick = time.perf_counter()
    out.send(lat)


class Probe(NamedTuple):
    p50: float
    p99: float
    max: float
    n: int


@contextmanager
def probing(url: str, into: list[Probe], cpus: set[int] | None = None) -> Iterator[None]:
    """Ping ``url`` every ms from another process (on ``cpus``, if given) while
    the block runs."""
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    mine, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_probe, args=(url, stop, theirs), daemon=True)
    proc.start()
    if cpus is not None and proc.pid is not None:
        os.sched_setaffinity(proc.pid, cpus)
    try:
        yield
    finally:
        stop.set()
        lat = sorted(mine.recv())
        proc.join(10)
    if lat:
        into.append(
            Probe(
                lat[len(lat) // 2] * 1e3,
                lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
                lat[-1] * 1e3,
                len(lat),
            )
        )


# -- SLOWLOG ------------------------------------------------------------------------


def script_names() -> dict[str, str]:
    """SHA -> leaseq script name (empty where leaseq is not importable: huey's side)."""
    try:
        from leaseq.store.scripts import SCRIPTS
    except ImportError:
        return {}

    names = {}
    for name, script in SCRIPTS.items():
        names[script.sha] = name
        if script.plain_sha:
            names[script.plain_sha] = name
    return names


class Holds(NamedTuple):
    longest_us: int
    over: int
    slowest: str
    calls_over_1ms: int
    by_script: dict[str, tuple[int, int]]
    """script -> (calls over 2 ms, longest µs)"""


def holds(r: redis.Redis, names: dict[str, str]) -> Holds:
    """Read and sum up the SLOWLOG since it was reset: leaseq's calls only."""
    longest, over, over_1, slowest = 0, 0, 0, ""
    by: dict[str, tuple[int, int]] = {}
    for entry in r.slowlog_get(1_000_000):
        cmd = entry["command"].split(b" ")
        verb = cmd[0].upper()
        if verb in (b"PING", b"SLOWLOG", b"CONFIG", b"INCR", b"FLUSHALL"):
            continue
        what = verb.decode()
        if verb in (b"EVALSHA", b"EVALSHA_RO") and len(cmd) > 1:
            what = names.get(cmd[1].decode(), what)
        us = int(entry["duration"])
        n, top = by.get(what, (0, 0))
        by[what] = (n + (us > HOLD_TARGET_US), max(top, us))
        over += us > HOLD_TARGET_US
        over_1 += us > 1000
        if us > longest:
            longest, slowest = us, what
    return Holds(longest, over, slowest, over_1, by)


@contextmanager
def watching(r: redis.Redis, into: list[Holds]) -> Iterator[None]:
    """SLOWLOG from ``SLOW_US`` while the block runs; its sum appended to ``into``."""
    names = script_names()
    r.config_set("slowlog-log-slower-than", SLOW_US)
    r.config_set("slowlog-max-len", 1_000_000)
    r.slowlog_reset()
    try:
        yield
    finally:
        into.append(holds(r, names))
        r.config_set("slowlog-log-slower-than", 10_000)
