"""A supervisor under test as a real process: ``leaseq worker --processes`` or
``manage.py leaseq_worker --processes``. Its stderr goes to a log file; its
children are read from /proc; it is killed with its children at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.support import ROOT
from tests.support.servers import wait_until

__all__ = ["Supervised", "children"]


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (from /proc; zombies left out)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


class Supervised:
    """One supervisor process: ``run(argv)`` starts it; ``log``, ``kids``,
    ``kids_when`` and ``exits`` watch it; ``close`` kills it and its children."""

    def __init__(self, prefix: str = "leaseq-sup-") -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix=prefix, suffix=".log")[1])

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        session: bool = False,
    ) -> subprocess.Popen[bytes]:
        with self.log_path.open("wb") as err:
            self.proc = subprocess.Popen(
                list(argv),
                cwd=ROOT,
                env=None if env is None else dict(env),
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=session,
            )
        return self.proc

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def kids(self) -> set[int]:
        assert self.proc is not None
        return children(self.proc.pid)

    def kids_when(self, ok: Callable[[set[int]], bool]) -> Callable[[], set[int] | None]:
        """A ``wait_until`` predicate that reads the children once a look and hands
        them back when ``ok``: two reads in one look could pass on a child dying
        between them."""

        def look() -> set[int] | None:
            kids = self.kids()
            return kids if ok(kids) else None

        return look

    def exits(self, timeout: float) -> int:
        assert self.proc is not None
        proc = self.proc
        wait_until(lambda: proc.poll() is not None, timeout, what="the supervisor to exit")
        return int(proc.returncode)

    def close(self) -> None:
        if self.proc is not None:
            for pid in self.kids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        self.log_path.unlink(missing_ok=True)
