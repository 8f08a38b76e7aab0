"""Times as people read them: spans ("3 min"), UTC stamps, "in 5 s" / "2 min ago".

Shared by the CLI's tables and the dashboard's pages.
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["iso", "span", "utc", "when"]


def span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} days"


def utc(t: float) -> datetime | None:
    """Epoch seconds as an aware UTC datetime; None when no datetime can hold
    them (a time field set by hand to year 3,000,000 or to -10^17 ms)."""
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def iso(t: float) -> str:
    """Epoch seconds as ISO 8601 in UTC, to the millisecond ("out of range" for
    a time no datetime can hold)."""
    stamp = utc(t)
    return "out of range" if stamp is None else stamp.isoformat(timespec="milliseconds")


def when(t: float, now: float, lease: bool = False) -> str:
    stamp = iso(t)
    if lease:
        rel = f"expires in {span(t - now)}" if t >= now else f"expired {span(now - t)} ago"
    else:
        rel = f"in {span(t - now)}" if t > now else f"{span(now - t)} ago"
    return f"{stamp}  ({rel})"
