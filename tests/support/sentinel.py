"""A Sentinel-managed primary for the tests: a primary, a replica and three
``redis-server --sentinel`` processes on loopback ports (no tests in here).

Sentinel's timers are set short (``down-after-milliseconds``,
``failover-timeout``) so a failover takes a second or two; every wait polls
with a deadline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

import redis

from tests.support.servers import RedisServer, free_port, server_exe, wait_until

SERVICE = "mymaster"
DATA_PASSWORD = "data-pw-Zq9"
"""``requirepass`` of the primary and the replica (the URL's userinfo)."""
SENTINEL_PASSWORD = "sentinel-pw-Kx4"
"""``requirepass`` of the Sentinels (the URL's ``sentinel_password``)."""


class Sentinels:
    """A primary, a replica and three Sentinels watching them as ``SERVICE``.

    ``down_after_ms``: how long a node may not answer before Sentinel calls it
    down. Not shorter than 1 s: on a loaded two-core machine a primary busy
    forking for a replica's full sync went quiet for 400 ms, and Sentinel
    failed it over a second time, with a split-brain window of its own.

    ``auth``: the data nodes and the Sentinels each get their own password
    (``DATA_PASSWORD``, ``SENTINEL_PASSWORD``), so a client proves it sends
    each to the right place. ``extra``: more redis-server options for the
    primary and the replica (persistence, say).
    """

    def __init__(self, *extra: str, auth: bool = True, down_after_ms: int = 1000) -> None:
        self.auth = auth
        # requirepass is set once each server is up (RedisServer pings without one).
        data_auth = ("--masterauth", DATA_PASSWORD) if auth else ()
        # A full sync starts at once, not after Redis's default 5 s of waiting
        # for more replicas.
        extra = ("--repl-diskless-sync-delay", "0", *extra)
        self.primary = RedisServer(*data_auth, *extra)
        self.replica = RedisServer(
            *data_auth, *extra, "--replicaof", "127.0.0.1", str(self.primary.port)
        )
        self.nodes = [self.primary, self.replica]
        if auth:
            for server in self.nodes:
                client = redis.Redis(port=server.port)
                client.config_set("requirepass", DATA_PASSWORD)
                client.close()
        # The Sentinels learn of replicas from the primary's INFO, read at once
        # and then every 10 s: start them once the replica is online.
        wait_until(self._replica_synced, 30, every=0.02, what="the replica to sync")
        self.dir = tempfile.mkdtemp(prefix="leaseq-sentinel-")
        self.ports = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for port in self.ports:
            conf = os.path.join(self.dir, f"sentinel-{port}.conf")
            lines = [
                f"port {port}",
                f"logfile {os.path.join(self.dir, f'sentinel-{port}.log')}",
                "bind 127.0.0.1",
                f"dir {self.dir}",
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2",
                f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}",
                f"sentinel failover-timeout {SERVICE} 3000",
                f"sentinel parallel-syncs {SERVICE} 1",
            ]
            if auth:
                lines += [f"requirepass {SENTINEL_PASSWORD}"]
                lines += [f"sentinel auth-pass {SERVICE} {DATA_PASSWORD}"]
            with open(conf, "w") as f:
                f.write("\n".join(lines) + "\n")
            self.procs.append(
                subprocess.Popen(
                    [server_exe(), conf, "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        self.wait_ready()

    # -- addresses ---------------------------------------------------------------

    def url(self, db: int = 0, *, scheme: str = "redis+sentinel", query: str = "") -> str:
        """The URL of the service's primary, with both passwords when ``auth``."""
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        user = f":{DATA_PASSWORD}@" if self.auth else ""
        options = [f"sentinel_password={SENTINEL_PASSWORD}"] if self.auth else []
        options += [query] if query else []
        tail = f"?{'&'.join(options)}" if options else ""
        return f"{scheme}://{user}{hosts}/{SERVICE}/{db}{tail}"

    def sentinel(self, i: int = 0) -> Any:
        password = SENTINEL_PASSWORD if self.auth else None
        return redis.Redis(port=self.ports[i], password=password, decode_responses=True)

    def node(self, server: RedisServer) -> Any:
        password = DATA_PASSWORD if self.auth else None
        return redis.Redis(port=server.port, password=password, socket_timeout=5)

    def primary_port(self, i: int = 0) -> int | None:
        """The primary's port as Sentinel ``i`` reports it now."""
        client = self.sentinel(i)
        try:
            addr = client.sentinel_get_master_addr_by_name(SERVICE)
        except redis.RedisError:
            return None
        finally:
            client.close()
        return int(addr[1]) if addr else None

    # -- waiting -----------------------------------------------------------------

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until every Sentinel knows the other two and the replica, and the
        replica has synced: a failover can then be voted and carried out."""

        def ready() -> bool:
            try:
                for i in range(3):
                    s = self.sentinel(i)
                    try:
                        if len(s.sentinel_sentinels(SERVICE)) < 2:
                            return False
                        replicas = s.sentinel_slaves(SERVICE)
                        if not any(r.get("master-link-status") == "ok" for r in replicas):
                            return False
                    finally:
                        s.close()
                return self._replica_synced()
            except redis.RedisError:
                return False

        wait_until(ready, timeout, every=0.05, what="the Sentinels to see each other")

    def _replica_synced(self) -> bool:
        try:
            info = self.node(self.replica).info("replication")
        except redis.RedisError:
            return False
        return bool(info.get("master_link_status") == "up")

    def wait_promoted(self, old_port: int, timeout: float = 30.0) -> int:
        """Until every Sentinel names the same primary other than ``old_port``
        and that server says it is a primary; its port. (A client that asks a
        Sentinel that has not heard yet is sent to the old address.)"""

        def promoted() -> int | None:
            ports = {self.primary_port(i) for i in range(3)}
            port = ports.pop() if len(ports) == 1 else None
            if port is None or port == old_port:
                return None
            server = next(s for s in self.nodes if s.port == port)
            try:
                role = self.node(server).info("replication").get("role")
            except redis.RedisError:
                return None
            return port if role == "master" else None

        return int(wait_until(promoted, timeout, every=0.02, what="a new primary"))

    def wait_replica_of(
        self, server: RedisServer, primary_port: int, timeout: float = 30.0
    ) -> None:
        """Until ``server`` replicates ``primary_port`` with its link up (after a
        ``SENTINEL FAILOVER``, Sentinel demotes the old primary at its next INFO,
        up to ~10 s later)."""

        def synced() -> bool:
            try:
                info = self.node(server).info("replication")
            except redis.RedisError:
                return False
            return bool(
                info.get("role") == "slave"
                and int(info.get("master_port", 0)) == primary_port
                and info.get("master_link_status") == "up"
            )

        wait_until(synced, timeout, every=0.05, what="the old primary to replicate the new one")

    def switches(self) -> int:
        """How many times Sentinel 0 has switched the service to a new primary
        (its log's ``+switch-master`` lines): one per failover it saw."""
        log = os.path.join(self.dir, f"sentinel-{self.ports[0]}.log")
        try:
            with open(log) as f:
                return sum("+switch-master" in line for line in f)
        except OSError:
            return 0

    def rejoin(self, server: RedisServer, primary_port: int) -> None:
        """Start a killed node again as the replica of ``primary_port``, as an
        operator brings a failed primary back (it comes back empty: no
        persistence). Never as a primary: an empty primary on the old address
        would take the writes of any client that still asks a stale Sentinel."""
        if "--replicaof" not in server.args:
            server.args += ["--replicaof", "127.0.0.1", str(primary_port)]
        server.start()
        if self.auth:
            client = redis.Redis(port=server.port)
            client.config_set("requirepass", DATA_PASSWORD)
            client.close()

    def server(self, port: int) -> RedisServer:
        return next(s for s in self.nodes if s.port == port)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for server in self.nodes:
            server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
