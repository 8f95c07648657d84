"""The "Import hooks" pages of an agent: a Claude Code settings file, or a FIM One agent
configuration, turned into the agent's hook declarations (:mod:`console.hook_import`).

Who may: the agent's operators and admins (another organisation's agent is not found: 404; an
auditor may not: 403). A Claude Code import creates command hooks, which run programs: it also
needs the code-hooks permission (403 without it, and the service checks it again). The page
previews (nothing saved) or imports, all or nothing, and then lists on the agent's page what was
imported and what was skipped, with why; a file that cannot be read is a form error.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse

from agents.admin.scoping import manages
from agents.hook_declarations import may_manage_code_hooks
from agents.models import Agent, HookDeclaration
from console.admin.subpages import agent_subpage
from console.hook_import import (
    CLAUDE,
    FIM_ONE,
    SOURCES,
    HookImportError,
    ImportPlan,
    hook_import_plan,
    hook_import_save,
)
from fimone.errors import ServiceError

MAX_FILE_BYTES = 1_000_000
URL_NAMES = {CLAUDE: "agents_agent_import_claude", FIM_ONE: "agents_agent_import_fimone"}
CODE_HOOKS_NEEDED = (
    "Importing Claude Code hooks creates command hooks, which run programs: it needs the 'Can "
    "create or change command, python and http hooks' permission."
)


class HookImportForm(forms.Form):
    """The file, uploaded or pasted; for Claude Code, the project directory its commands name."""

    file = forms.FileField(required=False, label="File")
    text = forms.CharField(
        required=False,
        label="Or paste it",
        widget=forms.Textarea(attrs={"rows": 12, "cols": 80, "spellcheck": "false"}),
    )
    project_dir = forms.CharField(
        required=False,
        label="Project directory",
        help_text="What $CLAUDE_PROJECT_DIR stands for in the commands: the directory on this "
        "server that holds your .claude folder (an absolute path).",
    )

    def __init__(self, *args: Any, source: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        file_help = {
            CLAUDE: "A Claude Code settings file (.claude/settings.json).",
            FIM_ONE: "A FIM One agent as JSON, or its model_config_json (hooks.class_hooks, hooks.builtin).",
        }
        self.fields["file"].help_text = file_help[source]
        if source != CLAUDE:
            del self.fields["project_dir"]

    def clean_project_dir(self) -> str | None:
        value = (self.cleaned_data.get("project_dir") or "").strip()
        if value and not value.startswith("/"):
            raise forms.ValidationError("Give an absolute path (it starts with /).")
        return value or None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        upload, pasted = cleaned.get("file"), (cleaned.get("text") or "").strip()
        if upload and pasted:
            raise forms.ValidationError("Upload a file or paste it, not both.")
        if upload:
            if upload.size > MAX_FILE_BYTES:
                raise forms.ValidationError(f"The file is larger than {MAX_FILE_BYTES:,} bytes.")
            try:
                cleaned["content"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        elif pasted:
            cleaned["content"] = pasted
        elif not self.errors:
            raise forms.ValidationError("Upload the file, or paste it.")
        return cleaned


def import_urls(model_admin: admin.ModelAdmin) -> list[Any]:
    """The two pages, for the agent admin's ``get_urls``."""

    def view_for(source: str) -> Any:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            return hook_import_view(model_admin, request, object_id, source=source)

        return model_admin.admin_site.admin_view(view)

    return [
        path(f"<path:object_id>/import-hooks/{source}/", view_for(source), name=name)
        for source, name in URL_NAMES.items()
    ]


def import_links(request: HttpRequest, agent: Agent) -> dict[str, str]:
    """The links the agent's page shows (template context): only those its user may follow."""
    if not manages(request, agent):
        return {}
    links = {"import_fimone_url": reverse(f"admin:{URL_NAMES[FIM_ONE]}", args=[agent.pk])}
    if may_manage_code_hooks(request.user):
        links["import_claude_url"] = reverse(f"admin:{URL_NAMES[CLAUDE]}", args=[agent.pk])
    return links


def _agent_or_refuse(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str, source: str
) -> Agent:
    agent = model_admin.get_object(request, object_id)
    if agent is None or not model_admin.has_view_or_change_permission(request, agent):
        raise Http404("No such agent.")
    if not (model_admin.has_change_permission(request, agent) and manages(request, agent)):
        raise PermissionDenied("Only the agent's operators may import hooks into it.")
    if source == CLAUDE and not may_manage_code_hooks(request.user):
        raise PermissionDenied(CODE_HOOKS_NEEDED)
    return agent


def _tell(request: HttpRequest, *, source: str, plan: ImportPlan, rows: list[HookDeclaration]) -> None:
    """What was imported and what was skipped, as messages on the agent's page."""
    names = ", ".join(row.name for row in rows)
    messages.success(
        request,
        f"{SOURCES[source]}: imported {len(rows)} hook declaration(s){': ' + names if names else ''}.",
    )
    if plan.require_confirmation_for_all:
        messages.success(request, "Every tool call of this agent now waits for a person's approval.")
    for note in plan.notes:
        messages.info(request, note)
    for item in plan.skipped:
        messages.warning(request, f"Skipped {item}")


def hook_import_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str, *, source: str
) -> HttpResponse:
    """Preview (``_preview`` in the post: nothing saved) or import; after an import, back to the
    agent's page with what was imported and skipped as messages."""
    agent = _agent_or_refuse(model_admin, request, object_id, source)
    form = HookImportForm(request.POST or None, request.FILES or None, source=source)
    report: list[str] | None = None
    if request.method == "POST" and form.is_valid():
        try:
            plan = hook_import_plan(
                source=source,
                text=form.cleaned_data["content"],
                project_dir=form.cleaned_data.get("project_dir"),
            )
            if "_preview" in request.POST:
                report = plan.report(saved=False)
            else:
                rows = hook_import_save(agent=agent, plan=plan, actor=request.user)
                _tell(request, source=source, plan=plan, rows=rows)
                return HttpResponseRedirect(reverse("admin:agents_agent_change", args=[agent.pk]))
        except (HookImportError, ServiceError) as exc:
            form.add_error(None, str(exc))
    return agent_subpage(
        model_admin,
        request,
        agent,
        "admin/agents/agent/import_hooks.html",
        title=f"Import {SOURCES[source]} into {agent.name}",
        form=form,
        source=source,
        report=report,
    )
