"""Global limits of a queue: concurrency and rate, kept in Redis.

``set_limits_call`` writes the hash ``keys.limits``; ``lua/claim.lua`` reads it on
every claim (through ``lua/lib/apply_limits.lua``) and enforces it on the
server's clock, so every worker obeys the new values at its next claim and
no client setting can get around them. See docs/flow-control.md.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from leaseq.errors import InvalidArgument
from leaseq.store import validate as v
from leaseq.store.groups import check_group
from leaseq.store.replies import as_text, read_cost
from leaseq.store.scripts import SCRIPTS
from leaseq.store.settings import QueueSettings
from leaseq.store.steps import Call, Op

__all__ = [
    "UNSET",
    "GroupLimits",
    "Limits",
    "Unset",
    "limits",
    "read_limits",
    "set_group_limits",
    "set_group_limits_call",
    "set_limits",
    "set_limits_call",
]

MAX_LIMIT = 1_000_000
"""Largest concurrency or rate (the rate span holds up to that many claim times)."""
MAX_PER = 86_400.0
"""Longest rate span, in seconds (a day)."""


class Unset(enum.Enum):
    """The default of ``set_limits``' arguments: leave that limit as it is."""

    UNSET = "unset"


UNSET = Unset.UNSET


class GroupLimits(msgspec.Struct, frozen=True, kw_only=True):
    """One fair group's own limits (``set_group_limits``), over the queue's per-group ones."""

    concurrency: int | None = None
    """Most active leases of this group (instead of ``group_concurrency``)."""
    rate: int | None = None
    """Most claims of this group in any span of ``per`` seconds (instead of ``group_rate``)."""
    per: float | None = None
    cost_rate: float | None = None
    """Most cost claimed by this group in any span of ``cost_per`` seconds (instead of
    ``group_cost_rate``)."""
    cost_per: float | None = None

    def describe(self) -> str:
        """``concurrency 5, rate 50 per 1 s, cost 90000 per 60 s``: what a person reads."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        if self.rate is not None and self.per is not None:
            parts.append(f"rate {self.rate} per {self.per:g} s")
        if self.cost_rate is not None and self.cost_per is not None:
            parts.append(f"cost {self.cost_rate:g} per {self.cost_per:g} s")
        return ", ".join(parts) or "none"


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """A queue's global limits (None: no such limit) and how close it is to them."""

    concurrency: int | None
    """Most leases active at once, across every worker (prefetched ones count)."""
    rate: int | None
    """Most claims in any span of ``per`` seconds (server clock, sliding)."""
    per: float | None
    """The rate's span, seconds."""
    group_concurrency: int | None = None
    """Most active leases per fair group (``enqueue(..., group=)``)."""
    active: int = 0
    """Leases active now (expired ones not yet reaped included)."""
    recent_claims: int = 0
    """Claims in the last ``per`` seconds (0 without a rate)."""
    groups_ready: int = 0
    """Fair groups with ready jobs in the claim rotation."""
    groups_active: int = 0
    """Fair groups with at least one active lease."""
    groups_held: int = 0
    """Groups with ready jobs held out of the rotation at ``group_concurrency``."""
    busiest_group: int = 0
    """The most leases active in any one group (compare with ``group_concurrency``)."""
    group_rate: int | None = None
    """Most claims per fair group in any span of ``group_per`` seconds (server clock,
    sliding); a group at its rate sits out while the others go on."""
    group_per: float | None = None
    """The per-group rate's span, seconds."""
    groups: dict[str, GroupLimits] = msgspec.field(default_factory=dict)
    """Groups with limits of their own (``set_group_limits``), by name."""
    cost_rate: float | None = None
    """Most cost claimed in any span of ``cost_per`` seconds (server clock, sliding):
    a job counts its ``cost=`` when claimed, settled to what it spent when it ends."""
    cost_per: float | None = None
    """The cost limit's span, seconds."""
    recent_cost: float = 0.0
    """Cost claimed in the last ``cost_per`` seconds, settled where settled (0 without
    a cost limit)."""
    group_cost_rate: float | None = None
    """Most cost claimed per fair group in any span of ``group_cost_per`` seconds."""
    group_cost_per: float | None = None
    """The per-group cost limit's span, seconds."""

    @property
    def limited(self) -> bool:
        """Any limit is set: queue-wide, per fair group, or a group's own."""
        queue_wide = (
            self.concurrency,
            self.rate,
            self.group_concurrency,
            self.group_rate,
            self.cost_rate,
            self.group_cost_rate,
        )
        return any(x is not None for x in queue_wide) or bool(self.groups)


def _num(h: dict[str, str], name: str) -> int | None:
    # Decimal digits only, as claim.lua reads it (lib/to_count.lua): a field
    # edited by hand to 'nan', '-1' or '2.5' is no limit there, so none here.
    text = h.get(name, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 15 else None


def _window(h: dict[str, str], rate: str, per: str, cost: bool = False) -> tuple[Any, Any]:
    """A limit's budget and span in seconds as claim reads its two fields (both or
    neither: (None, None)); a cost budget is any finite number > 0 (lib/cost_limit.lua)."""
    per_ms = _num(h, per)
    budget: float | int | None = read_cost(h.get(rate)) if cost else _num(h, rate)
    if not per_ms or budget is None:
        return None, None
    return budget, per_ms / 1000


def _own(h: dict[str, str]) -> dict[str, GroupLimits]:
    """The groups' own limits, from the fields ``<limit>:<group>``."""
    names = sorted({f.partition(":")[2] for f in h if ":" in f})
    out = {}
    for name in names:
        rate, per = _window(h, "rate:" + name, "per_ms:" + name)
        cost_rate, cost_per = _window(h, "cost_rate:" + name, "cost_per_ms:" + name, cost=True)
        out[name] = GroupLimits(
            concurrency=_num(h, "concurrency:" + name),
            rate=rate,
            per=per,
            cost_rate=cost_rate,
            cost_per=cost_per,
        )
    return out


def _parse(reply: list[Any]) -> Limits:
    h = {as_text(reply[i]): as_text(reply[i + 1]) for i in range(8, len(reply) - 1, 2)}
    rate, per = _window(h, "rate", "per_ms")
    group_rate, group_per = _window(h, "group_rate", "group_per_ms")
    cost_rate, cost_per = _window(h, "cost_rate", "cost_per_ms", cost=True)
    group_cost_rate, group_cost_per = _window(h, "group_cost_rate", "group_cost_per_ms", cost=True)
    return Limits(
        concurrency=_num(h, "concurrency"),
        rate=rate,
        per=per,
        group_concurrency=_num(h, "group_concurrency"),
        active=int(reply[1]),
        recent_claims=int(reply[2]),
        groups_ready=int(reply[3]),
        groups_active=int(reply[4]),
        groups_held=int(reply[5]),
        busiest_group=int(reply[6]),
        group_rate=group_rate,
        group_per=group_per,
        groups=_own(h),
        cost_rate=cost_rate,
        cost_per=cost_per,
        recent_cost=float(as_text(reply[7])),
        group_cost_rate=group_cost_rate,
        group_cost_per=group_cost_per,
    )


def _call(queue: QueueSettings, action: str, fields: list[str | int]) -> Call[Limits]:
    return SCRIPTS["limits"].call(queue.keys, _parse, arg_tail=fields, action=action)


def read_limits(queue: QueueSettings) -> Call[Limits]:
    """The queue's limits and usage, in one read-only call."""
    return _call(queue, "get", [])


def set_limits_call(
    queue: QueueSettings,
    concurrency: int | Unset | None = UNSET,
    rate: int | Unset | None = UNSET,
    per: float | Unset | None = UNSET,
    group_concurrency: int | Unset | None = UNSET,
    group_rate: int | Unset | None = UNSET,
    group_per: float | Unset | None = UNSET,
    cost_rate: float | Unset | None = UNSET,
    cost_per: float | Unset | None = UNSET,
    group_cost_rate: float | Unset | None = UNSET,
    group_cost_per: float | Unset | None = UNSET,
) -> Call[Limits]:
    """Change the limits given (None removes one; one not given stays as it is).

    ``rate`` without ``per`` counts per second; ``rate=None`` also drops ``per``;
    ``group_rate`` and ``group_per``, ``cost_rate`` and ``cost_per``,
    ``group_cost_rate`` and ``group_cost_per`` likewise.
    Raises InvalidArgument before writing anything.
    """
    args: list[str | int] = []
    if concurrency is not UNSET:
        args += ["concurrency", _count(concurrency, "concurrency")]
    args += _rate(rate, per, "rate", "per", "")
    if group_concurrency is not UNSET:
        args += ["group_concurrency", _count(group_concurrency, "group_concurrency")]
    args += _rate(group_rate, group_per, "group_rate", "group_per", "")
    args += _rate(cost_rate, cost_per, "cost_rate", "cost_per", "")
    args += _rate(group_cost_rate, group_cost_per, "group_cost_rate", "group_cost_per", "")
    return _call(queue, "set", args)


def set_group_limits_call(
    queue: QueueSettings,
    group: str,
    concurrency: int | Unset | None = UNSET,
    rate: int | Unset | None = UNSET,
    per: float | Unset | None = UNSET,
    cost_rate: float | Unset | None = UNSET,
    cost_per: float | Unset | None = UNSET,
) -> Call[Limits]:
    """Give the fair group ``group`` limits of its own, over the queue's per-group
    ones (None removes one: the queue's applies again). Raises InvalidName or
    InvalidArgument before writing anything."""
    name = check_group(group)
    args: list[str | int] = []
    if concurrency is not UNSET:
        args += ["concurrency:" + name, _count(concurrency, "concurrency")]
    args += _rate(rate, per, "rate", "per", ":" + name)
    args += _rate(cost_rate, cost_per, "cost_rate", "cost_per", ":" + name)
    return _call(queue, "set", args)


def _rate(
    rate: float | Unset | None,
    per: float | Unset | None,
    rate_arg: str,
    per_arg: str,
    own: str,
) -> list[str | int]:
    """The fields of one sliding window (``rate`` claims, or cost for ``cost_rate``,
    per ``per`` s): ``<rate_arg>`` and ``<per_arg>_ms``, then ``own`` (``:<group>``
    for a group's own limit; '' for the queue's)."""
    if per is not UNSET and rate is UNSET:
        raise InvalidArgument(f"{per_arg}= goes with {rate_arg}= (give both)")
    if rate is UNSET:
        return []
    rate_field, per_field = rate_arg + own, per_arg + "_ms" + own
    if rate is None:
        if per not in (UNSET, None):
            raise InvalidArgument(
                f"{per_arg}= without a rate: give {rate_arg}= too, or {per_arg}=None"
            )
        return [rate_field, "", per_field, ""]
    span = 1.0 if per is UNSET or per is None else per
    per_ms = v.seconds_to_ms(span, per_arg, minimum_ms=1, maximum=MAX_PER)
    budget = v.cost(rate, rate_arg) if "cost" in rate_arg else _count(rate, rate_arg)
    return [rate_field, budget, per_field, per_ms]


def _count(value: object, name: str) -> str | int:
    if value is None:
        return ""
    return v.integer(value, name, 1, MAX_LIMIT)


def set_limits(
    queue: QueueSettings,
    *,
    concurrency: int | Unset | None = UNSET,
    rate: int | Unset | None = UNSET,
    per: float | Unset | None = UNSET,
    group_concurrency: int | Unset | None = UNSET,
    group_rate: int | Unset | None = UNSET,
    group_per: float | Unset | None = UNSET,
    cost_rate: float | Unset | None = UNSET,
    cost_per: float | Unset | None = UNSET,
    group_cost_rate: float | Unset | None = UNSET,
    group_cost_per: float | Unset | None = UNSET,
) -> Op[Limits]:
    """Change the queue's global limits, kept in Redis and enforced by every claim:
    at most ``concurrency`` active leases, at most ``rate`` claims per ``per`` s,
    at most ``cost_rate`` cost claimed per ``cost_per`` s (each job counts its
    ``cost=``, settled to what it spent when it ends); per fair group, at most
    ``group_concurrency`` active leases, ``group_rate`` claims per ``group_per`` s
    and ``group_cost_rate`` cost per ``group_cost_per`` s (sliding windows on the
    server clock; a group at its limit sits out while the other groups go on).
    None removes a limit; one not given stays. Returns the limits now in force."""
    limits: Limits = yield set_limits_call(
        queue,
        concurrency,
        rate,
        per,
        group_concurrency,
        group_rate,
        group_per,
        cost_rate,
        cost_per,
        group_cost_rate,
        group_cost_per,
    )
    return limits


def set_group_limits(
    queue: QueueSettings,
    group: str,
    *,
    concurrency: int | Unset | None = UNSET,
    rate: int | Unset | None = UNSET,
    per: float | Unset | None = UNSET,
    cost_rate: float | Unset | None = UNSET,
    cost_per: float | Unset | None = UNSET,
) -> Op[Limits]:
    """Limits of one fair group's own (one heavy tenant), over the queue's
    ``group_concurrency``, ``group_rate`` and ``group_cost_rate``: at most
    ``concurrency`` active leases, ``rate`` claims per ``per`` s and ``cost_rate``
    cost per ``cost_per`` s for ``group``. None removes one (the queue's applies
    again); one not given stays. Returns the limits now in force
    (``Limits.groups`` lists the groups with limits of their own)."""
    limits: Limits = yield set_group_limits_call(
        queue, group, concurrency, rate, per, cost_rate, cost_per
    )
    return limits


def limits(queue: QueueSettings) -> Op[Limits]:
    """The queue's global limits, with how many leases are active and claims recent."""
    found: Limits = yield read_limits(queue)
    return found
