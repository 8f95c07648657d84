"""Evals in the admin: eval sets with their cases; eval runs started from here (the add page or
the "Run again" action, both through the service), with their pass rate and each case's output.
Every eval run's cases bypass hooks, and the admin says so."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from agents.admin.scoping import ORGANIZATION_LOOKUPS, OrganizationScopedAdmin, ReadOnlyAdminMixin
from evals import services
from evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from fimone.errors import ServiceError

ORGANIZATION_LOOKUPS.update(
    {
        EvalSet: "organization_id",
        EvalCase: "eval_set__organization_id",
        EvalRun: "organization_id",
        EvalResult: "eval_run__organization_id",
    }
)


class EvalCaseInline(admin.TabularInline):
    model = EvalCase
    extra = 1
    fields = ("position", "input", "expectation", "expected")


class ToolNamesField(forms.CharField):
    """A list of tool names typed one per line (blank lines ignored)."""

    widget = forms.Textarea(attrs={"rows": 3, "placeholder": "oa__purchase_list"})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class EvalSetForm(forms.ModelForm):
    live_tools = ToolNamesField(
        required=False,
        label="Tools called live",
        help_text=EvalSet._meta.get_field("live_tools").help_text.replace(
            'e.g. ["oa__purchase_list"]', "one per line, e.g. oa__purchase_list"
        ),
    )

    class Meta:
        model = EvalSet
        fields = ("organization", "name", "description", "live_tools", "tool_answers")


@admin.register(EvalSet)
class EvalSetAdmin(OrganizationScopedAdmin):
    form = EvalSetForm
    list_display = ("name", "organization", "case_count")
    list_filter = (("organization", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("name",)
    inlines = (EvalCaseInline,)

    @admin.display(description="cases")
    def case_count(self, obj: EvalSet) -> int:
        return obj.cases.count()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its runs are history


class EvalResultInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = EvalResult
    extra = 0
    can_delete = False
    fields = ("position", "input", "expectation", "expected", "outcome", "output", "detail", "run_link")
    readonly_fields = fields
    ordering = ("position",)

    @admin.display(description="run")
    def run_link(self, obj: EvalResult) -> str:
        return format_html(
            '<a href="{}">Run {}</a>', reverse("admin:agents_run_change", args=[obj.run_id]), obj.run_id
        )


class EvalRunStartForm(forms.ModelForm):
    class Meta:
        model = EvalRun
        fields = ("eval_set", "agent")


@admin.register(EvalRun)
class EvalRunAdmin(OrganizationScopedAdmin):
    list_display = ("id", "agent", "eval_set", "status", "score", "hooks_bypassed", "created_at")
    list_select_related = ("agent", "eval_set")
    list_filter = (
        "status",
        ("agent", admin.RelatedOnlyFieldListFilter),
        ("eval_set", admin.RelatedOnlyFieldListFilter),
    )
    inlines = (EvalResultInline,)
    actions = ("run_again",)

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = EvalRunStartForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ("eval_set", "agent")
        return (
            ("agent", "eval_set", "status"),
            ("score", "hooks_bypassed"),
            ("started_by", "created_at", "finished_at"),
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ()
        return (
            "agent",
            "eval_set",
            "status",
            "score",
            "hooks_bypassed",
            "started_by",
            "created_at",
            "finished_at",
        )

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.inlines if obj is not None else ()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a record: its results come from the runs

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("evals.add_evalrun")

    @admin.display(description="passed")
    def score(self, obj: EvalRun) -> str:
        if obj.pass_rate is None:
            return f"{obj.passed}/{obj.total} so far"
        return f"{obj.passed}/{obj.total} ({obj.pass_rate:.0%})"

    @admin.display(description="hooks bypassed", boolean=True)
    def hooks_bypassed(self, obj: EvalRun) -> bool:
        return True  # every case of an eval run does, and its run says so

    def save_model(self, request: HttpRequest, obj: EvalRun, form: Any, change: bool) -> None:
        # Adding an eval run starts it, through the service (which checks the role).
        self._started = services.eval_run_start(eval_set=obj.eval_set, agent=obj.agent, user=request.user)
        obj.pk = self._started.pk

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> Any:
        try:
            return super().add_view(request, form_url, extra_context)
        except ServiceError as exc:
            self.message_user(request, f"Not started: {exc.message}", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:evals_evalrun_changelist"))

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        return super().log_addition(request, self._started, message)

    @admin.action(description="Run again (same agent, same set)", permissions=["rerun"])
    def run_again(self, request: HttpRequest, queryset: QuerySet[EvalRun]) -> None:
        started, refused = [], []
        for eval_run in queryset.select_related("agent", "eval_set").order_by("pk"):
            try:
                new = services.eval_run_start(
                    eval_set=eval_run.eval_set, agent=eval_run.agent, user=request.user
                )
            except ServiceError as exc:
                refused.append(f"{eval_run}: {exc.message}")
            else:
                started.append(str(new.pk))
        if started:
            self.message_user(request, "Eval run(s) started: " + ", ".join(started), messages.SUCCESS)
        if refused:
            self.message_user(request, "Not started: " + "; ".join(refused), messages.WARNING)
