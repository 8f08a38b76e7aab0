"""Bulk actions over a filter: retry, run now, cancel or delete every job of a
state that matches the queue page's filter, not only the ticked rows.

The first POST counts the matches (a bounded walk: at most COUNT_ROWS index
entries or COUNT_SECONDS; "at least N" when it stopped short) and asks,
saying how many. The confirmed POST then walks the state's index from the
start (``leaseq.store.filters.find_page`` with ``acting=True``) and acts on the
matches a chunk at a time, each job with the queue's own operation
(``retry_dead``, ``run_now``, ``cancel``, ``delete``: one script call each,
pipelined ACT_CHUNK together), so their fencing and rules hold. A request
acts for RUN_SECONDS at most, then answers with its progress and a form
that goes on from its cursor (leaseq.js submits it by itself).

Repeating any of these POSTs is harmless: a job acted on has left the
state, so a second walk does not meet it, and a job that enters the state
after the walk reached its part scores above the walk's snapshot.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from leaseq.errors import InvalidArgument
from leaseq.queue import Queue
from leaseq.store.filters import FIND_PAGE, JobFilter, Mark
from leaseq.store.steps import Op
from leaseq.types import TRANSITIONS, State
from leaseq.web import filtered
from leaseq.web._source import Target
from leaseq.web.formatting import STATES, int_param
from leaseq.web.site import Site, flash_redirect

__all__ = ["VERBS", "over_matches"]

COUNT_ROWS = 50_000
"""Index entries the question's count looks at, at most."""
COUNT_SECONDS = 1.0
"""Seconds the question's count may take, at most."""
RUN_SECONDS = 2.0
"""Seconds one confirmed request acts before it answers with its progress."""
ACT_CHUNK = 50
"""Matches acted on together: their script calls go in one pipeline (a delete
takes ~40-60 µs of server time, so a pipeline holds the server ~2-3 ms)."""


@dataclass(frozen=True, slots=True)
class Verb:
    """A bulk action: the queue operation it runs on each job, the states it
    applies to, and how the question and the result name it."""

    act: Callable[[Queue, str], Op[Any]]
    states: tuple[str, ...]
    ask: str
    then: str
    done: str


_CANCELLABLE = tuple(s.value for s in State if State.CANCELLED in TRANSITIONS[s])
VERBS: dict[str, Verb] = {
    "retry": Verb(
        act=lambda q, i: q._ops.retry_dead(i),
        states=("dead",),
        ask="Retry",
        then="They become pending again.",
        done="retried",
    ),
    "run_now": Verb(
        act=lambda q, i: q._ops.run_now(i),
        states=("scheduled", "suspended"),
        ask="Run now",
        then="They become pending now.",
        done="moved to pending",
    ),
    "cancel": Verb(
        act=lambda q, i: q._ops.cancel(i),
        states=_CANCELLABLE,
        ask="Cancel",
        then="They will never run; a running one loses its lease at once and its worker "
        "stops it at its next heartbeat.",
        done="cancelled",
    ),
    "delete": Verb(
        act=lambda q, i: q._ops.delete(i),
        states=tuple(s for s in STATES if s != "active"),
        ask="Delete",
        then="This cannot be undone.",
        done="deleted",
    ),
}
"""The actions a filter's matches can get, by the form's ``action``."""


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a run over the matches is, carried from request to request in the
    progress form: jobs acted on, refused, entries looked at, the cursor (None
    at the start), and the first refusals' reasons."""

    done: int = 0
    refused: int = 0
    looked: int = 0
    mark: Mark | None = None
    why: str = ""
    total: int = 0
    """Entries in the walk's range when the run began (what "looked at" is of)."""

    @staticmethod
    def of(form: Mapping[str, str]) -> Progress:
        mark = form.get("mark", "")
        return Progress(
            max(0, int_param(form.get("done"), 0)),
            max(0, int_param(form.get("refused"), 0)),
            max(0, int_param(form.get("looked"), 0)),
            Mark.parse(mark) if mark else None,
            form.get("why", "")[:300],
            max(0, int_param(form.get("total"), 0)),
        )

    def fields(self) -> list[tuple[str, str]]:
        mark = "" if self.mark is None else self.mark.text()
        return [
            ("done", str(self.done)),
            ("refused", str(self.refused)),
            ("looked", str(self.looked)),
            ("mark", mark),
            ("why", self.why),
            ("total", str(self.total)),
        ]


def over_matches(
    site: Site, request: Request, target: Target, form: dict[str, str], back: str
) -> Response:
    """The POST of a bulk action over a filter: ask first, then act in pages;
    ``back``: where to go when done (a path inside the app)."""
    verb_name, state = form.get("action", ""), form.get("state", "")
    verb = VERBS.get(verb_name)
    if verb is None or state not in verb.states:
        raise InvalidArgument(f"{verb_name!r} does not apply to {state or 'no'} jobs")
    flt, raw = filtered.read_filter(form, state)
    if not flt.on:
        raise InvalidArgument("no filter given: set one first (or use the state's own buttons)")
    kept = [(k, v) for k, v in form.items() if k in ("action", "scope", "state", "next", *raw)]
    now_ms = round(site.now([]) * 1000)
    what = f"{state} jobs of {target.name} ({filtered.describe(flt, state)})"
    if form.get("confirmed") != "yes":
        return _ask(site, request, target, (verb_name, verb), state, flt, now_ms, what, kept, back)
    at = Progress.of(form)
    if at.mark is None:  # the first part: what "looked at" is of
        total = site.source.in_range(target, state, flt, now_ms)
        at = dataclasses.replace(at, total=total)
    progress = _run(site, target, verb, state, flt, at, now_ms)
    if progress.mark is not None:
        refused = f" ({progress.refused:,} refused)" if progress.refused else ""
        return site.render(
            request,
            "progress.html",
            name=target.name,
            text=f"{verb.ask} every match: {verb.done} {progress.done:,} {what} so far"
            f"{refused}; looked at {progress.looked:,} of {progress.total:,} entries.",
            looked=progress.looked,
            of=progress.total,
            hidden=kept + progress.fields(),
            back=back,
        )
    message = f"{verb.done} {progress.done:,} {what}: looked at {progress.looked:,}"
    if progress.refused:
        message += f"; {progress.refused:,} refused — {progress.why}"
    return flash_redirect(request, back, message)


def _ask(
    site: Site,
    request: Request,
    target: Target,
    named: tuple[str, Verb],
    state: str,
    flt: JobFilter,
    now_ms: int,
    what: str,
    hidden: list[tuple[str, str]],
    back: str,
) -> Response:
    """The question before a bulk action over a filter, with the count of matches."""
    name, verb = named
    count, looked, complete = _count(site, target, state, flt, now_ms)
    if complete and not count:
        return flash_redirect(request, back, f"no {what}: nothing to do")
    if complete:
        question = f"{verb.ask} the {count:,} {what}? {verb.then}"
    else:
        question = (
            f"{verb.ask} every one of the {what}: at least {count:,} (found in the first "
            f"{looked:,} entries; the rest are looked at as it goes)? {verb.then}"
        )
    return site.render(
        request,
        "confirm.html",
        name=target.name,
        question=question,
        verb=name,
        hidden=hidden,
        back=back,
        diff=None,
    )


def _count(
    site: Site, target: Target, state: str, flt: JobFilter, now_ms: int
) -> tuple[int, int, bool]:
    """(matches, entries looked at, whether that was all of them): exact by ZCOUNT
    when only an age on the index's own time filters, else a bounded walk."""
    if flt.exact_by_score(state):
        n = site.source.in_range(target, state, flt, now_ms)
        return n, n, True
    count = looked = 0
    mark: Mark | None = None
    stop = time.monotonic() + COUNT_SECONDS
    while True:
        found = site.source.find(target, state, flt, mark, FIND_PAGE, FIND_PAGE, now_ms=now_ms)
        count, looked, mark = count + len(found.jobs), looked + found.looked, found.mark
        if mark is None:
            return count, looked, True
        if looked >= COUNT_ROWS or time.monotonic() > stop:
            return count, looked, False


def _run(
    site: Site, target: Target, verb: Verb, state: str, flt: JobFilter, at: Progress, now_ms: int
) -> Progress:
    """Act on the matches from ``at`` on, a chunk at a time, for RUN_SECONDS at most."""
    done, refused, looked, mark, why = at.done, at.refused, at.looked, at.mark, at.why
    stop = time.monotonic() + RUN_SECONDS
    while True:
        found = site.source.find(
            target, state, flt, mark, ACT_CHUNK, FIND_PAGE, now_ms=now_ms, acting=True
        )
        ok, no = site.source.act_on(target, found, verb.act)
        done, refused, looked = done + ok, refused + len(no), looked + found.looked
        if no and len(why) < 200:
            why = "; ".join([*filter(None, [why]), *list(no.values())[:2]])[:300]
        mark = found.resume(no)
        if mark is None or time.monotonic() > stop:
            return Progress(done, refused, looked, mark, why, at.total)
