"""Workflows in the admin: define and start them, follow a run's node states.

Everything is scoped to the staff user's organisations (``agents.admin.scoping``); starting and
cancelling go through the services, which check the roles again.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.html import format_html

from agents.admin.scoping import ORGANIZATION_LOOKUPS, OrganizationScopedAdmin, ReadOnlyAdminMixin
from fimone.errors import ServiceError
from workflows import checks, services
from workflows.models import Workflow, WorkflowNodeRun, WorkflowRun

# The organisation of each of this app's models, for the admin's per-organisation scoping.
ORGANIZATION_LOOKUPS.update(
    {
        Workflow: "organization_id",
        WorkflowRun: "organization_id",
        WorkflowNodeRun: "workflow_run__organization_id",
    }
)


class StartForm(forms.Form):
    input = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, max_length=20_000)


@admin.register(Workflow)
class WorkflowAdmin(OrganizationScopedAdmin):
    list_display = ("name", "organization", "connector_agent", "require_confirmation_for_all", "start_link")
    list_filter = (
        ("organization", admin.RelatedOnlyFieldListFilter),
        ("archived_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("name",)
    fields = (
        "organization",
        "name",
        "description",
        "graph",
        "hooks",
        "require_confirmation_for_all",
        "connector_agent",
        "effective_chain",
        "archived_at",
    )
    readonly_fields = ("effective_chain",)

    @admin.display(description="CONNECTOR nodes' hook chain")
    def effective_chain(self, obj: Workflow) -> str:
        """What a run started now would keep for its CONNECTOR nodes, in running order."""
        if obj.pk is None:
            return "—"
        chain = checks.workflow_chain(workflow=obj)
        if "error" in chain:
            return f"cannot be built: {chain['error']}"
        declared = [f"{item['name']} ({item['point']}, {item['source']})" for item in chain["declared"]]
        return " → ".join([*declared, *chain["system"]]) or "—"

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its runs are history: archive it instead

    def save_model(self, request: HttpRequest, obj: Workflow, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="start")
    def start_link(self, obj: Workflow) -> str:
        return format_html(
            '<a href="{}">Start…</a>', reverse("admin:workflows_workflow_start", args=[obj.pk])
        )

    def get_urls(self) -> list[Any]:
        start = self.admin_site.admin_view(self.start_view)
        return [path("<int:workflow_id>/start/", start, name="workflows_workflow_start"), *super().get_urls()]

    def start_view(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        workflow = self.get_queryset(request).filter(pk=workflow_id).first()
        if workflow is None or not self.has_view_permission(request, workflow):
            self.message_user(request, "No such workflow.", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:workflows_workflow_changelist"))
        form = StartForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                workflow_run = services.workflow_run_start(
                    workflow=workflow, user=request.user, input=form.cleaned_data["input"]
                )
            except ServiceError as exc:
                self.message_user(request, f"Not started: {exc.message}", messages.WARNING)
            else:
                self.message_user(request, f"Workflow run {workflow_run.pk} started.", messages.SUCCESS)
                return HttpResponseRedirect(
                    reverse("admin:workflows_workflowrun_change", args=[workflow_run.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "workflow": workflow,
            "form": form,
            "title": "Start",
        }
        return render(request, "admin/workflows/start.html", context)


class NodeInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = WorkflowNodeRun
    extra = 0
    can_delete = False
    fields = (
        "node_id",
        "kind",
        "status",
        "run_link",
        "input",
        "output",
        "error",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields
    ordering = ("position",)

    @admin.display(description="run")
    def run_link(self, obj: WorkflowNodeRun) -> str:
        if obj.run_id is None:
            return "—"
        return format_html(
            '<a href="{}">Run {}</a>', reverse("admin:agents_run_change", args=[obj.run_id]), obj.run_id
        )


@admin.register(WorkflowRun)
class WorkflowRunAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    list_display = ("id", "workflow", "status", "current_node", "started_by", "created_at", "finished_at")
    list_select_related = ("workflow", "started_by")
    list_filter = ("status", ("workflow", admin.RelatedOnlyFieldListFilter))
    search_fields = ("=id", "workflow__name", "input")
    fields = (
        ("workflow", "status", "current_node"),
        ("started_by", "created_at", "finished_at"),
        "input",
        "output",
        "error",
        "graph",
        "hook_chain",
    )
    readonly_fields = (
        "workflow",
        "status",
        "current_node",
        "started_by",
        "created_at",
        "finished_at",
        "input",
        "output",
        "error",
        "graph",
        "hook_chain",
    )
    inlines = (NodeInline,)
    actions = ("cancel_selected",)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.change_workflowrun")

    @admin.action(description="Cancel selected workflow runs", permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        done, refused = 0, []
        for workflow_run in queryset.order_by("pk"):
            try:
                services.workflow_run_cancel(workflow_run=workflow_run, user=request.user)
            except ServiceError as exc:
                refused.append(f"{workflow_run.pk}: {exc.message}")
            else:
                done += 1
        if done:
            self.message_user(request, f"{done} workflow run(s) cancelled.", messages.SUCCESS)
        if refused:
            self.message_user(request, "Not cancelled: " + "; ".join(refused), messages.WARNING)
