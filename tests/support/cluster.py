"""A throwaway Redis Cluster on free 127.0.0.1 ports (no tests in here).

Used by tests/transport/ (cluster, sharded, read timeouts), bench/cluster_bench.py
and the cluster faults of bench/faults.py: ``masters`` ``redis-server
--cluster-enabled yes`` (and ``replicas`` replicas of each) in temp dirs,
joined by ``redis-cli --cluster create``, ready once every node reports
``cluster_state:ok`` (and every replica has synced). ``stop()`` kills the
processes by their PIDs and removes the dirs.

For failovers: ``kill`` and ``restart`` a node by port, ``cut`` a replica's
link to its master (it can no longer authenticate, so it falls behind),
``wait_promoted`` and ``wait_replica_of``; a replica takes over by itself
after ``node_timeout_ms`` once its master is gone, or at once by ``CLUSTER
FAILOVER`` sent to it.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

import redis

from tests.support.servers import cli_exe, free_port, server_exe, wait_until

PASSWORD = "cluster-pw-Hq3"
"""``requirepass`` and ``masterauth`` of a cluster made with ``auth=True``."""


@dataclass(frozen=True)
class Node:
    """One line of ``CLUSTER NODES``: a node as the cluster sees it."""

    id: str
    port: int
    master: bool
    failed: bool
    master_id: str | None
    slots: int


class Cluster:
    """``masters`` cluster-enabled masters with ``replicas`` replicas each.
    Raises RuntimeError if redis is missing.

    ``node_timeout_ms``: how long a node may not answer before the others
    call it failed and its replica takes over (Redis's default is 15 s).
    ``auth``: every node requires ``PASSWORD`` (clients too); the replicas
    use it as ``masterauth``, which is what ``cut`` takes away."""

    def __init__(
        self,
        masters: int = 3,
        *,
        replicas: int = 0,
        node_timeout_ms: int = 15000,
        auth: bool = False,
    ) -> None:
        server, cli = server_exe(), cli_exe()  # LEASEQ_REDIS_SERVER picks the build
        if cli is None:
            raise RuntimeError("redis-cli is needed for the cluster tests")
        self.password = PASSWORD if auth else None
        self.replicas_wanted = masters * replicas
        """How many replicas a whole cluster has (a killed node's replica, promoted,
        has none until the node is back)."""
        self.ports: list[int] = []
        while len(self.ports) < masters * (1 + replicas):
            port = cluster_port()
            if port not in self.ports:
                self.ports.append(port)
        self.dirs = {p: tempfile.mkdtemp(prefix="leaseq-cluster-") for p in self.ports}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.args: dict[int, list[str]] = {}
        for port, where in self.dirs.items():
            args = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", where]
            args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
            args += ["--cluster-node-timeout", str(node_timeout_ms)]
            args += ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
            # A replica's full sync starts at once, not after 5 s of waiting for more.
            args += ["--repl-diskless-sync-delay", "0"]
            if self.password:
                args += ["--requirepass", self.password, "--masterauth", self.password]
            self.args[port] = args
        try:
            for port in self.ports:
                self.start(port)
            create = [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports)]
            create += ["--cluster-replicas", str(replicas), "--cluster-yes"]
            create += ["-a", self.password, "--no-auth-warning"] if self.password else []
            subprocess.run(
                create,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=30,
            )
            wait_until(self._ready, 30, every=0.05, what="cluster_state:ok on every node")
        except BaseException:
            self.stop()
            raise

    # -- nodes -------------------------------------------------------------------

    def node(self, port: int, timeout: float = 5.0) -> redis.Redis:
        """A plain client of one node (the caller closes it)."""
        return redis.Redis(port=port, password=self.password, socket_timeout=timeout)

    def client(self) -> redis.cluster.RedisCluster:
        return redis.cluster.RedisCluster(
            host="127.0.0.1", port=self.ports[0], password=self.password
        )

    def live(self) -> list[int]:
        """The ports of the nodes whose process runs."""
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def nodes(self, port: int | None = None) -> list[Node]:
        """The cluster as node ``port`` (default: the first live one) sees it."""
        client = self.node(self.live()[0] if port is None else port)
        try:
            # "CLUSTER", "NODES" apart: redis-py has no parser for it then.
            text = client.execute_command("CLUSTER", "NODES")
        finally:
            client.close()
        if isinstance(text, bytes):
            text = text.decode()
        return [_node(line) for line in text.splitlines() if line.strip()]

    def masters(self) -> list[int]:
        """The ports of the masters that serve slots, as the first live node sees it."""
        return [n.port for n in self.nodes() if n.master and n.slots and not n.failed]

    def replica_of(self, master_port: int) -> int:
        """The port of a replica of the master on ``master_port``."""
        nodes = self.nodes()
        master = next(n for n in nodes if n.port == master_port)
        return next(n.port for n in nodes if n.master_id == master.id)

    # -- faults ------------------------------------------------------------------

    def start(self, port: int) -> None:
        self.procs[port] = subprocess.Popen(
            self.args[port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_until(lambda: _ping(port, self.password), 10, what=f"cluster node {port}")

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` (by its PID)."""
        proc = self.procs[port]
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self, port: int) -> None:
        """Start a killed node again from its dir, as an operator restarts a crashed
        process: it comes back empty (no persistence) with its ``nodes.conf``, and
        the cluster makes it a replica of whoever took its slots."""
        self.start(port)

    def cut(self, replica_port: int) -> None:
        """Cut the replication link of the replica on ``replica_port``: it forgets
        the password it authenticates to its master with and drops the link, so it
        cannot resync; its master's writes from now on reach it no more."""
        client = self.node(replica_port)
        try:
            client.config_set("masterauth", "not-the-password")
            client.client_kill_filter(_type="master")
        finally:
            client.close()

    def mend(self, port: int) -> None:
        """Give the node on ``port`` its ``masterauth`` back (after ``cut``)."""
        client = self.node(port)
        try:
            client.config_set("masterauth", self.password or "")
        finally:
            client.close()

    def failover(self, replica_port: int) -> None:
        """``CLUSTER FAILOVER`` on the replica: its master hands over its slots once
        the replica has caught up (no acknowledged write is lost)."""
        client = self.node(replica_port)
        try:
            client.execute_command("CLUSTER FAILOVER")
        finally:
            client.close()

    def wait_promoted(self, port: int, timeout: float = 30.0) -> None:
        """Until the node on ``port`` serves slots as a master in every live node's
        view, and every live node says ``cluster_state:ok``."""

        def promoted() -> bool:
            try:
                for live in self.live():
                    me = next(n for n in self.nodes(live) if n.port == port)
                    if not (me.master and me.slots):
                        return False
                return self._state_ok()
            except (redis.RedisError, StopIteration):
                return False

        wait_until(promoted, timeout, every=0.05, what=f"node {port} to be promoted")

    def wait_replica_of(self, port: int, master_port: int, timeout: float = 30.0) -> None:
        """Until the node on ``port`` replicates ``master_port`` with its link up."""

        def synced() -> bool:
            client = self.node(port)
            try:
                info = client.info("replication")
            except redis.RedisError:
                return False
            finally:
                client.close()
            return bool(
                info.get("role") == "slave"
                and int(info.get("master_port", 0)) == master_port
                and info.get("master_link_status") == "up"
            )

        wait_until(synced, timeout, every=0.05, what=f"node {port} to replicate {master_port}")

    def _ready(self) -> bool:
        """Every live node says ``cluster_state:ok`` and knows every replica, and
        every replica has synced with its master."""
        try:
            for port in self.live():
                client = self.node(port)
                try:
                    info = client.info("replication")
                finally:
                    client.close()
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
                seen = self.nodes(port)
                if sum(1 for n in seen if not n.master and not n.failed) < self.replicas_wanted:
                    return False
        except redis.RedisError:
            return False
        return self._state_ok()

    def _state_ok(self) -> bool:
        """Every live node says ``cluster_state:ok``."""
        for port in self.live():
            client = self.node(port)
            try:
                if client.cluster("info").get("cluster_state") != "ok":
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for where in self.dirs.values():
            shutil.rmtree(where, ignore_errors=True)


def _node(line: str) -> Node:
    fields = line.split()
    flags = fields[2].split(",")
    slots = 0
    for part in fields[8:]:
        if part.startswith("["):
            continue  # a slot being migrated
        low, _, high = part.partition("-")
        slots += int(high or low) - int(low) + 1
    return Node(
        id=fields[0],
        port=int(fields[1].split("@")[0].rsplit(":", 1)[1]),
        master="master" in flags,
        failed="fail" in flags or "fail?" in flags,
        master_id=None if fields[3] == "-" else fields[3],
        slots=slots,
    )


_shared: Cluster | None = None


def shared_cluster() -> Cluster:
    """One cluster for the whole test session, whichever module asks first;
    stopped when the interpreter exits. Raises RuntimeError if redis is missing."""
    global _shared
    if _shared is None:
        _shared = Cluster()
        atexit.register(_shared.stop)
    return _shared


def cluster_port() -> int:
    """A free port P whose cluster bus port P + 10000 is free and valid too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def _ping(port: int, password: str | None = None) -> bool:
    client = redis.Redis(port=port, password=password, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


if __name__ == "__main__":  # a quick manual check: python -m tests.support.cluster
    started = time.monotonic()
    c = Cluster(replicas=1, node_timeout_ms=1000, auth=True)
    print("ports", c.ports, f"ready in {time.monotonic() - started:.2f} s")
    print(c.nodes())
    c.stop()
