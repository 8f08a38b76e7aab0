"""SIGTERM/SIGINT handling shared by ``leaseq.Worker`` and ``leaseq.Supervisor``."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install(on_signal: Callable[[int, FrameType | None], Any], enabled: bool) -> dict[int, Any]:
    """Route SIGTERM and SIGINT to ``on_signal``; the handlers replaced, for ``restore``.
    Nothing is installed unless ``enabled`` and in the main thread (Python's rule)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}


def restore(old: dict[int, Any]) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)


def stop_line(signum: int, second: bool, grace: float) -> str:
    """What a worker logs as a stop signal arrives (the second stops at once)."""
    name = signal.Signals(signum).name
    if second:
        return f"{name}: stopping now, releasing in-flight jobs"
    return f"{name}: stopping: no new jobs, in-flight ones get {grace:g}s"
