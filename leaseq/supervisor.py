"""``leaseq.Supervisor``: N worker processes for one queue (``leaseq worker --processes N``).

Threads share one GIL, so a CPU-bound handler scales with processes, not
with ``concurrency``. ``ProcessSupervisor`` starts ``processes`` children,
each the same command line, and does what follows; it knows nothing of what
they run beyond the status pipe below. ``Supervisor`` is it for ``leaseq
worker``: each child is a plain ``leaseq worker`` (the threaded worker)
started as ``python -m leaseq ... worker QUEUE module:function``: the
handler travels as its ``module:function`` spec and the URL in the
environment (``LEASEQ_URL``, so no password shows in a process list);
nothing is pickled. Django's ``manage.py leaseq_worker --processes N`` runs
``python -m django leaseq_worker ...`` children under the same class.

- A child that dies is started again, after a backoff that doubles with
  each quick death (0.5 s up to 30 s; reset once a child lived 10 s), so a
  crash loop does not spin. Its jobs come back by the normal lease expiry.
- SIGTERM or SIGINT to the supervisor is forwarded to every child: each
  stops claiming and finishes its in-flight jobs (``grace``), and the
  supervisor returns 0 once all have exited. A second signal is forwarded
  too (the children then release their jobs at once).
- A child whose handler thread runs on after its job was given up (past its
  timeout, or its job cancelled while it ran) reports it on a status pipe
  (``--status-fd``: lines ``stuck N``); the child has already failed that
  attempt ("timed out after N s") or dropped it (cancelled), and its own log
  says which. If the thread is still stuck
  ``kill_grace`` seconds later, the supervisor SIGKILLs the child (a thread
  cannot be killed; a process can) and starts a new one at once. The killed
  child's other jobs come back by lease expiry and reaping.
- With ``burst``, each child exits once the queue is empty, and the
  supervisor returns when all have (a child that exits 0 is not restarted).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.handler import check_spec
from leaseq.observe.health import HEALTH
from leaseq.store import validate as v
from leaseq.work import signals as _signals

__all__ = ["ProcessSupervisor", "Supervisor", "report_stuck", "watch_parent"]

logger = logging.getLogger("leaseq.supervisor")

RESTART_FIRST, RESTART_CAP = 0.5, 30.0
"""Seconds before restarting a child that died: doubling per quick death, capped."""
HEALTHY_AFTER = 10.0
"""A child that lived this long resets its slot's restart backoff."""
POLL = 0.1
"""Seconds between looks at the children when nothing is reported."""


@dataclass(eq=False)
class _Slot:
    index: int
    proc: subprocess.Popen[bytes] | None = None
    status: int | None = None
    """Read end of the child's status pipe."""
    buffer: bytes = b""
    started_at: float = 0.0
    restart_at: float = 0.0
    deaths: int = 0
    stuck: int = 0
    stuck_since: float | None = None
    killed: bool = False
    done: bool = False
    pids: list[int] = field(default_factory=list)


class ProcessSupervisor:
    """Run ``processes`` copies of one command line (``argv``); restart the ones
    that die, stop them all on SIGTERM/SIGINT, kill the ones whose handler runs
    on after its job was given up.

    The command must be a supervised worker: it takes ``--status-fd FD`` (added
    last, one pipe per child) and writes ``stuck N`` lines there (``report_stuck``),
    stops gracefully on SIGTERM and at once on a second one, and stops when its
    parent is gone (``watch_parent``). ``leaseq worker`` and Django's ``manage.py
    leaseq_worker`` are such commands. ``env``: variables added to this
    process's environment for the children; ``cwd``: their directory; ``name``:
    what the log lines call the work. ``kill_grace``: seconds a handler may run
    on after its job was given up (past its timeout, or cancelled) before its
    child is killed. ``burst``: a child that exits 0 is done, not restarted.
    ``run()`` returns the exit code (0 after a clean stop, or once every burst
    child is done).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        processes: int = 2,
        kill_grace: float = 5.0,
        burst: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str = "",
        handle_signals: bool = True,
    ) -> None:
        self.processes = v.integer(processes, "processes", 1, 1024)
        v.seconds_to_ms(kill_grace, "kill_grace", minimum_ms=0, maximum=v.MAX_TIMEOUT)
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
            raise InvalidArgument(f"argv must be a non-empty list of strings, not {argv!r}")
        self.argv = list(argv)
        self.env = dict(env or {})
        self.kill_grace = float(kill_grace)
        self.burst = burst
        self.handle_signals = handle_signals
        self.cwd = cwd
        self.name = name or " ".join(self.argv)
        self._slots = [_Slot(i) for i in range(self.processes)]
        self._stopping = 0
        """Signals to forward seen so far: 1 = graceful stop, 2 = stop now."""
        self._forwarded = 0
        self.restarts = 0
        """Children started again after one died or was killed."""
        self.killed = 0
        """Children SIGKILLed for a handler that ran on after its job was given up."""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ProcessSupervisor({self.argv!r}, processes={self.processes})"

    @property
    def pids(self) -> list[int]:
        """The pids of the children running now."""
        with self._lock:
            return [s.proc.pid for s in self._slots if s.proc is not None]

    def stop(self, now: bool = False) -> None:
        """Stop every child gracefully (``now``: at once); safe from any thread or
        a signal handler. ``run()`` returns once all have exited."""
        self._stopping = 2 if now else max(self._stopping, 1)

    def run(self) -> int:
        """Supervise until stopped (or, with ``burst``, until every child is done)."""
        old = _signals.install(self._on_signal, self.handle_signals)
        logger.info(
            "supervisor pid %d: %d worker processes on %s", os.getpid(), self.processes, self.name
        )
        try:
            for slot in self._slots:
                self._start(slot)
            while not all(s.done for s in self._slots):
                self._forward()
                self._read_status(POLL)
                now = time.monotonic()
                for slot in self._slots:
                    self._check(slot, now)
                alive = sum(1 for s in self._slots if s.proc is not None and s.proc.poll() is None)
                HEALTH.children(alive, self.processes)
            return 0
        finally:
            for slot in self._slots:  # only after an error: normally all are gone
                if slot.proc is not None and slot.proc.poll() is None:
                    slot.proc.kill()
                    slot.proc.wait()
                self._close(slot)
            _signals.restore(old)
            logger.info(
                "supervisor stopped (restarts=%d, killed stuck=%d)", self.restarts, self.killed
            )

    # -- children ---------------------------------------------------------------

    def _start(self, slot: _Slot) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        try:
            proc = subprocess.Popen(
                [*self.argv, "--status-fd", str(write)],
                pass_fds=(write,),
                env={**os.environ, **self.env},
                cwd=self.cwd,
                # Its own session: a terminal's Ctrl-C reaches only the supervisor,
                # which forwards one SIGTERM (two signals would mean "stop now").
                start_new_session=True,
            )
        finally:
            os.close(write)
        with self._lock:
            slot.proc, slot.status, slot.buffer = proc, read, b""
            slot.pids.append(proc.pid)
        slot.started_at = time.monotonic()
        slot.stuck, slot.stuck_since, slot.killed = 0, None, False
        logger.info("worker process %d started (pid %d)", slot.index, proc.pid)

    def _close(self, slot: _Slot) -> None:
        if slot.status is not None:
            os.close(slot.status)
            slot.status = None

    def _check(self, slot: _Slot, now: float) -> None:
        if slot.done:
            return
        proc = slot.proc
        if proc is None:  # waiting to restart
            if self._stopping:
                slot.done = True
            elif now >= slot.restart_at:
                self.restarts += 1
                self._start(slot)
            return
        code = proc.poll()
        if code is None:
            since = slot.stuck_since
            late = slot.stuck > 0 and since is not None and now - since >= self.kill_grace
            if late and not slot.killed:
                logger.warning(
                    "worker process %d (pid %d): %d handler(s) still running %.1fs after "
                    "their job was given up (its log says why): killing it",
                    slot.index,
                    proc.pid,
                    slot.stuck,
                    now - (since or now),
                )
                slot.killed = True
                self.killed += 1
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            return
        self._read_one(slot)
        self._close(slot)
        with self._lock:
            slot.proc = None
        lived = now - slot.started_at
        if self._stopping or (self.burst and code == 0 and not slot.killed):
            slot.done = True
            logger.info("worker process %d (pid %d) exited (%d)", slot.index, proc.pid, code)
            return
        if slot.killed:
            slot.deaths, delay = 0, 0.0
        else:
            slot.deaths = 1 if lived >= HEALTHY_AFTER else slot.deaths + 1
            delay = min(RESTART_CAP, RESTART_FIRST * 2 ** (slot.deaths - 1))
        slot.restart_at = now + delay
        logger.warning(
            "worker process %d (pid %d) %s after %.1fs; starting another in %.1fs",
            slot.index,
            proc.pid,
            "was killed" if slot.killed else f"exited with {code}",
            lived,
            delay,
        )

    # -- the status pipes ---------------------------------------------------------

    def _read_status(self, timeout: float) -> None:
        fds = {s.status: s for s in self._slots if s.status is not None}
        if not fds:
            time.sleep(timeout)
            return
        try:
            ready, _, _ = select.select(list(fds), [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            return
        for fd in ready:
            self._read_one(fds[fd])

    def _read_one(self, slot: _Slot) -> None:
        if slot.status is None:
            return
        try:
            data = os.read(slot.status, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # EOF: the child is gone (poll() will see it)
            self._close(slot)
            return
        slot.buffer += data
        *lines, slot.buffer = slot.buffer.split(b"\n")
        for line in lines:
            word, _, count = line.decode("ascii", "replace").partition(" ")
            if word == "stuck" and count.strip().isdigit():
                slot.stuck = int(count)
                if slot.stuck == 0:
                    slot.stuck_since = None
                elif slot.stuck_since is None:
                    slot.stuck_since = time.monotonic()

    # -- signals ----------------------------------------------------------------

    def _forward(self) -> None:
        while self._forwarded < self._stopping:
            self._forwarded += 1
            for pid in self.pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = self._stopping > 0
        logger.warning(
            "%s: stopping %d worker processes%s",
            signal.Signals(signum).name,
            self.processes,
            " now" if now else " (in-flight jobs finish first)",
        )
        self.stop(now=now)


class Supervisor(ProcessSupervisor):
    """Run ``processes`` ``leaseq worker`` children on ``queue`` with ``handler``
    (a ``module:function`` spec); restart the ones that die, stop them all on
    SIGTERM/SIGINT, kill the ones whose handler runs on after its job was given up.

    ``concurrency``, ``ttl``, ``timeout``, ``grace``, ``burst`` and ``shards``
    are each child's ``leaseq worker`` options; ``url`` and ``prefix`` say
    which Redis and keys. ``kill_grace``: seconds a handler may run on after
    its job was given up (past its timeout, or cancelled) before its child is
    killed. ``extra_args``: more ``leaseq worker`` options, passed verbatim.
    ``run()`` returns the exit code (0 after a clean stop, or once every burst
    child is done).
    """

    def __init__(
        self,
        queue: str,
        handler: str,
        *,
        processes: int = 2,
        url: str | None = None,
        prefix: str = "leaseq",
        concurrency: int = 4,
        ttl: float = 30.0,
        timeout: float | None = None,
        grace: float = 30.0,
        kill_grace: float = 5.0,
        burst: bool = False,
        shards: int | None = None,
        log_level: str = "INFO",
        extra_args: Sequence[str] = (),
        handle_signals: bool = True,
        cwd: str | None = None,
    ) -> None:
        v.integer(processes, "processes", 1, 1024)
        v.worker_settings(concurrency, ttl, grace, None)
        v.timeout_ms(timeout)
        v.seconds_to_ms(kill_grace, "kill_grace", minimum_ms=0, maximum=v.MAX_TIMEOUT)
        check_spec(handler)  # module:function, or a module of typed tasks
        self.queue = queue
        self.handler = handler
        self.url = url
        opts = ["--concurrency", str(concurrency), "--ttl", repr(float(ttl))]
        opts += ["--grace", repr(float(grace)), "--log-level", log_level]
        if timeout is not None:
            opts += ["--timeout", repr(float(timeout))]
        if burst:
            opts.append("--burst")
        if shards is not None:
            opts += ["--shards", str(shards)]
        argv = [sys.executable, "-m", "leaseq", "--prefix", prefix, "worker", queue, handler]
        super().__init__(
            [*argv, *opts, *extra_args],
            processes=processes,
            kill_grace=kill_grace,
            burst=burst,
            # In the environment, so no password shows in a process list.
            env={} if url is None else {"LEASEQ_URL": url},
            cwd=cwd,
            name=f"{queue} ({handler})",
            handle_signals=handle_signals,
        )

    def __repr__(self) -> str:
        return f"Supervisor({self.queue!r}, {self.handler!r}, processes={self.processes})"


def report_stuck(fd: int) -> Any:
    """The ``on_stuck`` hook of a supervised child: writes ``stuck N`` lines to ``fd``."""

    def hook(count: int) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone: nobody to tell
            os.write(fd, f"stuck {count}\n".encode())

    return hook


def watch_parent(stop: Any, every: float = 1.0) -> None:
    """Call ``stop()`` once this process's parent is gone (a supervisor SIGKILLed):
    an orphaned child stops gracefully instead of running on unsupervised."""
    parent = os.getppid()

    def loop() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        logger.warning("supervisor (pid %d) is gone: stopping", parent)
        stop()

    threading.Thread(target=loop, name="leaseq-parent-watch", daemon=True).start()
