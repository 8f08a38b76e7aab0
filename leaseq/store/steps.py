"""The steps an operation yields, and the operation types.

An operation (``leaseq.store.queue_ops``) is a generator: it yields steps and
receives each step's reply. A step is a script ``Call`` (the script, its KEYS
and ARGV, and the function that parses its reply) or one of the few plain
commands below; ``leaseq.transport.drive`` turns each into client calls.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union

from leaseq.errors import NotReplicated
from leaseq.store.scripts import Call

__all__ = [
    "Batch",
    "Call",
    "Command",
    "Feed",
    "Listen",
    "Op",
    "Partial",
    "ROWS_CHUNK",
    "Rows",
    "Scan",
    "Step",
    "Wake",
    "joined",
    "one",
    "read_rows",
]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

ROWS_CHUNK = 1000
"""Rows read in one pipeline by ``read_rows``. A pipeline of 100,000 HGETALLs
held a shared redis-server 4-8 ms at a time (SLOWLOG) while it built the
reply; 1,000 a pipeline showed none, and the whole read took less time."""


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


@dataclass(frozen=True, slots=True)
class Partial(Generic[R_co]):
    """A batch call's reply when its script stopped at its time budget
    (lua/lib/over_budget.lua): what the items it reached gave, and the call
    that does the rest (built by the first call's parse, from what it sent)."""

    done: list[R_co]
    rest: Call[Batch[R_co]]


Batch = Union[list[R], Partial[R]]  # noqa: UP007 (a generic alias needs Union before 3.12)
"""A batch call's reply: one list, or a part of it and the call for the rest."""

Step = Call[Any] | Command | Rows | Wake | Listen | Scan
Op = Generator[Step, Any, R]
"""An operation: yields steps, receives their replies, returns its result."""
Feed = Generator[Op[list[R]], Any, None]
"""An operation that produces a sequence (``events``): it yields operations, and
each one's result is the next few items (maybe none); the driver runs them in
turn and hands out the items, until the feed returns."""


def joined(calls: Sequence[Call[Batch[R]]]) -> Op[list[R]]:
    """Run ``calls`` in turn; their replies' lists, joined in order (the chunks
    of one batch operation). A call that stopped at its time budget is followed
    at once by the call for its rest, so no call holds the server long and
    other clients' commands run between them. On a ``durable=`` queue a call
    the replicas did not acknowledge in time still ran: the batch goes on, then
    NotReplicated is raised with the whole batch's result."""
    out: list[R] = []
    missed: list[NotReplicated] = []
    for first in calls:
        call: Call[Batch[R]] | None = first
        while call is not None:
            try:
                reply = yield call
            except NotReplicated as exc:  # applied on the primary
                missed.append(exc)
                reply = exc.result
            if isinstance(reply, Partial):
                out += reply.done
                call = reply.rest
            else:
                out += reply
                call = None
    if missed:
        first_miss = missed[0]
        raise NotReplicated(first_miss.op, first_miss.wanted, min(m.acked for m in missed), out)
    return out


def one(call: Call[R]) -> Op[R]:
    """The operation of one script call (its parsed reply)."""
    result: R = yield call
    return result


def read_rows(keys: Sequence[str]) -> Op[list[Any]]:
    """``Rows`` of ``keys`` in pipelines of ROWS_CHUNK: per key, in order, its
    row (a dict) or the error it met."""
    out: list[Any] = []
    for i in range(0, len(keys), ROWS_CHUNK):
        out += yield Rows(keys[i : i + ROWS_CHUNK])
    return out
