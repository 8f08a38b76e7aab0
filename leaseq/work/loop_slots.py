"""Handler slots on an event loop: ``aio.Worker`` with ``async def`` handlers only.

A handler thread that waits for its coroutine on another thread's loop costs
two thread switches a job (measured: half the drain of a worker whose slots
live on the loop). So when every handler ``aio.Worker`` may call is ``async
def``, the engine starts no handler threads: its ``concurrency`` slots are
here, on the caller's loop. A slot takes the next lease from the engine's
work queue, runs its handler as a task, hands the outcome to the engine
(``JobRuns.finish``: the reporter writes it, as for a thread) and takes the
next one, all on the loop; the claimer only kicks the loop once per claim.
The job is begun and finished by the engine's own steps (``Engine.begin``,
``JobRuns.finish``), so a slot decides nothing a handler thread would not.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue as queue_mod
from typing import TYPE_CHECKING, Any

from leaseq.errors import LeaseqError
from leaseq.handler import _set_current_task, all_async
from leaseq.work.held import Task

if TYPE_CHECKING:
    from leaseq.work.engine import Engine, Inbox

__all__ = ["LoopSlots"]


class LoopSlots:
    """``engine``'s handler slots on ``loop`` (see the module doc). ``running``
    counts the jobs whose handler has not ended, across runs: a handler that
    swallowed its cancel keeps its slot in the next run too."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self.engine = engine
        self.loop = loop
        self.running = 0
        self._work: Inbox | None = None
        self._done: Inbox | None = None

    @classmethod
    def for_run(
        cls, engine: Engine, slots: LoopSlots | None, work: Inbox, done: Inbox
    ) -> LoopSlots | None:
        """The slots of ``engine``'s run (``slots``: its last run's, kept while the
        loop is the same), serving ``work`` and ``done``; None when the engine has
        no loop or a handler is not ``async def``: handler threads run them."""
        if engine.loop is None or not all_async(engine.handler):
            return None
        if slots is None or slots.loop is not engine.loop:
            slots = cls(engine, engine.loop)
        slots.serve(work, done)
        return slots

    def serve(self, work: Inbox, done: Inbox) -> None:
        """A run begins: take leases from ``work``, put the finished on ``done``."""
        self._work, self._done = work, done

    def kick(self) -> None:
        """Leases were put on the work queue (any thread): fill the free slots."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
            self.loop.call_soon_threadsafe(self._fill)

    def _fill(self) -> None:
        work, done = self._work, self._done
        if work is None or done is None:
            return
        while self.running < self.engine.concurrency:
            try:
                task = work.get_nowait()
            except queue_mod.Empty:
                return
            if task is None or not self.engine.begin(task, done):
                continue
            self.running += 1
            job = self.loop.create_task(self._job(task, done))
            task.on_interrupt(functools.partial(self._cancel, job))
            job.add_done_callback(functools.partial(self._ended, task, done))

    async def _job(self, task: Task, done: Inbox) -> None:
        _set_current_task(task.ctx)  # this task's own context: current_job()
        engine = self.engine
        told = engine.runs.told(task)
        raised: BaseException | None = None
        value: Any = None
        try:
            ctx = task.ctx
            if task.prefetched and engine.starts.needs_gate(task):  # recorded first
                await asyncio.to_thread(engine.starts.gate, task)
            ctx.raise_if_lost()  # lost meanwhile: not run; its outcome is not written
            if ctx.lease.attempt > 1 and ctx.aqueue is not None:  # sleep() reads no I/O
                try:
                    ctx._steps = await ctx.aqueue.recorded_steps(ctx.lease)
                except LeaseqError as exc:  # read again by astep; a sleep raises it
                    ctx._unread = exc
            value = engine.handler(ctx.lease)
            if value is not None:
                value = await value
        except BaseException as exc:  # a cancel, SystemExit: this job's end, not the loop's
            raised = exc
        engine.runs.finish(task, done, raised, value, told)

    def _cancel(self, job: asyncio.Task[None]) -> None:
        # From the reporter's thread: a task is cancelled on its own loop.
        with contextlib.suppress(RuntimeError):  # the loop is closed: the task is over
            self.loop.call_soon_threadsafe(job.cancel)

    def _ended(self, task: Task, done: Inbox, job: asyncio.Task[None]) -> None:
        self.running -= 1
        if job.cancelled():  # before its first step: the handler never ran
            self.engine.runs.finish(task, done, asyncio.CancelledError(), None, None)
        elif (exc := job.exception()) is not None:  # a bug of the engine's own steps
            self.engine.runs.bug(exc)
        self._fill()
