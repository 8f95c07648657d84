"""Numbers and moments as people read them on pages and in the admin."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from django.utils.timesince import timesince


def duration_text(seconds: float | None) -> str:
    """``seconds`` rounded for people: "—", "0.4 s", "45 s", "12 min", "3 h 5 min"."""
    if seconds is None:
        return "—"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 120:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def ago(moment: dt.datetime) -> str:
    """ "just now" within the first minute (``timesince`` counts whole minutes and would say
    "0 minutes"), else "3 minutes ago", "2 hours, 5 minutes ago"."""
    if timezone.now() - moment < dt.timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment)} ago"


def clipped(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters: cut at the last word that fits, with
    "…" (mid-word only when a single word is longer than the limit)."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"
