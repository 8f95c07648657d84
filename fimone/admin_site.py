"""The admin site as operators and auditors use it: named after the product, its index grouped by
what they do rather than by Python package.

Groups (in this order): Agents & hooks · Workflows & evals · Approvals · Channels · Connectors · Audit ·
Organisations & people · System. A model no group names lands in "System" (Celery beat's tables,
sign-in lockouts, API tokens: superusers only, since no role group grants them). The Audit group
also links the approval history page (filters, CSV export) for those who may read it. A model's
pages name its group in their breadcrumbs too (``fimone.templatetags.fim_admin``), not its app.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

INDEX_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("agents-hooks", "Agents & hooks", ("agents.agent", "hooks.*")),
    ("workflows-evals", "Workflows & evals", ("workflows.*", "evals.*")),
    ("approvals", "Approvals", ("approvals.approverpolicy", "approvals.confirmationrequest")),
    ("channels", "Channels", ("channels_im.channelconfig", "channels_im.imidentity")),
    ("connectors", "Connectors", ("agents.connector", "agents.connectoraction")),
    (
        "audit",
        "Audit",
        ("agents.run", "agents.toolexecution", "agents.connectorcalllog", "agents.conversation"),
    ),
    (
        "people",
        "Organisations & people",
        ("agents.organization", "agents.invitation", "auth.user", "auth.group"),
    ),
)
"""``(slug, title, models)``: each model as ``app_label.model_name``, or ``app_label.*``."""
SYSTEM = ("system", "System")


def _group_of(app_label: str, model_name: str) -> str:
    for slug, _title, members in INDEX_GROUPS:
        if f"{app_label}.{model_name}" in members or f"{app_label}.*" in members:
            return slug
    return SYSTEM[0]


def group_title(app_label: str, model_name: str) -> str:
    """The title of the index group ``app_label.model_name`` is listed in ("System" for none)."""
    slug = _group_of(app_label, model_name)
    return next((title for group, title, _members in INDEX_GROUPS if group == slug), SYSTEM[1])


def _order_in_group(slug: str, app_label: str, model_name: str) -> int:
    for group_slug, _title, members in INDEX_GROUPS:
        if group_slug == slug:
            for i, member in enumerate(members):
                if member in (f"{app_label}.{model_name}", f"{app_label}.*"):
                    return i
    return 0


class FimOneAdminSite(admin.AdminSite):
    site_header = "FIM One hooks · administration"
    site_title = "FIM One admin"
    index_title = "Configure agents, approvals and channels; audit what ran"

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        if app_label is not None:
            return apps  # an app's own page keeps Django's listing
        grouped: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for app in apps:
            for model in app["models"]:
                model_name = model["object_name"].lower()
                slug = _group_of(app["app_label"], model_name)
                grouped.setdefault(slug, []).append(
                    (_order_in_group(slug, app["app_label"], model_name), model)
                )
        history = self._history_link(request)
        if history is not None:
            grouped.setdefault("audit", []).insert(0, (-1, history))
        titles = [(slug, title) for slug, title, _members in INDEX_GROUPS] + [SYSTEM]
        return [
            {
                "name": title,
                "app_label": slug,
                "app_url": f"#{slug}",
                "has_module_perms": True,
                "models": [model for _order, model in sorted(grouped[slug], key=lambda pair: pair[0])],
            }
            for slug, title in titles
            if grouped.get(slug)
        ]

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        """Every admin page's context, with the header's links to the approvals inbox (and the
        count waiting) and to the approval history, for those who may use them."""
        context = super().each_context(request)
        context["approval_links"] = self._approval_links(request)
        return context

    def _approval_links(self, request: HttpRequest) -> dict[str, Any]:
        from agents.models import Membership, Role
        from approvals.selectors import inbox_for, may_use_inbox, may_view_history

        user = request.user
        if not getattr(user, "is_authenticated", False) or not user.is_staff:
            return {}
        pending = inbox_for(user=user).count()
        # Operators configure approvals and see them arrive, even with nothing to decide yet.
        configures = Membership.objects.filter(user=user, role__in=(Role.OPERATOR, Role.ADMIN)).exists()
        return {
            "inbox_url": reverse("approvals:inbox")
            if pending or configures or may_use_inbox(user=user)
            else "",
            "pending": pending,
            "history_url": reverse("approvals:history") if may_view_history(user=user) else "",
        }

    def _history_link(self, request: HttpRequest) -> dict[str, Any] | None:
        from approvals.selectors import may_view_history

        if not may_view_history(user=request.user):
            return None
        return {
            "name": "Approval history (filters, CSV export)",
            "object_name": "ApprovalHistory",
            "admin_url": reverse("approvals:history"),
            "add_url": None,
            "view_only": True,
            "perms": {"view": True},
        }
