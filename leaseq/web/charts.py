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
    ("enqueued", "#4a7bd0", "enqueued"),
    ("succeeded", "#2e9d57", "succeeded"),
    ("failed", "#e08a1e", "failed"),
    ("dead", "#c93a3a", "dead-lettered"),
)
"""(field, colour, label) of each line drawn."""

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 560, 150, 44, 18, 8


def sum_histories(parts: Sequence[History]) -> tuple[list[Bucket], list[Bucket]]:
    """(minute buckets, ten-minute buckets) summed over every queue: the sum a
    sharded queue makes of its shards (``history.merge``), over queues."""
    if not parts:
        return [], []
    total = merge("", parts)
    return total.minutes, total.tens


def chart(buckets: Sequence[Bucket], title: str, chart_id: str) -> str:
    """An SVG line chart of ``SERIES`` over ``buckets`` (jobs per bucket)."""
    n = max(1, len(buckets))
    peak = max([b.get(f) for b in buckets for f, _, _ in SERIES] + [1])
    inner_w, inner_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP

    def x(i: int) -> float:
        return LEFT + (inner_w * i / max(1, n - 1))

    def y(v: int) -> float:
        return TOP + inner_h - inner_h * v / peak

    parts = [
        f'<svg id="{escape(chart_id)}" class="chart" data-chart="{escape(chart_id)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{LEFT}" y1="{TOP + inner_h}" x2="{WIDTH - 4}" y2="{TOP + inner_h}" '
        'stroke="#999" stroke-width="1"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + inner_h}" '
        'stroke="#999" stroke-width="1"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end" font-size="10" '
        f'fill="#666">{peak:,}</text>',
        f'<text x="{LEFT - 4}" y="{TOP + inner_h}" text-anchor="end" font-size="10" '
        'fill="#666">0</text>',
    ]
    if buckets:
        for i in (0, n // 2, n - 1):
            label = datetime.fromtimestamp(buckets[i].start, tz=timezone.utc).strftime("%H:%M")
            anchor = "start" if i == 0 else "end" if i == n - 1 else "middle"
            parts.append(
                f'<text x="{x(i):.1f}" y="{HEIGHT - 4}" text-anchor="{anchor}" font-size="10" '
                f'fill="#666">{label}</text>'
            )
    for field, colour, label in SERIES:
        points = " ".join(f"{x(i):.1f},{y(b.get(field)):.1f}" for i, b in enumerate(buckets))
        total = sum(b.get(field) for b in buckets)
        parts.append(
            f'<polyline data-series="{field}" data-total="{total}" points="{points}" '
            f'fill="none" stroke="{colour}" stroke-width="1.6"><title>{escape(label)}: '
            f"{total:,}</title></polyline>"
        )
    parts.append("</svg>")
    return "".join(parts)
