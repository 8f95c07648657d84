"""The records of what ran: conversations, runs (with their events), tool executions, the
append-only log of connector calls and the shadow decisions (what hooks in shadow mode would have
done). Runs, their events, tool executions and the two logs are read-only records (a run may be
cancelled); conversations are history, never deleted.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from agents import services
from agents.admin.scoping import OrganizationScopedAdmin, ReadOnlyAdminMixin
from agents.models import Agent, ConnectorCallLog, Conversation, Run, RunEvent, ShadowDecision, ToolExecution
from agents.tools.base import readable_tool_name
from fimone.errors import ServiceError
from fimone.humanize import duration_text
from tenancy import selectors as tenancy_selectors
from tenancy.models import Role


@admin.register(Conversation)
class ConversationAdmin(OrganizationScopedAdmin):
    list_display = ("__str__", "agent", "organization", "user", "run_count", "created_at")
    list_select_related = ("agent", "organization", "user")
    list_filter = (("organization", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("title", "agent__name", "user__username")
    date_hierarchy = "created_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).annotate(_runs=Count("runs", distinct=True))

    def has_delete_permission(self, request: HttpRequest, obj: Conversation | None = None) -> bool:
        return False  # a conversation is history (its runs hang from it)

    @admin.display(description="runs", ordering="_runs")
    def run_count(self, obj: Conversation) -> int:
        return obj._runs  # type: ignore[attr-defined]


class RunEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = RunEvent
    extra = 0
    can_delete = False
    fields = ("seq", "type", "payload", "created_at")
    readonly_fields = fields
    ordering = ("seq",)


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    list_display = ("id", "status", "agent", "user", "execution_path", "hooks_bypassed", "created_at", "took")
    list_select_related = ("agent", "user")
    list_filter = (
        "status",
        "execution_path",
        "hooks_bypassed",
        ("agent__organization", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("=id", "input", "agent__name", "user__username")
    date_hierarchy = "created_at"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("agent", "user", "conversation", "parent_run"),
                    ("status", "execution_path", "hooks_bypassed", "cancel_requested"),
                    "input",
                    "output",
                    "error",
                    ("created_at", "started_at", "finished_at"),
                )
            },
        ),
        # The executor's bookkeeping: rarely what a reader wants, so folded away.
        (
            "Lease and checkpoint (internals)",
            {
                "fields": (("lease_owner", "lease_expires_at", "heartbeat_at"), "checkpoint", "hook_chain"),
                "classes": ("collapse",),
            },
        ),
    )
    inlines = (RunEventInline,)
    actions = ("cancel_runs",)

    @admin.display(description="took")
    def took(self, obj: Run) -> str:
        if obj.started_at is None or obj.finished_at is None:
            return "—"
        return duration_text((obj.finished_at - obj.started_at).total_seconds())

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Cancelling is the one change made to a run here: it needs the change permission."""
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        # The service checks that the staff user operates each run's organisation and records
        # who cancelled.
        cancelled = 0
        refused: list[str] = []
        for run in queryset.select_related("user", "agent").order_by("pk"):
            try:
                services.run_cancel(run=run, user=request.user)
            except ServiceError as exc:
                refused.append(f"run {run.pk}: {exc.message}")
            else:
                cancelled += 1
        if cancelled:
            self.message_user(
                request,
                f"{cancelled} run(s) cancelled (running ones stop at their next step).",
                messages.SUCCESS,
            )
        if refused:
            self.message_user(request, "Not cancelled: " + "; ".join(refused), messages.WARNING)


class ToolByTitleMixin:
    """A record's tool in its listing as people read it ("Purchase pay", as the tool-call history
    says it); the exact name stays on the row's page and in the search."""

    @admin.display(description="tool", ordering="tool_name")
    def tool(self, obj: Any) -> str:
        return readable_tool_name(obj.tool_name)


@admin.register(ToolExecution)
class ToolExecutionAdmin(ToolByTitleMixin, ReadOnlyAdminMixin, OrganizationScopedAdmin):
    list_display = ("tool", "status", "agent", "requested_by", "run", "started_at", "duration")
    list_select_related = ("run", "run__agent", "run__user")
    list_filter = (
        "status",
        ("run__agent__organization", admin.RelatedOnlyFieldListFilter),
        ("run__agent", admin.RelatedOnlyFieldListFilter),
        "run__hooks_bypassed",
    )
    search_fields = ("tool_name", "tool_call_id", "=run__id")
    date_hierarchy = "started_at"
    fields = (
        ("run", "tool_call_id"),
        ("tool_name", "status"),
        "args",
        "args_sha256",
        "result",
        ("started_at", "finished_at", "duration"),
    )
    readonly_fields = ("duration",)

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: ToolExecution) -> str:
        return "—" if obj.duration_ms is None else duration_text(obj.duration_ms / 1000)

    @admin.display(description="requested by", ordering="run__user__username")
    def requested_by(self, obj: ToolExecution) -> Any:
        return obj.run.user

    @admin.display(description="agent", ordering="run__agent__name")
    def agent(self, obj: ToolExecution) -> Agent:
        return obj.run.agent


AUDIT_READER_ROLES = (*tenancy_selectors.ORG_MANAGER_ROLES, Role.AUDITOR)


class AuditReaderScopedAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    """An append-only record: read by the operators, admins and auditors of its organisation."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return queryset
        readable = tenancy_selectors.organization_ids_of(user=request.user, roles=AUDIT_READER_ROLES)
        return queryset.filter(organization_id__in=readable)


@admin.register(ConnectorCallLog)
class ConnectorCallLogAdmin(ToolByTitleMixin, AuditReaderScopedAdmin):
    """The append-only log of connector calls written by the ``audit_log`` hook: nobody adds,
    changes or deletes a row; staff see the rows of the organisations where they are an operator,
    an admin or an auditor."""

    list_display = (
        "created_at",
        "tool",
        "outcome",
        "blocked_by",
        "organization",
        "agent",
        "user",
        "run",
        "duration_ms",
        "result_size",
    )
    list_select_related = ("organization", "agent", "user", "run")
    list_filter = (
        "outcome",
        ("organization", admin.RelatedOnlyFieldListFilter),
        ("agent", admin.RelatedOnlyFieldListFilter),
        "connector_slug",
    )
    search_fields = ("tool_name", "tool_call_id", "blocked_by", "=run__id")
    date_hierarchy = "created_at"
    fields = (
        ("organization", "agent", "user"),
        ("run", "tool_call_id"),
        ("tool_name", "connector_slug"),
        "arguments",
        ("outcome", "blocked_by"),
        ("duration_ms", "result_size", "result_sha256"),
        "error",
        "created_at",
    )


@admin.register(ShadowDecision)
class ShadowDecisionAdmin(ToolByTitleMixin, AuditReaderScopedAdmin):
    """What hooks in shadow mode would have done (``hooks.shadow``): one append-only row per
    decision that would have changed a call; the calls went on as if the hooks were absent. Each
    hook's row on its agent's (or organisation's) page counts them and links here."""

    list_display = ("created_at", "hook", "decision", "tool", "point", "source", "agent", "run")
    list_select_related = ("organization", "agent", "run")
    list_filter = (
        "decision",
        "point",
        "source",
        ("organization", admin.RelatedOnlyFieldListFilter),
        ("agent", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("hook", "tool_name", "tool_call_id", "=run__id", "=declaration_pk")
    date_hierarchy = "created_at"
    fields = (
        ("organization", "agent", "run"),
        ("hook", "source", "declaration_pk"),
        ("point", "tool_name", "tool_call_id"),
        "decision",
        "detail",
        "created_at",
    )
