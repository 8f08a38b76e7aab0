"""How a state is shown to people: its short label in terminal tables, what the label
stands for, and its colour on the dashboard. One entry per ``State``, declared here
once: the CLI's stats table and the dashboard's stylesheet loop over ``State`` and
read it (a test fails when a state has no entry)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from leaseq.types import State

__all__ = ["STYLES", "StateStyle", "stylesheet"]


@dataclass(frozen=True, slots=True)
class StateStyle:
    """The look of one state."""

    short: str
    """Its column head in ``leaseq stats`` (a table that must fit 80 columns)."""
    meaning: str
    """What ``short`` stands for, in the table's legend; "" for a label that needs none."""
    colour: str
    """Its colour on the dashboard (a CSS colour), for the word and its counts."""


STYLES: Mapping[State, StateStyle] = MappingProxyType(
    {
        State.WAITING: StateStyle("wait", "waiting for parents", "#8a5a00"),
        State.PENDING: StateStyle("pend", "pending", "#2454c5"),
        State.SCHEDULED: StateStyle("sched", "", "#6d3fc0"),
        State.ACTIVE: StateStyle("run", "active", "#0b7a75"),
        State.SUSPENDED: StateStyle("zzz", "suspended (asleep)", "#a1367c"),
        State.SUCCEEDED: StateStyle("done", "succeeded", "#2e7d32"),
        State.DEAD: StateStyle("dead", "", "#b42318"),
        State.CANCELLED: StateStyle("canc", "cancelled", "#545b6b"),
    }
)
"""The look of every state, in ``State`` order."""


def stylesheet() -> str:
    """The dashboard's state rules (served as ``states.css`` beside ``leaseq.css``): a
    colour variable per state, the word and its tab in that colour, and a count's link
    in it too, bold."""
    lines = [":root {", *(f"  --{s.value}: {STYLES[s].colour};" for s in State), "}"]
    lines += [f".st-{s.value} {{ color: var(--{s.value}); }}" for s in State]
    links = ", ".join(f"td.num.st-{s.value} a" for s in State)
    lines.append(f"{links} {{ color: inherit; font-weight: 600; }}")
    return "\n".join(lines) + "\n"
