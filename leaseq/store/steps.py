"""The steps an operation yields, and the operation types.

An operation (``leaseq.store.queue_ops``) is a generator: it yields steps and
receives each step's reply. A step is a script ``Call`` (the script, its KEYS
and ARGV, and the function that parses its reply) or one of the few plain
commands below; ``leaseq.transport.drive`` turns each into client calls.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from leaseq.store.scripts import Call

__all__ = [
    "Call",
    "Command",
    "Feed",
    "Listen",
    "Op",
    "Rows",
    "Scan",
    "Step",
    "Wake",
    "joined",
    "one",
]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Command:
    """One plain Redis command, ``client.<name>(*args)``; the reply is redis-py's."""

    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Rows:
    """HGETALL of each key in one pipeline (the keys share a slot); the reply is a
    list, per key, of its row (a dict) or the error it met."""

    keys: Sequence[str]


@dataclass(frozen=True, slots=True)
class Wake:
    """Block up to ``timeout`` seconds on the wake list ``key`` (and the lists in
    ``more``: one BLPOP over them all, so they must share a server and, on a
    cluster, a slot); the reply is True if a token was taken. The driver keeps
    the wait under its client's read timeout, so a quiet queue never looks like
    a dead server."""

    key: str
    timeout: float
    more: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Listen:
    """Block up to ``timeout`` seconds for entries of the stream ``key`` after the
    entry id ``after`` (XREAD BLOCK); the reply is a list of (entry id, fields).
    Kept under the client's read timeout like ``Wake``."""

    key: str
    after: str
    timeout: float


@dataclass(frozen=True, slots=True)
class Scan:
    """Every key matching ``match`` (SCAN; on a cluster, of every primary)."""

    match: str


Step = Call[Any] | Command | Rows | Wake | Listen | Scan
Op = Generator[Step, Any, R]
"""An operation: yields steps, receives their replies, returns its result."""
Feed = Generator[Op[list[R]], Any, None]
"""An operation that produces a sequence (``events``): it yields operations, and
each one's result is the next few items (maybe none); the driver runs them in
turn and hands out the items, until the feed returns."""


def joined(calls: Sequence[Call[list[R]]]) -> Op[list[R]]:
    """Run ``calls`` in turn; their replies' lists, joined in order (the chunks of
    one batch operation)."""
    out: list[R] = []
    for call in calls:
        out += yield call
    return out


def one(call: Call[R]) -> Op[R]:
    """The operation of one script call (its parsed reply)."""
    result: R = yield call
    return result
