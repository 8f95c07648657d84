"""MCP gateways in the admin: open one on an agent, read its address and how to point a client at
it, follow the calls made through it. Scoped to the staff user's organisations
(``agents.admin.scoping``); calls are records nobody edits."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agents.admin.scoping import ORGANIZATION_LOOKUPS, OrganizationScopedAdmin, ReadOnlyAdminMixin
from mcp_gateway.models import Gateway, GatewayCall

ORGANIZATION_LOOKUPS.update({Gateway: "organization_id", GatewayCall: "gateway__organization_id"})


@admin.register(Gateway)
class GatewayAdmin(OrganizationScopedAdmin):
    list_display = ("name", "agent", "organization", "enabled", "address", "call_count", "created_at")
    list_select_related = ("agent", "organization")
    list_filter = ("enabled", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "agent__name")
    fields = (
        "organization",
        "agent",
        "name",
        "enabled",
        "address",
        "how_to_connect",
        "created_by",
        "created_at",
    )
    readonly_fields = ("address", "how_to_connect", "created_by", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Gateway]:
        return super().get_queryset(request).annotate(_calls=Count("calls"))

    def save_model(self, request: HttpRequest, obj: Gateway, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        if obj.agent_id is not None:
            obj.organization_id = obj.agent.organization_id  # one tenant, one wall
        super().save_model(request, obj, form, change)

    def has_delete_permission(self, request: HttpRequest, obj: Gateway | None = None) -> bool:
        return False  # its calls are history: switch it off instead

    @admin.display(description="calls", ordering="_calls")
    def call_count(self, obj: Gateway) -> int:
        return getattr(obj, "_calls", 0)

    @admin.display(description="address")
    def address(self, obj: Gateway) -> str:
        return obj.path if obj.pk else "— (given when saved)"

    @admin.display(description="how to connect")
    def how_to_connect(self, obj: Gateway) -> str:
        if not obj.pk:
            return "Save the gateway to see its address."
        address = f"{settings.SITE_URL}{obj.path}"
        config = {
            "mcpServers": {
                "fimone": {
                    "type": "http",
                    "url": address,
                    "headers": {"Authorization": "Bearer <your API token>"},
                }
            }
        }
        return format_html(
            "Point an MCP client at <code>{}</code> with a person's API token "
            "(each person makes their own on the portal's MCP page). Claude Code:"
            '<pre>claude mcp add --transport http fimone {} --header "Authorization: Bearer &lt;token&gt;"'
            "</pre>or in <code>.mcp.json</code>:<pre>{}</pre>"
            "Every call runs as a run of {} behind its hooks and approval gate.",
            address,
            address,
            json.dumps(config, indent=2),
            obj.agent,
        )


@admin.register(GatewayCall)
class GatewayCallAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    list_display = ("tool_name", "gateway", "user", "run_link", "status", "created_at", "delivered_at")
    list_select_related = ("gateway", "user", "run")
    list_filter = (("gateway", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("tool_name", "user__username")
    fields = ("gateway", "user", "tool_name", "arguments", "run_link", "status", "created_at", "delivered_at")
    readonly_fields = fields

    @admin.display(description="run")
    def run_link(self, obj: GatewayCall) -> str:
        return format_html(
            '<a href="{}">Run {}</a>', reverse("admin:agents_run_change", args=[obj.run_id]), obj.run_id
        )

    @admin.display(description="status")
    def status(self, obj: GatewayCall) -> str:
        return obj.run.get_status_display()
