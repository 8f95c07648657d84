"""``{{ moment|ago }}``: "just now", "3 minutes ago" (fimone/humanize.py)."""

from __future__ import annotations

import datetime as dt

from django import template

from fimone.humanize import ago as ago_text

register = template.Library()


@register.filter
def ago(moment: dt.datetime | None) -> str:
    return ago_text(moment) if moment is not None else ""
