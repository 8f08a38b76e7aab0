"""The worker core's own calls to its queue, made one at a time.

A worker's claimer and reporter are two threads on two connections. Each
sends a script call of up to a time budget (``lua/lib/over_budget.lua``);
when both have one waiting as the server turns to its clients, another
client's command waits behind both: measured, another client's p99 during a
drain fell from ~1.5 to ~1.2 ms when they took turns, at the same drain
speed (the server runs one script at a time anyway, so a call waiting for
the other's turn loses nothing the server could have given it).
docs/workers.md, "One call at a time".

Only the core's bookkeeping takes turns: claims, outcomes, heartbeats,
chores. The waits for a wake-up (``wait_for_wake``, ``nudge``) never do:
a blocked wait must not hold back a completion. A handler's own calls
(``current_job().progress``, its steps) go straight to the queue.

A turn is a courtesy, never a wait on the other thread's fate: a call waits
at most ``TURN_WAIT`` (50 ms) for it and then goes anyway. A call stuck on a
connection that stopped answering (a half-open socket, a stalled failover)
must not stop the reporter's releases and heartbeats on its own connection,
nor a stop.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["OneAtATime"]

WAITS = frozenset({"wait_for_wake", "nudge"})
"""Methods that wait (or wake a waiter): called as they are, never in turn."""
TURN_WAIT = 0.05
"""Longest a call waits for its turn (seconds). In a drain on loopback 85% of
the core's calls found the turn free, and the waits of all were p90 4 ms,
p99 10 ms (a turn's holder waits for the GIL behind the handler threads). Measured in turns
(``bench.neighbour --split``, 50,000 jobs), another client's p99 during the
drain: 0.89-0.99 ms at 50 ms, 0.98-1.04 at 20, 1.03-1.17 at 5. A worker far
from its server loses little to it: its claims run ahead of its handlers by
the prefetch (~50 ms of work), and a completion written a round trip later
is only later. And a call stuck on a dead connection holds no other back
for longer than this."""


class OneAtATime:
    """``calls`` (a queue, a set, or an ``aio`` one run from threads) whose
    methods run one at a time across threads, but for ``WAITS``."""

    def __init__(self, calls: Any) -> None:
        self.calls = calls
        self._turn = threading.Lock()

    def __repr__(self) -> str:
        return repr(self.calls)

    def __getattr__(self, name: str) -> Any:
        # Read at each call, not kept: a method patched on the queue is the one called.
        attr = getattr(self.calls, name)
        if name in WAITS or not callable(attr):
            return attr
        turn = self._turn

        def in_turn(*args: Any, **kwargs: Any) -> Any:
            mine = turn.acquire(timeout=TURN_WAIT)
            try:
                return attr(*args, **kwargs)
            finally:
                if mine:
                    turn.release()

        return in_turn
