"""The pages of one agent beside its change page (Try this chain, Import hooks, Replay): what
every one of them renders with."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse

from agents.models import Agent


def agent_subpage(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    agent: Agent,
    template: str,
    *,
    title: str,
    **context: Any,
) -> TemplateResponse:
    """``template`` (one extending ``admin/agents/agent/subpage.html``) for ``agent``, titled
    ``title``, with ``context`` on top of what every such page needs: the admin site's context,
    and the model and agent its breadcrumbs name and link to. The caller has already checked
    that the user may see the page."""
    return TemplateResponse(
        request,
        template,
        {
            **model_admin.admin_site.each_context(request),
            "opts": model_admin.opts,
            "title": title,
            "agent": agent,
            "original": agent,
            "has_view_permission": True,
            **context,
        },
    )
