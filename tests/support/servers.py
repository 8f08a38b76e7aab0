"""redis-server processes for the tests: the binary, a free loopback port,
a server in a temp dir (no tests in here).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

import redis

_PORTS = random.Random()  # seeded from the OS: parallel passes draw apart
LOW_PORTS = (20_000, 32_000)
"""Where free_port looks: below Linux's ephemeral range (32768-60999 by default).
A port the kernel picks for bind(0) comes from that range, which is also where
every outgoing connection's local port comes from: under CI's parallel passes
one was taken by a client's connect between the pick and the server's bind."""


def free_port() -> int:
    """A loopback port nothing is bound to now, for a server about to bind it."""
    for _ in range(200):
        port = _PORTS.randrange(*LOW_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # that range is full: let the kernel pick
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    every: float = 0.005,
    what: str = "condition",
) -> Any:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def server_exe() -> str:
    """The redis-server (or valkey-server) binary the tests run: ``LEASEQ_REDIS_SERVER``
    or the one on PATH. Raises RuntimeError if there is none."""
    chosen = os.environ.get("LEASEQ_REDIS_SERVER", "")
    exe = shutil.which(chosen or "redis-server")
    if exe is None:
        if chosen:
            raise RuntimeError(f"LEASEQ_REDIS_SERVER={chosen!r} is not an executable")
        raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
    return exe


def cli_exe() -> str | None:
    """The CLI matching :func:`server_exe` (``LEASEQ_REDIS_CLI``, else a
    redis-cli or valkey-cli beside the server, else redis-cli on PATH)."""
    chosen = os.environ.get("LEASEQ_REDIS_CLI", "")
    if chosen:
        return shutil.which(chosen)
    try:
        here = os.path.dirname(server_exe())
    except RuntimeError:
        return None
    for name in ("redis-cli", "valkey-cli"):
        beside = os.path.join(here, name)
        if os.access(beside, os.X_OK):
            return beside
    return shutil.which("redis-cli")


def server_version() -> str:
    """``redis_version`` as the binary reports it, e.g. 'Redis 7.0.15' or 'Valkey 8.1.8'."""
    out = subprocess.run(
        [server_exe(), "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    name, _, rest = out.partition(" server v=")
    return f"{name} {rest.split()[0]}" if rest else out.strip()


class RedisServer:
    """A redis-server process on 127.0.0.1 and a free port, in a temp dir."""

    def __init__(self, *extra: str) -> None:
        exe = server_exe()
        self.dir = tempfile.mkdtemp(prefix="leaseq-redis-")
        self.port = free_port()
        self.args = [
            exe,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            self.dir,
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(up, 10, what="redis-server to start")
        client.close()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def replicated() -> tuple[RedisServer, RedisServer]:
    """A primary and one replica of it, synced, on free loopback ports (the
    caller stops both)."""
    primary = RedisServer("--repl-diskless-sync-delay", "0")  # sync at once
    replica = RedisServer("--replicaof", "127.0.0.1", str(primary.port))
    client = redis.Redis(port=replica.port)
    wait_until(
        lambda: client.info("replication").get("master_link_status") == "up",
        15,
        what="the replica to sync",
    )
    client.close()
    return primary, replica
