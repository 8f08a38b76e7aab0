"""Django tasks that tests/django enqueue through ``leaseq.django.LeaseqBackend``
(imported once Django's settings are configured: ``@task`` checks its backend)."""

from __future__ import annotations

import os
import time
from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:
    from django_tasks import TaskContext, task  # type: ignore[no-redef]

ran: list[str] = []
"""The tasks run in this process, in order."""


@task()
def add(a: int, b: int) -> int:
    ran.append(f"add:{a}+{b}")
    return a + b


@task(queue_name="emails")
def send(to: str, *, subject: str = "") -> dict[str, Any]:
    ran.append(f"send:{to}")
    return {"to": to, "subject": subject}


@task()
def explode(why: str) -> None:
    raise ValueError(why)


@task(takes_context=True)
def which_attempt(context: TaskContext, tag: str) -> list[Any]:
    return [tag, context.attempt, context.task_result.id]


@task()
async def shout(word: str) -> str:
    return word.upper()


@task()
def leave(code: int) -> None:
    raise SystemExit(code)


@task()
def flaky(tag: str) -> str:
    if f"flaky:{tag}" not in ran:
        ran.append(f"flaky:{tag}")
        raise ValueError(f"{tag} not yet")
    return tag


@task(max_attempts=3, timeout=5.0, group="tenant-7")
def careful(n: int) -> int:
    """A task with leaseq's job options (``leaseq.django.LeaseqTask``)."""
    return n


@task(max_attempts=3)
def note_pid(seconds: float) -> int:
    """Sleeps, then says which process ran it (``--processes`` children)."""
    time.sleep(seconds)
    return os.getpid()


@task(timeout=0.3, max_attempts=1)
def hang(seconds: float) -> None:
    """Runs on past its timeout: its child is killed after ``--kill-grace``."""
    time.sleep(seconds)


def plain() -> None:
    """Not a task: tests make tasks of it with bad options (Django wants a
    module-level function)."""
