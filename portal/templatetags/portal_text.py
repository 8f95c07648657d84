"""``{{ request|tool_label }}``: the tool of an approval request as people read it."""

from __future__ import annotations

from typing import Any

from django import template

from agents.tools.base import readable_tool_name

register = template.Library()


@register.filter
def tool_label(request: Any) -> str:
    title = str(getattr(request, "tool_title", "") or "").strip()
    return title or readable_tool_name(str(getattr(request, "tool_name", "") or ""))
