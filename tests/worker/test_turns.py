"""The worker core's own calls take turns (leaseq.work.turns; docs/workers.md,
"One call at a time"): another client waits behind one script of a worker,
not two. A turn is a courtesy: a call stuck on its connection holds no other
call back past ``TURN_WAIT``, and a wait for a wake-up never takes a turn."""

from __future__ import annotations

import functools
import inspect
import threading
import time
from typing import Any

import pytest

from leaseq.work import turns
from leaseq.work.turns import OneAtATime
from tests.support import handlers
from tests.support.drivers import Driver

CORE_CALLS = ("claim_now", "complete_many", "extend_many", "fail", "release", "reap", "tick")
"""The script calls the worker core makes for itself."""


class Overlaps:
    """``queue`` (sync or ``aio``), counting how many of its ``CORE_CALLS`` are in
    flight at once: ``most`` is the largest such count seen, ``calls`` how many ran."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self._lock = threading.Lock()
        self.now = self.most = self.calls = 0

    def _enter(self) -> None:
        with self._lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)

    def _leave(self) -> None:
        with self._lock:
            self.now -= 1

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._queue, name)
        if name not in CORE_CALLS:
            return attr
        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            async def counted_async(*args: Any, **kwargs: Any) -> Any:
                self._enter()
                try:
                    return await attr(*args, **kwargs)
                finally:
                    self._leave()

            return counted_async

        @functools.wraps(attr)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._enter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._leave()

        return counted


def test_a_draining_worker_never_has_two_calls_on_the_server(
    live_driver: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long turn wait: on a loaded box a call may take past TURN_WAIT (50 ms), and
    # then the next goes without its turn by design; here every call must wait it.
    monkeypatch.setattr(turns, "TURN_WAIT", 30.0)
    q = live_driver.q
    ids = q.enqueue_many([{"i": i} for i in range(3_000)])
    seen: list[Overlaps] = []

    def wrap(queue: Any) -> Overlaps:
        seen.append(Overlaps(queue))
        return seen[0]

    live_driver.worker(handlers.noop, wrap=wrap, concurrency=4).run(burst=True)
    assert q.stats().succeeded == len(ids)
    # Claims and completions both ran many times, each alone on the server.
    assert seen[0].calls > 10
    assert seen[0].most == 1


class Stuck:
    """A queue whose ``claim_now`` hangs until ``go`` is set; ``complete_many``
    and ``wait_for_wake`` return at once."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.entered = threading.Event()

    def claim_now(self) -> str:
        self.entered.set()
        self.go.wait(30)
        return "claimed"

    def complete_many(self) -> str:
        return "completed"

    def wait_for_wake(self) -> str:
        return "woken"


def test_a_stuck_call_holds_the_others_back_no_longer_than_a_turn_wait() -> None:
    stuck = Stuck()
    calls = OneAtATime(stuck)
    claimer = threading.Thread(target=calls.claim_now, daemon=True)
    claimer.start()
    assert stuck.entered.wait(10)
    # The claim holds the turn and does not come back: the reporter's write goes
    # anyway once it has waited TURN_WAIT, and the wait for a wake-up at once.
    began = time.monotonic()
    assert calls.wait_for_wake() == "woken"
    assert calls.complete_many() == "completed"
    assert time.monotonic() - began < 2.0  # not the 30 s the claim hangs
    stuck.go.set()
    claimer.join(10)
    assert not claimer.is_alive()


def test_calls_take_turns_and_a_turn_is_free_again_after_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "TURN_WAIT", 30.0)  # the order below, however slow the box
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    class Queue:
        def claim_now(self) -> None:
            order.append("claim in")
            inside.set()
            release.wait(10)
            order.append("claim out")
            raise RuntimeError("the claim failed")

        def complete_many(self) -> None:
            order.append("complete")

    calls = OneAtATime(Queue())
    failed: list[BaseException] = []

    def claim() -> None:
        try:
            calls.claim_now()
        except RuntimeError as exc:
            failed.append(exc)

    claimer = threading.Thread(target=claim, daemon=True)
    claimer.start()
    assert inside.wait(10)
    calling = threading.Event()

    def complete() -> None:
        calling.set()
        calls.complete_many()

    reporter = threading.Thread(target=complete, daemon=True)
    reporter.start()
    assert calling.wait(10)
    # The completion waits for the claim's turn to end.
    release.set()
    claimer.join(10)
    reporter.join(10)
    assert order == ["claim in", "claim out", "complete"]
    assert len(failed) == 1
    # The failed call gave its turn back: the next one runs at once.
    began = time.monotonic()
    calls.complete_many()
    assert time.monotonic() - began < 2.0  # not TURN_WAIT's 30 s
