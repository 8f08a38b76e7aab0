"""Typed tasks that tests serve with ``leaseq worker QUEUE tests.support.tasks``.

The module's queue is never used to enqueue (its client points nowhere):
tests declare the same functions on their own queue, under the same names.
"""

from __future__ import annotations

import datetime as dt

import msgspec
import redis

import leaseq

queue = leaseq.Queue("mail", redis=redis.Redis(port=1))


class Address(msgspec.Struct, frozen=True):
    to: str
    name: str = ""


@queue.task(name="send")
def send(address: Address, at: dt.datetime, *, html: bool = False) -> str:
    return f"{address.to}@{at.isoformat()}:{html}"


@queue.task(name="add")
async def add(a: int, b: int) -> int:
    return a + b
