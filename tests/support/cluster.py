"""A throwaway 3-master Redis Cluster on free 127.0.0.1 ports (no tests in here).

Used by tests/transport/ (cluster, sharded, read timeouts) and bench/cluster_bench.py
style runs: three ``redis-server --cluster-enabled yes`` in temp dirs, joined
by ``redis-cli --cluster create``, ready once every node reports
``cluster_state:ok``. ``stop()`` kills the processes and removes the dirs.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import subprocess
import tempfile
import time

import redis

from tests.support.servers import cli_exe, free_port, server_exe, wait_until


class Cluster:
    """Three cluster-enabled masters, no replicas. Raises RuntimeError if redis is missing."""

    def __init__(self, masters: int = 3) -> None:
        server, cli = server_exe(), cli_exe()  # LEASEQ_REDIS_SERVER picks the build
        if cli is None:
            raise RuntimeError("redis-cli is needed for the cluster tests")
        self.ports: list[int] = []
        while len(self.ports) < masters:
            port = cluster_port()
            if port not in self.ports:
                self.ports.append(port)
        self.dirs = [tempfile.mkdtemp(prefix="leaseq-cluster-") for _ in self.ports]
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for port, where in zip(self.ports, self.dirs, strict=True):
                args = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", where]
                args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
                args += ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
                self.procs.append(
                    subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
            for port in self.ports:
                wait_until(lambda p=port: _ping(p), 10, what=f"cluster node {port}")
            nodes = [f"127.0.0.1:{p}" for p in self.ports]
            subprocess.run(
                [cli, "--cluster", "create", *nodes, "--cluster-yes"],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=30,
            )
            wait_until(self._ready, 30, every=0.05, what="cluster_state:ok on every node")
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        for port in self.ports:
            client = redis.Redis(port=port)
            try:
                if client.cluster("info").get("cluster_state") != "ok":
                    return False
            finally:
                client.close()
        return True

    def client(self) -> redis.cluster.RedisCluster:
        return redis.cluster.RedisCluster(host="127.0.0.1", port=self.ports[0])

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for where in self.dirs:
            shutil.rmtree(where, ignore_errors=True)


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


def _ping(port: int) -> bool:
    client = redis.Redis(port=port, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


if __name__ == "__main__":  # a quick manual check: python -m tests.support.cluster
    started = time.monotonic()
    c = Cluster()
    print("ports", c.ports, f"ready in {time.monotonic() - started:.2f} s")
    c.stop()
