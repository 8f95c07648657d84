"""``{% portal_nav %}``: the top bar's links for the signed-in user, by role (base.html)."""

from __future__ import annotations

from typing import Any

from django import template

from portal.selectors import navigation_for

register = template.Library()


@register.inclusion_tag("portal/_nav.html", takes_context=True)
def portal_nav(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"navigation": navigation_for(user=user), "nav": context.get("nav", "")}
