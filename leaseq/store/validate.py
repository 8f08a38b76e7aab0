"""Checks for the numbers of the public API, shared by every entry point.

Each raises InvalidArgument (a ValueError) naming the argument, before
anything is written.
"""

from __future__ import annotations

import datetime
import math

from leaseq.errors import InvalidArgument

MAX_TTL = 86_400.0
"""The longest lease one claim or extension may ask for: one day, in seconds."""
MAX_DELAY = 366 * 86_400.0
"""The longest delay or retry_in: a year (and a day), in seconds."""
MAX_ATTEMPTS = 1_000_000
MAX_CONCURRENCY = 100_000
"""Most handler threads (or tasks) and prefetched leases one worker takes."""
MAX_PRIORITY = 1_000_000
MAX_TIMEOUT = 86_400.0
"""The longest handler time limit (``enqueue(..., timeout=)``, ``Worker(timeout=)``): a day."""


def seconds_to_ms(value: object, name: str, *, minimum_ms: int, maximum: float) -> int:
    """A duration in seconds (int or float) as whole milliseconds, checked."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name} must be a number of seconds, not {value!r}")
    # One rule per kind of duration, whatever the bad value: a length (a
    # lease) must be finite and > 0, a wait (delay, grace) finite and >= 0.
    rule = "finite and greater than 0" if minimum_ms > 0 else "finite and >= 0"
    if not math.isfinite(value) or value < 0 or (minimum_ms > 0 and value == 0):
        raise InvalidArgument(f"{name} must be {rule}, not {value!r}")
    if value > maximum:
        raise InvalidArgument(f"{name} must be at most {maximum:g} s, not {value!r}")
    ms = math.ceil(value * 1000)
    if ms < minimum_ms:
        raise InvalidArgument(f"{name} must be at least {minimum_ms} ms, not {value!r}")
    return ms


def ttl_ms(value: object, name: str = "ttl") -> int:
    """A lease length: finite, > 0, at most MAX_TTL."""
    return seconds_to_ms(value, name, minimum_ms=1, maximum=MAX_TTL)


def delay_ms(value: object, name: str = "delay") -> int:
    """A delay: finite, >= 0, at most MAX_DELAY; None means 0."""
    if value is None:
        return 0
    return seconds_to_ms(value, name, minimum_ms=0, maximum=MAX_DELAY)


def timeout_ms(value: object, name: str = "timeout") -> int:
    """A handler time limit: finite, > 0, at most MAX_TIMEOUT; None means 0 (none)."""
    if value is None:
        return 0
    return seconds_to_ms(value, name, minimum_ms=1, maximum=MAX_TIMEOUT)


MAX_COST = 1e12
"""The largest cost of one job, and the largest cost budget (``cost=``, ``cost_rate=``)."""


def cost(value: object, name: str = "cost") -> str:
    """A cost (``enqueue(..., cost=)``, ``set_cost``, ``cost_rate=``) as the scripts
    store it: a finite number > 0 and at most MAX_COST, as decimal text (an integral
    value without a point: ``4000``, not ``4000.0``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name} must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 0 or value > MAX_COST:
        raise InvalidArgument(f"{name} must be finite, > 0 and at most {MAX_COST:g}, not {value!r}")
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def spent(value: object, name: str = "cost") -> str:
    """What a run really spent (``set_cost``, ``complete(..., cost=)``, ``fail(...,
    cost=)``) as the scripts take it: as a ``cost``, but 0 too (a run that spent
    nothing: a cache hit, a request refused before it ran)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name} must be a number, not {value!r}")
    if value == 0:
        return "0"
    if not math.isfinite(value) or value < 0 or value > MAX_COST:
        raise InvalidArgument(
            f"{name} must be finite, >= 0 and at most {MAX_COST:g}, not {value!r}"
        )
    return cost(value, name)


def expires(value: object, delay_ms: int = 0, name: str = "expires") -> str:
    """A start-by deadline (``enqueue(..., expires=)``) as the enqueue scripts take it:
    '' for None; ``+<ms>`` for seconds from the enqueue (finite, > 0, at most
    MAX_DELAY; more than ``delay_ms``, or the job could never start); a timezone-aware
    ``datetime`` as its ms epoch, compared with the server's clock."""
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidArgument(
                f"{name} must be a timezone-aware datetime (a naive one is ambiguous), "
                f"not {value!r}"
            )
        return str(math.floor(value.timestamp() * 1000))
    ms = seconds_to_ms(value, name, minimum_ms=1, maximum=MAX_DELAY)
    if ms <= delay_ms:
        raise InvalidArgument(
            f"{name} ({ms / 1000:g} s) must be longer than delay ({delay_ms / 1000:g} s): "
            "the deadline counts from the enqueue, so the job could never start"
        )
    return f"+{ms}"


def integer(value: object, name: str, low: int, high: int) -> int:
    """An int (not bool, not float) within low..high."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise InvalidArgument(f"{name} must be within {low}..{high}, not {value!r}")
    return value


def worker_settings(concurrency: object, ttl: object, grace: object, reap_interval: object) -> None:
    """The numbers every worker takes (threaded and asyncio): an integer
    concurrency >= 1, a valid ttl, and grace / reap_interval as finite seconds
    >= 0 (reap_interval may be None)."""
    integer(concurrency, "concurrency", 1, MAX_CONCURRENCY)
    ttl_ms(ttl)
    for name, value in (("grace", grace), ("reap_interval", reap_interval)):
        if value is not None:
            seconds_to_ms(value, name, minimum_ms=0, maximum=math.inf)


def text(value: object, name: str, limit: int) -> str:
    """A str, cut to at most ``limit`` characters (failure texts can be huge)."""
    if not isinstance(value, str):
        value = str(value)
    return value if len(value) <= limit else value[: limit - 15] + " ...[truncated]"
