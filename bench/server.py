"""A throwaway redis-server on a free 127.0.0.1 port, no persistence unless asked."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

from tests.support.servers import free_port, server_exe


def machine(r: redis.Redis) -> str:
    """One line naming what a figure was measured on: cores, server, client."""
    try:
        import hiredis

        parser = f"hiredis {hiredis.__version__}"
    except ImportError:
        parser = "no hiredis"
    return (
        f"{os.cpu_count()} CPUs, redis-server {r.info('server')['redis_version']} on 127.0.0.1 "
        f"(no persistence), Python {platform.python_version()}, redis-py {redis.__version__}, "
        f"{parser}"
    )


class Server:
    """Starts redis-server in a temp dir; a context manager that always stops it.
    ``extra``: more server arguments (they come last, so they override the
    defaults: ``"--appendonly", "yes"`` for a server that outlives a SIGKILL)."""

    def __init__(self, *extra: str) -> None:
        try:
            exe = server_exe()  # $LEASEQ_REDIS_SERVER picks another build (Valkey)
        except RuntimeError as exc:
            raise SystemExit(f"bench: {exc}") from None
        self.dir = tempfile.mkdtemp(prefix="leaseq-bench-")
        self.port = free_port()
        self.args = [exe, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir]
        self.args += ["--save", "", "--appendonly", "no", "--protected-mode", "yes", *extra]
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        give_up = time.monotonic() + 10
        while True:
            try:
                if self.client().ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > give_up:
                    self.stop()
                    raise
                time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A new redis-py client (hiredis parser when installed)."""
        return redis.Redis(host="127.0.0.1", port=self.port)

    def crash(self, cut_aof_to: int | None = None) -> None:
        """SIGKILL the server (no shutdown save: only what its AOF holds survives)
        and start it again on the same port and directory.

        ``cut_aof_to``: first cut the AOF the server was appending to back to
        this many bytes (an ``aof_size`` read earlier): what a power cut does to
        the writes the kernel had not yet flushed to the disk. (The server
        loads a last command cut in half, or a transaction, by dropping it:
        ``aof-load-truncated``, on by default.)"""
        self.proc.kill()
        self.proc.wait()
        if cut_aof_to is not None:
            tail = self.aof_tail()
            if tail is None:
                raise RuntimeError("no AOF to cut: the server runs without appendonly")
            os.truncate(tail, cut_aof_to)
        self._start()

    def aof_tail(self) -> Path | None:
        """The AOF file the server appends to (Redis 7's multi-part AOF: the last
        ``type i`` file of its manifest; before, the one file); None without one."""
        folder = Path(self.dir) / "appendonlydir"
        for manifest in folder.glob("*.manifest"):
            tails = [
                line.split()[1] for line in manifest.read_text().splitlines()
                if line.split()[-2:] == ["type", "i"]
            ]  # fmt: skip
            return folder / tails[-1] if tails else None
        single = Path(self.dir) / "appendonly.aof"
        return single if single.exists() else None

    def aof_size(self) -> int:
        """The length of ``aof_tail`` now, in bytes."""
        tail = self.aof_tail()
        if tail is None:
            raise RuntimeError("no AOF: the server runs without appendonly")
        return tail.stat().st_size

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
