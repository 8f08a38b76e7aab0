"""Handlers that tests run in worker processes (`leaseq worker Q tests.support.handlers:fn`)
and in-process workers. Each takes its instructions from the payload.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import leaseq


def noop(lease: leaseq.Lease) -> None:
    return None


def echo(lease: leaseq.Lease) -> Any:
    return lease.payload


def sleep(lease: leaseq.Lease) -> str:
    """Sleep payload['s'] seconds, then return 'slept'."""
    time.sleep(float(lease.payload["s"]))
    return "slept"


def boom(lease: leaseq.Lease) -> None:
    raise ValueError(f"boom on {lease.id}")


def retry_later(lease: leaseq.Lease) -> None:
    raise leaseq.Retry(in_=float(lease.payload.get("in", 30.0)), reason="not yet")


def give_up(lease: leaseq.Lease) -> None:
    raise leaseq.Dead("bad input")


def unencodable(lease: leaseq.Lease) -> Any:
    return object()  # not data: cannot be encoded


def wait_for_loss(lease: leaseq.Lease) -> str:
    """Wait (up to payload['s'] s) until the worker says the lease is lost, note
    it in the file payload['flag'], and return a result that must be discarded."""
    ctx = leaseq.current_job()
    seen = ctx.lost.wait(float(lease.payload.get("s", 10.0)))
    Path(lease.payload["flag"]).write_text("lost" if seen else "held")
    return "stale result"


def kill_self(lease: leaseq.Lease) -> None:
    """With payload['kill'] (a file path): note the run there, then SIGKILL this
    worker process — a job that crashes its worker every time. Else a no-op."""
    path = lease.payload.get("kill")
    if path:
        with open(path, "a") as f:
            f.write(f"{lease.attempt}\n")
        os.kill(os.getpid(), signal.SIGKILL)


def logged_sleep(lease: leaseq.Lease) -> str:
    """Note the run in payload['log'] (a file: one line per run, the job's id),
    then sleep payload['s'] seconds."""
    with open(lease.payload["log"], "a") as f:
        f.write(f"{lease.id}\n")
    time.sleep(float(lease.payload["s"]))
    return "slept"


def ten_steps(lease: leaseq.Lease) -> list[int]:
    """Ten durable steps, each noting its run in payload['log'] (a file path); on
    the first attempt, step payload['kill_at'] SIGKILLs this worker process in
    its body (the body ran, its record never landed)."""

    def body(n: int) -> int:
        with open(lease.payload["log"], "a") as f:
            f.write(f"{n}\n")
        if n == lease.payload.get("kill_at") and lease.attempt == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return n * n

    ctx = leaseq.current_job()
    return [ctx.step(f"step-{n}", body, n) for n in range(1, 11)]


def order(lease: leaseq.Lease) -> Any:
    """A durable order (docs/durable.md): charge once (noted in payload['log']),
    sleep payload['nap'] seconds, wait for the signal 'approved:<order>', ship."""

    def charge() -> str:
        with open(lease.payload["log"], "a") as f:
            f.write(f"{lease.payload['order']}\n")
        return f"ch_{lease.payload['order']}"

    ctx = leaseq.current_job()
    charged = ctx.step("charge", charge)
    ctx.sleep("nap", lease.payload["nap"])
    approval = ctx.wait_for("approval", f"approved:{lease.payload['order']}")
    return [charged, approval]


async def async_echo(lease: leaseq.Lease) -> Any:
    """An async def handler: the threaded worker and the CLI must run it too."""
    await asyncio.sleep(0)
    return {"echo": lease.payload, "job": leaseq.current_job().lease.id}


KINDS = {"echo": echo, "async_echo": async_echo}
"""A handler dict by kind, for ``leaseq worker QUEUE tests.support.handlers:KINDS``."""


def spin(lease: leaseq.Lease) -> str:
    """Spin the CPU (pure Python) for payload['s'] seconds, then return 'spun'."""
    until = time.monotonic() + float(lease.payload["s"])
    n = 0
    while time.monotonic() < until:
        n += 1
    return "spun"


def note_pid(lease: leaseq.Lease) -> int:
    """Return this worker process's pid (which child of a supervisor ran the job)."""
    time.sleep(float(lease.payload.get("s", 0.0)) if isinstance(lease.payload, dict) else 0.0)
    return os.getpid()


def until_cancelled(lease: leaseq.Lease) -> str:
    """Wait (up to payload['s'] s) for current_job().cancelled; note what was seen
    in the file payload['flag']; return a result that must be discarded."""
    ctx = leaseq.current_job()
    seen = ctx.cancelled.wait(float(lease.payload.get("s", 10.0)))
    Path(lease.payload["flag"]).write_text("cancelled" if seen else "ran out")
    return "stale result"


def _send(to: str) -> None:
    raise RuntimeError(f"SMTP 550: no such user {to}\nthe server said goodbye")


def smtp_bounce(lease: leaseq.Lease) -> None:
    """Fails two frames deep with a two-line message, as a real mail handler would."""
    _send(str(lease.payload.get("to", "nobody@bounce.test")))


def half_cost(lease: leaseq.Lease) -> None:
    """Settle to half the job's cost (its payload): cost limits in process mode."""
    leaseq.current_job().set_cost(lease.payload / 2)
