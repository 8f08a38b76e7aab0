"""Inline SVG charts of the queues' history (leaseq.store.history), drawn on the server.

No JavaScript and no CDN: the page carries the SVG itself, coloured with
presentation attributes (the dashboard's CSP forbids inline styles), and the
live refresh swaps it with the rest of the overview.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from leaseq.store.history import Bucket, History, merge

__all__ = ["SERIES", "chart", "sum_histories"]

SERIES = (
    ("enqueued", "#2454c5", "enqueued"),
    ("succeeded", "#2e7d32", "succeeded"),
    ("failed", "#b54708", "failed"),
    ("dead", "#b42318", "dead-lettered"),
)
"""(field, colour, label) of each line drawn: colours dark enough for text on white."""

WIDTH, LEFT, RIGHT, TOP, PANEL, GAP, AXIS = 480, 84, 62, 4, 40, 8, 22
"""The chart's geometry in viewBox units: one panel (a small multiple) per
series, each with its own scale, so no line hides another; the time axis below."""


def sum_histories(parts: Sequence[History]) -> tuple[list[Bucket], list[Bucket]]:
    """(minute buckets, ten-minute buckets) summed over every queue: the sum a
    sharded queue makes of its shards (``history.merge``), over queues."""
    if not parts:
        return [], []
    total = merge("", parts)
    return total.minutes, total.tens


def nice_top(peak: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``peak`` (>= 1)."""
    top = 1
    while True:
        for step in (1, 2, 5):
            if top * step >= peak:
                return top * step
        top *= 10


def chart(buckets: Sequence[Bucket], title: str, chart_id: str) -> str:
    """An SVG of ``SERIES`` over ``buckets`` (jobs per bucket): a panel per series
    with its own axis (0, half and a round maximum, labelled with the unit),
    a shared time axis (UTC) with a tick every sixth of the span, and a
    tooltip (``<title>``) per bucket giving its time and every count."""
    height = TOP + len(SERIES) * (PANEL + GAP) + AXIS
    unit = "/min" if not buckets or buckets[0].seconds <= 60 else f"/{_span(buckets)}"
    parts = [
        f'<svg id="{escape(chart_id)}" class="chart" data-chart="{escape(chart_id)}" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    if buckets:
        parts.extend(_time_axis(buckets))
    for row, (field, colour, label) in enumerate(SERIES):
        parts.extend(_panel(buckets, row, field, colour, label, unit))
    parts.extend(_hover_targets(buckets))
    parts.append("</svg>")
    return "".join(parts)


_INNER = WIDTH - LEFT - RIGHT
"""The width the panels plot in."""
_BOTTOM = TOP + len(SERIES) * (PANEL + GAP) - GAP
"""The bottom of the last panel, where the time axis goes."""


def _x(i: int, n: int) -> float:
    """Where bucket ``i`` of ``n`` (at least one) is drawn."""
    return LEFT + _INNER * i / max(1, n - 1)


def _time_axis(buckets: Sequence[Bucket]) -> list[str]:
    """Time ticks and their grid lines, through every panel."""
    n = len(buckets)
    parts = []
    for k in range(7):
        i = round((n - 1) * k / 6)
        label = datetime.fromtimestamp(buckets[i].start, tz=timezone.utc).strftime("%H:%M")
        anchor = "start" if k == 0 else "end" if k == 6 else "middle"
        parts.append(
            f'<line x1="{_x(i, n):.1f}" y1="{TOP}" x2="{_x(i, n):.1f}" y2="{_BOTTOM + 3}" '
            'stroke="#e2e5eb" stroke-width="1"/>'
            f'<text x="{_x(i, n):.1f}" y="{_BOTTOM + 14}" text-anchor="{anchor}" font-size="10" '
            f'fill="#454c5c">{label}</text>'
        )
    parts.append(
        f'<text x="{LEFT + _INNER + 4}" y="{_BOTTOM + 14}" font-size="9.5" '
        'fill="#454c5c">UTC</text>'
    )
    return parts


def _panel(
    buckets: Sequence[Bucket], row: int, field: str, colour: str, label: str, unit: str
) -> list[str]:
    """One series' panel: its axis on its own scale, its name and total, its line."""
    n = max(1, len(buckets))
    top = TOP + row * (PANEL + GAP)
    values = [b.get(field) for b in buckets]
    peak = nice_top(max([*values, 1]))
    total = sum(values)
    axis = (
        f'<line x1="{LEFT}" y1="{top + PANEL}" x2="{LEFT + _INNER}" y2="{top + PANEL}" '
        'stroke="#8a91a0" stroke-width="1"/>'
        f'<line x1="{LEFT}" y1="{top + PANEL / 2}" x2="{LEFT + _INNER}" '
        f'y2="{top + PANEL / 2}" stroke="#eef0f4" stroke-width="1"/>'
        f'<text x="4" y="{top + 11}" font-size="11" font-weight="600" fill="{colour}">'
        f"{escape(label)}</text>"
        f'<text x="4" y="{top + 24}" font-size="9.5" fill="#454c5c">{total:,} in all</text>'
        f'<text x="{LEFT + _INNER + 4}" y="{top + 8}" font-size="9.5" '
        f'fill="#454c5c">{peak:,}{unit}</text>'
        f'<text x="{LEFT + _INNER + 4}" y="{top + PANEL / 2 + 3}" font-size="9.5" '
        f'fill="#454c5c">{peak / 2:,g}</text>'
        f'<text x="{LEFT + _INNER + 4}" y="{top + PANEL}" font-size="9.5" '
        'fill="#454c5c">0</text>'
    )
    points = " ".join(
        f"{_x(i, n):.1f},{top + PANEL - PANEL * v / peak:.1f}" for i, v in enumerate(values)
    )
    line = (
        f'<polyline data-series="{field}" data-total="{total}" data-peak="{peak}" '
        f'points="{points}" fill="none" stroke="{colour}" stroke-width="1.8" '
        f'stroke-linejoin="round"><title>{escape(label)}: {total:,}</title></polyline>'
    )
    return [axis, line]


def _hover_targets(buckets: Sequence[Bucket]) -> list[str]:
    """One hover target per bucket, across the panels, its tooltip every count."""
    n = max(1, len(buckets))
    half = _INNER / max(1, n - 1) / 2
    parts = []
    for i, b in enumerate(buckets):
        when = datetime.fromtimestamp(b.start, tz=timezone.utc).strftime("%H:%M")
        counts = ", ".join(f"{label} {b.get(f):,}" for f, _, label in SERIES)
        left = max(LEFT, _x(i, n) - half)
        width = min(LEFT + _INNER, _x(i, n) + half) - left
        parts.append(
            f'<rect class="bucket" data-bucket="{i}" x="{left:.1f}" y="{TOP}" '
            f'width="{max(width, 0.5):.1f}" height="{_BOTTOM - TOP}" fill="transparent">'
            f"<title>{when} UTC ({_span([b])}): {counts}</title></rect>"
        )
    return parts


def _span(buckets: Sequence[Bucket]) -> str:
    seconds = buckets[0].seconds if buckets else 60
    return f"{seconds / 60:g} min" if seconds < 3600 else f"{seconds / 3600:g} h"
