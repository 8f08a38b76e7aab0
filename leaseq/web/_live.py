"""Live pages by push: one thread reads the queues' event streams with a
blocking ``XREAD`` and tells every open page whose queues moved.

However many browser tabs are open, the dashboard process holds **one**
blocking read (``XREAD BLOCK`` over the event streams of every queue, in
chunks of ``STREAMS_PER_READ``), not a poll per tab per second. A page
subscribes (``/live?queue=NAME``, Server-Sent Events) and gets an event
``moved`` naming the queues with new transitions; it then fetches its live
part once (at most every ``MIN_GAP`` seconds). A queue whose events are off
never moves the stream, so for it ``/live`` answers ``poll`` and the page
polls as before.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from leaseq.errors import LeaseqError
from leaseq.transport import client as _redis

__all__ = ["Hub"]

STREAMS_PER_READ = 1000
"""Event streams one XREAD watches (more queues: one read per chunk in turn)."""
BLOCK_MS = 2000
"""How long one XREAD waits for a new entry before it looks at the queues again."""
log = logging.getLogger("leaseq.web")


class Hub:
    """The one reader of a dashboard process, started by the first subscriber."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._subs: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Queue[set[str]], str]] = {}
        self._thread: threading.Thread | None = None
        self._cursors: dict[str, str] = {}
        self.reads = 0
        """XREAD calls made so far (a test checks it does not grow with tabs)."""

    def subscribe(self, queue: str) -> tuple[int, asyncio.Queue[set[str]]]:
        """A new page's inbox: sets of queue names that moved ('' = any queue)."""
        inbox: asyncio.Queue[set[str]] = asyncio.Queue(maxsize=100)
        loop = asyncio.get_running_loop()
        with self._lock:
            token = id(inbox)
            self._subs[token] = (loop, inbox, queue)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="leaseq-live", daemon=True)
                self._thread.start()
        return token, inbox

    def unsubscribe(self, token: int) -> None:
        with self._lock:
            self._subs.pop(token, None)

    def _streams(self) -> dict[str, str]:
        """``{event stream key: queue name}`` of every queue (every shard)."""
        out: dict[str, str] = {}
        for name in self.source.names():
            try:
                target = self.source.queue(name)
            except LeaseqError:
                continue
            for part in self.source.parts(target):
                out[part.keys.events] = name
        return out

    def _run(self) -> None:
        redis = self.source.redis
        while True:
            with self._lock:
                if not self._subs:
                    self._thread = None
                    return
            streams = self._streams()
            keys = sorted(streams)
            if not keys:
                time.sleep(BLOCK_MS / 1000)
                continue
            for key in keys:
                if key not in self._cursors:
                    self._cursors[key] = self._newest(redis, key)
            for start in range(0, len(keys), STREAMS_PER_READ):
                self._read(redis, keys[start : start + STREAMS_PER_READ], len(keys), streams)

    def _read(self, redis: Any, chunk: list[str], total: int, streams: dict[str, str]) -> None:
        """One blocking XREAD of ``chunk``'s streams (its share of ``BLOCK_MS`` over
        ``total`` streams); tells the pages whose queues moved."""
        wait = BLOCK_MS / 1000 / (total // STREAMS_PER_READ + 1)
        block = max(1, int(_redis.wake_timeout(redis, wait) * 1000))
        try:
            self.reads += 1
            got = redis.xread({k: self._cursors[k] for k in chunk}, count=100, block=block)
        except Exception as exc:  # down, or a stream key damaged: try again soon
            log.debug("live: XREAD failed (%s); again in a moment", exc)
            time.sleep(1.0)
            return
        moved = set()
        for key, entries in _pairs(got):
            name = key.decode() if isinstance(key, bytes) else str(key)
            if entries:
                last = entries[-1][0]
                self._cursors[name] = last.decode() if isinstance(last, bytes) else last
                moved.add(streams.get(name, ""))
        if moved:
            self._tell(moved)

    @staticmethod
    def _newest(redis: Any, key: str) -> str:
        try:
            newest = redis.xrevrange(key, "+", "-", count=1)
        except Exception:  # not a stream (yet, or damaged): read from the start
            return "0-0"
        if not newest:
            return "0-0"
        entry = newest[0][0]
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    def _tell(self, moved: set[str]) -> None:
        with self._lock:
            subs = list(self._subs.values())
        for loop, inbox, queue in subs:
            if queue and queue not in moved:
                continue
            try:
                loop.call_soon_threadsafe(_offer, inbox, moved)
            except RuntimeError:  # its loop closed: the page went
                continue


def _offer(inbox: asyncio.Queue[set[str]], moved: set[str]) -> None:
    if not inbox.full():
        inbox.put_nowait(moved)


def _pairs(reply: Any) -> list[tuple[Any, list[Any]]]:
    """XREAD's reply as (stream, entries) pairs: RESP2 gives ``[[name, entries]]``,
    RESP3 ``{name: [entries]}`` (or one more level of nesting)."""
    if not reply:
        return []
    if not isinstance(reply, dict):
        return [(k, v) for k, v in reply]
    out = []
    for key, entries in reply.items():
        nested = entries and isinstance(entries[0], list) and isinstance(entries[0][0], list)
        out.append((key, entries[0] if nested else entries))
    return out
