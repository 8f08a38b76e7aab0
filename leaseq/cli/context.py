"""What every ``leaseq`` command shares: the group's context object (the URL, the
client made on first use, and the queue a name means: plain, sharded, or the one
holding a job), the decorator that passes it, and the console they print to.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console

from leaseq.errors import InvalidArgument, JobNotFound
from leaseq.queue import Queue, connect
from leaseq.sharded import ShardedQueue, sharded_names, stored_shards
from leaseq.transport import client as _redis
from leaseq.types import Job, State
from leaseq.work.tasks import adopt_tasks, tasks_by_queue

__all__ = ["DEFAULT_URL", "STATES", "Ctx", "out", "pass_ctx", "resolve_url"]

DEFAULT_URL = "redis://localhost:6379/0"
STATES = [s.value for s in State]


class Ctx:
    """The click group's object: every command reaches Redis through it."""

    def __init__(self, url: str | None, prefix: str, tasks: Sequence[str] = ()) -> None:
        self.explicit_url, self.url = resolve_url(url)
        self.prefix = prefix
        self._client: Any = None
        self.task_modules = tuple(tasks)
        """Modules of typed tasks (``--tasks``) whose calls edits are checked by."""
        self._tasks: dict[str, Any] | None = None

    @property
    def tasks(self) -> dict[str, Any]:
        """The typed tasks of ``--tasks``, by queue name (imported on first use)."""
        if self._tasks is None:
            try:
                self._tasks = tasks_by_queue(self.task_modules)
            except InvalidArgument as exc:  # not there, or its own code broke on import
                raise InvalidArgument(f"--tasks: {exc}") from None
        return self._tasks

    @property
    def redis(self) -> Any:
        if self._client is None:
            self._client = connect(self.url)
        return self._client

    def queue(self, name: str, **settings: Any) -> Queue:
        q = Queue(name, redis=self.redis, prefix=self.prefix, **settings)
        return adopt_tasks(q, self.tasks) if self.task_modules else q

    def producer(self, name: str, shards: int | None) -> Queue | ShardedQueue:
        """The queue ``worker`` and ``enqueue`` act on: the ShardedQueue when
        ``name`` is one (or ``--shards`` says so), else a plain Queue (made on
        first use). Never a plain queue that would hide existing shards."""
        with _redis.translate_errors():
            plain = bool(self.redis.exists(*self.queue(name).keys.markers()))
        found = 0 if plain else self.shard_count(name)
        if shards is None:
            shards = found or None
        elif plain:
            raise InvalidArgument(f"{name!r} is a plain queue, not a sharded one: drop --shards")
        elif found and shards != found:
            raise InvalidArgument(
                f"{name!r} has {found} shards, not {shards}: "
                f"give --shards {found} (or leave --shards out)"
            )
        if shards is None:
            return self.queue(name)
        return self._sharded(name, shards)

    def target(self, name: str) -> Queue | ShardedQueue:
        """The queue as the operator commands see it: a plain Queue, or the
        ShardedQueue whose shards' keys are there. A clear error for neither."""
        q = self.queue(name)
        with _redis.translate_errors():
            known = self.redis.exists(*q.keys.markers())
        if known:
            return q
        shards = self.shard_count(name)
        if not shards:
            raise InvalidArgument(f"no queue named {name!r} under prefix {self.prefix!r}")
        return self._sharded(name, shards)

    def _sharded(self, name: str, shards: int) -> ShardedQueue:
        q = ShardedQueue(name, shards=shards, redis=self.redis, prefix=self.prefix)
        return adopt_tasks(q, self.tasks) if self.task_modules else q

    def shard_count(self, name: str) -> int:
        """How many shards the sharded queue ``name`` has (0: none): the count it
        recorded, else (a queue from before the count was kept) the most its keys
        show, a lower bound."""
        stored = stored_shards(self.redis, self.prefix, name)
        if stored is not None:
            return stored
        return sharded_names(Queue.queues(self.redis, self.prefix)).get(name, 0)

    def holder(self, name: str, job_id: str) -> tuple[Queue, Job]:
        """The queue (or shard) that holds ``job_id``, and the job; JobNotFound if none.

        A shard that never held a job has no keys, so the shard count found may
        be short; an id is therefore looked for in every shard, not shard_of()'s.
        """
        target = self.target(name)
        for part in target.shards if isinstance(target, ShardedQueue) else (target,):
            job = part.get(job_id)
            if job is not None:
                return part, job
        raise JobNotFound(job_id)


def resolve_url(url: str | None) -> tuple[str | None, str]:
    """(the URL given by --url or $LEASEQ_URL, or None; the URL to use).

    An empty --url or $LEASEQ_URL is an error, not a quiet fall back to
    localhost."""
    if url is not None:
        if not url.strip():
            raise InvalidArgument("--url is empty: give a Redis URL such as redis://host:6379/0")
        return url, url
    env = os.environ.get("LEASEQ_URL")
    if env is not None:
        if not env.strip():
            raise InvalidArgument("LEASEQ_URL is set but empty: give a Redis URL or unset it")
        return env, env
    return None, DEFAULT_URL


def _preflight(target: Queue | ShardedQueue) -> None:
    """One read of the queue before a worker starts, so a wrong password, a
    missing ACL permission or an unreachable server ends the command with
    one line instead of a worker that retries forever."""
    target.stats()


pass_ctx = click.make_pass_decorator(Ctx)
out = Console(highlight=False, soft_wrap=True)
