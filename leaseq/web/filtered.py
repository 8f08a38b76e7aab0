"""A queue page's filter: the jobs of a state by kind, age and text, read from
the URL (so a filtered list can be shared), found a bounded page at a time
(``leaseq.store.filters``: the state's index walked in score order with a
cursor, the rows read pipelined), with how much of the index was looked at.

The filter is the query string: ``kind`` (exact), ``text`` (in the id, the
payload as shown, or the last error; ignoring case), ``older`` and ``newer``
(``90s``, ``10m``, ``2h``, ``3d``: the age bounds), ``age`` (what the age is
of: ``enqueued``, ``claimed`` or ``finished``; the state's usual time when
absent), and the cursor ``after`` with the running counts ``seen`` (matches
shown before) and ``looked`` (entries looked at before).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.observe.humanize import span
from leaseq.store.filters import AGE_FIELDS, AGES, JobFilter, Mark, parse_age
from leaseq.types import State
from leaseq.web._source import Target
from leaseq.web.formatting import STATES, int_param, job_row
from leaseq.web.site import Site

__all__ = [
    "AGES",
    "FILTER_BUDGET",
    "PARAMS",
    "ages",
    "describe",
    "page",
    "query",
    "read_filter",
    "tab_queries",
]

FILTER_BUDGET = 5_000
"""Index entries one filtered page looks at at most (0.1-0.3 s over rows of a few
hundred bytes on a shared 2-core machine): a filter that matches little shows
what it found and a link to look further, instead of holding the request."""
PARAMS = ("kind", "text", "older", "newer", "age")
"""The query parameters that make the filter (the cursor and counts aside)."""


def read_filter(params: Mapping[str, Any], state: str) -> tuple[JobFilter, dict[str, str]]:
    """The filter the parameters give for ``state``, and their texts as given (to
    show them again and to build links). InvalidArgument for a bad one."""
    raw = {name: str(params.get(name) or "").strip() for name in PARAMS}
    age = raw["age"]
    if age and age not in AGES:
        raise InvalidArgument(f"age: {age!r}: say {', '.join(AGES)}")
    flt = JobFilter(
        kind=raw["kind"],
        text=raw["text"],
        older_than=parse_age(raw["older"], "older than") if raw["older"] else None,
        newer_than=parse_age(raw["newer"], "newer than") if raw["newer"] else None,
        age_of=AGES.get(age, ""),
    )
    flt.time_field(state)  # an age on a time the state has not: InvalidArgument
    return flt, raw


def ages(state: str) -> list[str]:
    """The ``age=`` choices of a state's jobs, its default first."""
    named = {field: name for name, field in AGES.items()}
    return [named[field] for field in AGE_FIELDS[State(state)]]


def query(raw: Mapping[str, str]) -> str:
    """``&kind=...&text=...``: the filter's part of a URL (empty when none)."""
    kept = [(name, raw[name]) for name in PARAMS if raw.get(name)]
    return "&" + urllib.parse.urlencode(kept) if kept else ""


def tab_queries(raw: Mapping[str, str]) -> dict[str, str]:
    """Per state, the filter carried to its tab: an ``age`` of a time that state's
    jobs have not (claimed, for pending) is dropped there."""
    out = {}
    for st in STATES:
        fields = AGE_FIELDS[State(st)]
        keep = dict(raw)
        if keep.get("age") and AGES[keep["age"]] not in fields:
            keep["age"] = ""
        out[st] = query(keep)
    return out


def describe(flt: JobFilter, state: str) -> str:
    """The filter in words: ``kind "mail", text "timeout", finished more than 10 min ago``."""
    words = []
    if flt.kind:
        words.append(f'kind "{flt.kind}"')
    if flt.text:
        words.append(f'text "{flt.text}"')
    what = flt.time_field(state).removesuffix("_at")
    if flt.older_than is not None:
        words.append(f"{what} more than {span(flt.older_than)} ago")
    if flt.newer_than is not None:
        words.append(f"{what} within the last {span(flt.newer_than)}")
    return ", ".join(words)


def page(
    site: Site,
    params: Mapping[str, str],
    target: Target,
    state: str,
    flt: JobFilter,
    size: int,
    now: float,
    url: str,
) -> dict[str, Any]:
    """The filtered list's part of the queue page: up to ``size`` matches from the
    cursor on, how many entries were looked at, and the link to the next ones
    (``url``: the page's own address with the filter, without the cursor)."""
    after = Mark.parse(params["after"]) if params.get("after") else None
    seen = max(0, int_param(params.get("seen"), 0))
    looked = max(0, int_param(params.get("looked"), 0))
    here = url
    if after is not None:
        here += f"&after={urllib.parse.quote(after.text(), safe='')}&seen={seen}&looked={looked}"
    if params.get("partial") == "live":
        return {"jobs": [], "here": here}  # the live part leaves the filtered list alone
    now_ms = round(now * 1000)
    found = site.source.find(target, state, flt, after, size, FILTER_BUDGET, now_ms=now_ms)
    looked += found.looked
    more = ""
    if found.mark is not None:
        cursor = urllib.parse.quote(found.mark.text(), safe="")
        more = f"{url}&after={cursor}&seen={seen + len(found.jobs)}&looked={looked}"
    return {
        "here": here,
        "jobs": [job_row(j, now) for j in found.jobs],
        "damaged": [{"id": d.job_id, "text": str(d)} for d in found.damaged],
        "first": seen + 1 if found.jobs else 0,
        "last": seen + len(found.jobs),
        "looked": looked,
        "in_range": site.source.in_range(target, state, flt, now_ms),
        "more": more,
        "restart": url if after is not None else "",
        "short": found.mark is not None and len(found.jobs) < size,
    }
