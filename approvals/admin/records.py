"""The admin of the approval record: confirmation requests and their event logs.

Read-only for everyone, superusers included: requests are written only by ``approvals.services``
(docs/design.md §1.4, §1.8). A request's page shows its full arguments, the arguments the model proposed
when a hook rewrote them, the append-only event log, and links to the run and the agent. Deciding
is not done here: approvers decide in the inbox or their channel.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from agents import events as ev
from agents.admin.scoping import ReadOnlyAdminMixin
from agents.models import RunEvent
from approvals.admin.scoping import visible
from approvals.event_lines import EventLine
from approvals.gate import pretty_arguments
from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.selectors import display_name, stages_of
from fimone.humanize import duration_text


class ConfirmationEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ConfirmationEvent
    extra = 0
    can_delete = False
    fields = ("created_at", "kind", "who", "details_text")
    readonly_fields = fields
    ordering = ("created_at", "pk")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConfirmationEvent]:
        return super().get_queryset(request).select_related("actor")

    @admin.display(description="by")
    def who(self, obj: ConfirmationEvent) -> str:
        return display_name(obj.actor) if obj.actor_id else obj.actor_external_id or "system"

    @admin.display(description="details")
    def details_text(self, obj: ConfirmationEvent) -> str:
        """The details as the inbox's event log reads them (names, not user ids), the exact
        JSON one click away."""
        if not obj.details:
            return "—"
        [line] = EventLine.lines_of(obj.request, [obj])
        rows = format_html_join("", "<div><strong>{}</strong>: {}</div>", line.rows)
        return format_html(
            '{}<details><summary>Technical details</summary><pre class="fim-pre">{}</pre></details>',
            rows,
            line.details,
        )


@admin.register(ConfirmationRequest)
class ConfirmationRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only, for everyone: the record of one tool call's approval."""

    list_display = (
        "tool_name",
        "status",
        "organization",
        "agent",
        "requester",
        "decider",
        "channel",
        "created_at",
        "time_to_decision",
    )
    list_select_related = ("organization", "agent", "requested_by", "responded_by")
    list_filter = (
        "status",
        "channel",
        "mode",
        ("organization", admin.RelatedOnlyFieldListFilter),
        ("agent", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("=id", "tool_name", "tool_call_id", "agent__name", "requested_by__username")
    date_hierarchy = "created_at"
    inlines = (ConfirmationEventInline,)
    fieldsets = (
        (None, {"fields": ("tool_name", "status", "organization", "agent_link", "run_link", "tool_call_id")}),
        (
            "Arguments",
            {"fields": ("arguments", "args_sha256", "edited", "proposed_arguments")},
        ),
        (
            "Decision",
            {
                "fields": (
                    "requester",
                    "approver_names",
                    "stages",
                    "allow_self_approval",
                    "approvals_required",
                    "any_rejection_rejects",
                    "escalation_level",
                    "decider",
                    "responded_by_external_id",
                    "responded_at",
                    "time_to_decision",
                    "reason",
                )
            },
        ),
        (
            "Delivery",
            {
                "fields": (
                    "mode",
                    "channel",
                    "channel_config",
                    "external_message_id",
                    "created_at",
                    "expires_at",
                ),
                "classes": ("collapse",),
            },
        ),
    )
    # A record: every field it shows is read-only.
    readonly_fields = tuple(field for _, options in fieldsets for field in options["fields"])

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConfirmationRequest]:
        return visible(request, super().get_queryset(request))

    @admin.display(description="requested by", ordering="requested_by__username")
    def requester(self, obj: ConfirmationRequest) -> str:
        return display_name(obj.requested_by)

    @admin.display(description="decided by", ordering="responded_by__username")
    def decider(self, obj: ConfirmationRequest) -> str:
        if obj.responded_by_id:
            return display_name(obj.responded_by)
        return obj.responded_by_external_id or "—"

    @admin.display(description="time to decision")
    def time_to_decision(self, obj: ConfirmationRequest) -> str:
        if obj.responded_at is None:
            return "—"
        return duration_text((obj.responded_at - obj.created_at).total_seconds())

    @admin.display(description="who could decide")
    def approver_names(self, obj: ConfirmationRequest) -> str:
        return ", ".join(sorted(display_name(user) for user in obj.approvers.all())) or "—"

    @admin.display(description="stages")
    def stages(self, obj: ConfirmationRequest) -> str:
        lines = stages_of(request=obj)
        if not lines:
            return "—"
        return format_html_join(mark_safe("<br>"), "{}", ((line.text,) for line in lines))

    @admin.display(description="arguments (as approved)")
    def arguments(self, obj: ConfirmationRequest) -> str:
        return format_html('<pre class="fim-pre">{}</pre>', pretty_arguments(obj.tool_args))

    @admin.display(description="changed by an approver")
    def edited(self, obj: ConfirmationRequest) -> str:
        if not obj.was_edited:
            return "no"
        return format_html(
            '{} changed them before approving; before the change:<pre class="fim-pre">{}</pre>',
            display_name(obj.edited_by),
            pretty_arguments(obj.proposed_args),
        )

    @admin.display(description="arguments the model proposed")
    def proposed_arguments(self, obj: ConfirmationRequest) -> str:
        proposed = (
            RunEvent.objects.filter(
                run_id=obj.run_id, type=ev.TOOL_PROPOSED, payload__tool_call_id=obj.tool_call_id
            )
            .values_list("payload", flat=True)
            .first()
        )
        if proposed is None:
            return "—"
        arguments = proposed.get("arguments")
        if arguments == obj.tool_args:
            return "the same (no hook rewrote them)"
        return format_html(
            '<pre class="fim-pre">{}</pre><p class="help">A hook rewrote these before the request.</p>',
            pretty_arguments(arguments),
        )

    @admin.display(description="agent")
    def agent_link(self, obj: ConfirmationRequest) -> str:
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:agents_agent_change", args=[obj.agent_id]), obj.agent.name
        )

    @admin.display(description="run")
    def run_link(self, obj: ConfirmationRequest) -> str:
        # The run's record in the admin: its status and its events (the transcript).
        return format_html(
            '<a href="{}">Run #{} — transcript and events</a>',
            reverse("admin:agents_run_change", args=[obj.run_id]),
            obj.run_id,
        )
