"""``{{ request|tool_label }}``: the tool of an approval request as people read it."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


def readable_tool_name(name: str) -> str:
    """A tool's internal name as people read it when it has no title: ``oa__purchase_pay`` →
    "Purchase pay" (the connector's prefix is an operator's concern)."""
    words = name.rpartition("__")[2].replace("_", " ").replace("-", " ").split()
    text = " ".join(words) or name
    return text[:1].upper() + text[1:]


@register.filter
def tool_label(request: Any) -> str:
    title = str(getattr(request, "tool_title", "") or "").strip()
    return title or readable_tool_name(str(getattr(request, "tool_name", "") or ""))
