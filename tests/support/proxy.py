"""A small TCP proxy on loopback for partition tests (no tests in here).

``Proxy(port)`` forwards 127.0.0.1:<proxy.port> to 127.0.0.1:<port>. Its
``mode`` says what the network does now:

- ``pass``: forwards both ways;
- ``drop``: a partition: open connections are cut (reset) and new ones are
  closed as soon as they are accepted;
- ``stall``: nothing moves either way (bytes wait in the kernel's buffers)
  until the mode changes back: a slow or frozen link;
- ``drop_replies``: the client's commands reach the server, its replies are
  thrown away: the command ran, the reply was lost.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time

MODES = ("pass", "drop", "stall", "drop_replies")


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.mode = "pass"
        self.replies_dropped = 0
        self._conns: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, query: str = "") -> str:
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    def set(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        if mode == "drop":
            with self._lock:
                conns, self._conns = self._conns, []
            for pair in conns:
                for sock in pair:
                    _close(sock)

    def close(self) -> None:
        self._closed = True
        self.set("drop")
        _close(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.mode == "drop":
                _close(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._conns.append((client, server))
            for src, dst, replies in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, replies), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                if self.mode == "stall":
                    time.sleep(0.005)
                    continue
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready:
                    continue
                if self.mode == "stall":
                    continue
                data = src.recv(65536)
                if not data:
                    break
                if replies and self.mode == "drop_replies":
                    self.replies_dropped += 1
                    continue
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            _close(src)
            _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
