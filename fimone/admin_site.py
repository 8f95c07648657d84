"""The admin site as operators and auditors use it: named after the product, its index grouped by
what they do rather than by Python package.

Groups (in this order): Agents & hooks · Workflows & evals · Approvals · Channels · Connectors · Audit ·
Organisations & people · System. A model no group names lands in "System" (Celery beat's tables,
sign-in lockouts, API tokens: superusers only, since no role group grants them). The Audit group
also links the approval history page (filters, CSV export) for those who may read it. A model's
pages name its group in their breadcrumbs too (``fimone.templatetags.fim_admin``), not its app.

This module sits below every app, so what the index and the header show of an app's pages beside
its models (the approvals inbox and history) is registered here by that app at start-up, in its
``AppConfig.ready`` (:func:`register_header_links`, :func:`register_index_entry`): import down,
signal up (docs/design.md §2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from fimone.sign_in import AdminSignInForm

INDEX_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("agents-hooks", "Agents & hooks", ("agents.agent", "hooks.*", "mcp_gateway.gateway")),
    ("workflows-evals", "Workflows & evals", ("workflows.*", "evals.*")),
    ("approvals", "Approvals", ("approvals.approverpolicy", "approvals.confirmationrequest")),
    ("channels", "Channels", ("approvals.channelconfig", "channels_im.imidentity")),
    ("connectors", "Connectors", ("agents.connector", "agents.connectoraction")),
    (
        "audit",
        "Audit",
        (
            "agents.run",
            "agents.toolexecution",
            "agents.connectorcalllog",
            "agents.shadowdecision",
            "agents.conversation",
            "mcp_gateway.gatewaycall",
            "sso.signinrecord",
        ),
    ),
    (
        "people",
        "Organisations & people",
        ("tenancy.organization", "tenancy.invitation", "sso.identityprovider", "auth.user", "auth.group"),
    ),
)
"""``(slug, title, models)``: each model as ``app_label.model_name``, or ``app_label.*``."""
SYSTEM = ("system", "System")

HeaderLinks = Callable[[HttpRequest], dict[str, Any]]
"""``links(request)``: what the header of every admin page shows the signed-in user, as a dict the
template reads (empty when nothing is for them)."""
IndexEntry = Callable[[HttpRequest], dict[str, Any] | None]
"""``entry(request)``: an index row that is no model (shaped like Django's ``app_list`` models:
``name``, ``object_name``, ``admin_url``, ``add_url``, ``view_only``, ``perms``), or ``None`` when
the user may not see it."""

_header_links: dict[str, HeaderLinks] = {}
_index_entries: dict[str, tuple[str, IndexEntry]] = {}
_logout_view: list[Callable[[HttpRequest], HttpResponse]] = []


def register_logout_view(view: Callable[[HttpRequest], HttpResponse]) -> None:
    """Sign the admin's users out through ``view`` instead of Django's (single sign-on installs
    one that also offers the identity provider's sign-out). Registering again replaces it."""
    _logout_view[:] = [view]


def register_header_links(name: str, links: HeaderLinks) -> None:
    """Give every admin page's context ``name``: ``links(request)``. Registering a name again
    replaces its links (so a repeated ``ready`` is harmless)."""
    _header_links[name] = links


def register_index_entry(name: str, group: str, entry: IndexEntry) -> None:
    """List ``entry(request)`` first in the index group ``group`` (a slug of :data:`INDEX_GROUPS`),
    for the users it is not ``None`` for. ``name`` identifies the entry: registering it again
    replaces it."""
    _index_entries[name] = (group, entry)


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
    login_form = AdminSignInForm  # says why a password was refused (sign in through the provider)

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
        for group, entry in _index_entries.values():
            row = entry(request)
            if row is not None:
                grouped.setdefault(group, []).insert(0, (-1, row))
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

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """Django's sign-in page, but for someone already signed in who may not use the admin (a
        member who followed a link to ``/admin/``): a page that says so and leads back, instead of
        Django's bare "not authorized" form."""
        if request.method == "GET" and request.user.is_authenticated and not self.has_permission(request):
            return TemplateResponse(request, "admin/not_for_you.html", status=403)
        return super().login(request, extra_context)

    def logout(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if _logout_view:
            request.current_app = self.name
            return _logout_view[0](request)
        return super().logout(request, extra_context)

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        """Every admin page's context, with the header links the apps registered
        (:func:`register_header_links`)."""
        context = super().each_context(request)
        for name, links in _header_links.items():
            context[name] = links(request)
        return context
