"""The admin of agents: their model configuration and write-only provider key, their own hooks
(``console.admin.hook_inlines``), delegation, and on an agent's page its effective hook chain and
the "Try this chain" page.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from django.urls import reverse

from agents.admin.archiving import ArchivableAdminMixin
from agents.admin.bound_secrets import SecretsClearedMessageMixin, SecretsEntryFormMixin
from agents.admin.scoping import OrganizationScopedAdmin, manages
from agents.checks import API_KEY_MISPLACED, hook_chain_of, hooks_declaration
from agents.hook_declarations import hook_declarations_adopt_config
from agents.models import Agent, HookDeclaration, ToolExecution
from agents.tools.base import readable_tool_name
from approvals.presentation import summary_of
from console.admin.hook_import import import_links, import_urls
from console.admin.hook_inlines import HOOK_HISTORY_FIELDS, AgentHookInline, hook_subject
from console.admin.replays import replay_urls
from console.admin.subpages import agent_subpage
from console.chain_trial import NO_RESULT, TrialError, agent_tool_specs, chain_trial, tool_choices
from console.config_editor import BuiltinToolsField, ModelConfigField
from console.hook_editor import ToolArgsField, chain_rows, gate_reasons
from fimone.forms import WriteOnlySecretsForm, secrets_state
from fimone.history import ConfigHistoryAdmin
from fimone.parsers import loads as json_loads
from hooks.catalog import HookDeclarationError, parse_declaration
from tenancy.models import Membership, Role


class AgentAdminForm(SecretsEntryFormMixin, WriteOnlySecretsForm):
    """A provider key typed into the model config is refused, and taken out of the text the page
    shows back (the config field re-renders what was typed). The key is bound to the model
    endpoint it was entered for (``base_url``, or the platform's without one)."""

    secrets_example = '{"api_key": "sk-…"}'
    secrets_address = "the model config's base_url, or the platform's endpoint without one"

    model_config_json = ModelConfigField(
        label="Settings",
        required=False,
        help_text="The model that answers, and how it is called. Saved with the agent; a "
        "configuration with which the agent could not run is refused.",
    )
    builtin_tools = BuiltinToolsField(
        label="Built-in tools",
        required=False,
        help_text="Tools that run inside the platform and reach nothing outside it.",
    )

    class Meta:
        model = Agent
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_in_config = False
        if self.is_bound:
            self.data = self.data.copy()
            field = self.add_prefix("model_config_json")
            for name in (field, f"{field}__advanced", f"initial-{field}"):
                redacted = _without_api_key(self.data.get(name))
                if redacted is not None:
                    self.data[name] = redacted
                    self.key_in_config = self.key_in_config or name != f"initial-{field}"

    def clean_model_config_json(self) -> Any:
        if self.key_in_config:
            raise forms.ValidationError(API_KEY_MISPLACED)
        return self.cleaned_data.get("model_config_json")

    def clean_secrets(self) -> dict[str, Any] | None:
        return self._note_secrets_entered(super().clean_secrets())

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        delegates = cleaned.get("delegates")
        organization = cleaned.get("organization")
        organization_id = organization.pk if organization is not None else self.instance.organization_id
        if delegates and organization_id is not None:
            # call_agent only reaches agents of the agent's own organisation (docs/design.md §1.11).
            if any(other.organization_id != organization_id for other in delegates):
                self.add_error("delegates", "An agent may only call agents of its own organisation.")
            elif self.instance.pk is not None and any(other.pk == self.instance.pk for other in delegates):
                self.add_error("delegates", "An agent cannot call itself.")
        return cleaned


def _without_api_key(text: Any) -> str | None:
    """``text`` (a JSON object) without its ``api_key``, or ``None`` if it has none."""
    try:
        value = json_loads(text) if isinstance(text, str) else None
    except ValueError:  # InvalidJSON, nested too deep included: the field itself reports it
        return None
    if not isinstance(value, dict) or "api_key" not in value:
        return None
    value.pop("api_key")
    return json.dumps(value)


def _recent_call_label(call: dict[str, Any], tools: dict[str, Any]) -> str:
    """A recent call as an operator picks it: when, the tool as people read it, and what it was
    about ("2026-12-07 13:31 · Pay a purchase · PO-1002 · 4,800.00 USD"), short enough for a select."""
    spec = tools.get(call["tool_name"])
    title = spec.display if spec is not None else readable_tool_name(call["tool_name"])
    args = call["args"]
    about = summary_of(args, None)
    if not about and isinstance(args, dict):
        about = ", ".join(" ".join(str(value).split()) for value in args.values())
    label = f"{call['started_at']:%Y-%m-%d %H:%M} · {title}" + (f" · {about}" if about else "")
    return label if len(label) <= 90 else label[:89] + "…"


class TryChainForm(forms.Form):
    """A call to try: one of the agent's tools and its arguments, typed into inputs built from the
    tool's JSON schema (or as a JSON object), or a recent call of the agent, whose tool and
    arguments are then used; optionally a sample result."""

    # The call is typed first; a recent call, picked instead, follows what it replaces.
    tool_name = forms.ChoiceField(required=False, label="Tool")
    arguments = ToolArgsField(label="Arguments")
    recent_call = forms.ChoiceField(
        required=False,
        label="Or a recent call",
        help_text="Picked here, its tool and arguments are tried instead of those above.",
    )
    sample_result = forms.CharField(
        required=False,
        label="Sample result (optional)",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "spellcheck": "false"}),
        help_text="What the tool might return, to try the PostToolUse hooks on: JSON, or plain text.",
    )

    def __init__(
        self, *args: Any, tools: dict[str, Any], recent: list[dict[str, Any]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.recent = {str(call["pk"]): call for call in recent}
        self.fields["tool_name"].choices = [
            ("", "— pick a tool —"),
            *tool_choices(tools),
        ]
        self.fields["arguments"].widget.tools = tools
        self.fields["recent_call"].choices = [("", "— none —")] + [
            (str(call["pk"]), _recent_call_label(call, tools)) for call in recent
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        call = self.recent.get(cleaned.get("recent_call") or "")
        if call is not None:
            cleaned["tool_name"], cleaned["tool_args"] = call["tool_name"], call["args"]
            self.errors.pop("arguments", None)  # the recent call's arguments are used
        else:
            if not cleaned.get("tool_name"):
                self.add_error("tool_name", "Pick a tool, or a recent call.")
            cleaned["tool_args"] = cleaned.get("arguments")
        text = cleaned.get("sample_result") or ""
        if not text.strip():
            cleaned["sample_result"] = NO_RESULT
        else:
            try:
                cleaned["sample_result"] = json_loads(text)
            except ValueError:  # plain text is a result too
                cleaned["sample_result"] = text
        return cleaned


def delegation_help() -> str:
    """The Delegation section's text, with the nesting limit this deployment sets."""
    from django.conf import settings

    depth = settings.AGENT_DELEGATION_MAX_DEPTH
    return (
        "The agents chosen here may be called by this one through its call_agent tool. Each runs "
        "as a child run with its own hooks and its own confirmation settings. Calls nest at most "
        f"{depth} deep (a limit this deployment sets) and never back up the chain of callers."
    )


@admin.register(Agent)
class AgentAdmin(
    SecretsClearedMessageMixin, ArchivableAdminMixin, OrganizationScopedAdmin, ConfigHistoryAdmin
):
    """The form validates ``model_config_json`` (provider, script, hooks), ``secrets`` and
    ``builtin_tools`` through ``Agent.clean()`` → ``check_agent_config``, so an agent that could
    not run is refused. The provider's API key lives in the write-only, encrypted ``secrets``.
    Archiving an agent (operators) stops it from running and ends its runs in flight."""

    form = AgentAdminForm

    list_display = (
        "name",
        "organization",
        "owner",
        "engine",
        "provider",
        "declared_hooks",
        "is_archived",
        "created_at",
    )
    list_select_related = ("organization", "owner")
    list_filter = (
        "engine",
        ("archived_at", admin.EmptyFieldListFilter),
        ("organization", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("name", "organization__name", "owner__username")
    filter_horizontal = ("actions", "delegates")
    inlines = (AgentHookInline,)
    fieldsets = (
        (None, {"fields": ("organization", "owner", "name", "instructions", "engine")}),
        ("Language model", {"fields": ("model_config_json", "secrets_state", "secrets", "max_iterations")}),
        ("Tools", {"fields": ("actions", "builtin_tools", "require_confirmation_for_all")}),
        ("Delegation", {"fields": ("delegates",)}),
        ("Archive", {"fields": ArchivableAdminMixin.archive_fields}),
    )
    readonly_fields = ("secrets_state", *ArchivableAdminMixin.archive_fields)
    actions = ("archive_selected", "unarchive_selected")
    archive_service, unarchive_service = "agent_archive", "agent_unarchive"

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> Any:
        fieldsets = [
            (name, {**options, "description": delegation_help()} if name == "Delegation" else options)
            for name, options in super().get_fieldsets(request, obj)
        ]
        if self._owner_fixed(request, obj):
            fieldsets = [
                (
                    name,
                    {
                        **options,
                        "fields": tuple("owner_name" if f == "owner" else f for f in options["fields"]),
                    },
                )
                for name, options in fieldsets
            ]
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        # A view-only page renders every field as text: leave the secrets out.
        return [
            (name, {**options, "fields": tuple(f for f in options["fields"] if f != "secrets")})
            for name, options in fieldsets
        ]

    # Owning an agent makes one an approver of its calls (policy ``allow_agent_owner``), so who owns
    # an agent is an organisation admin's call, like granting a role. Operators see the owner of
    # an existing agent read-only (a posted value is ignored) and may only make themselves the
    # owner of an agent they create, which is also the default.
    def _may_choose_owner(self, request: HttpRequest, organization_id: int | None) -> bool:
        if request.user.is_superuser:
            return True
        return Membership.objects.filter(
            user=request.user, organization_id=organization_id, role=Role.ADMIN
        ).exists()

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if field is not None and db_field.name == "actions":
            # The actions as people read them, and whose they are: "Pay a purchase — Demo
            # payments (OA)", not "oa__purchase_pay".
            field.queryset = field.queryset.select_related("connector")
            field.label_from_instance = lambda action: f"{action.title} — {action.connector.name}"
        return field

    def _owner_fixed(self, request: HttpRequest, obj: Agent | None) -> bool:
        return obj is not None and not self._may_choose_owner(request, obj.organization_id)

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "owner_name") if self._owner_fixed(request, obj) else fields

    @admin.display(description="owner")
    def owner_name(self, obj: Agent) -> str:
        """The owner as a name, where it cannot be changed here: Django would link the user's admin
        page, which only superusers may open (an operator would meet a 403)."""
        return str(obj.owner)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    def get_form(
        self, request: HttpRequest, obj: Agent | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is not None:
            return form
        may_choose_owner = self._may_choose_owner

        class NewAgentForm(form):  # type: ignore[valid-type,misc]
            def clean(self) -> dict[str, Any]:
                cleaned = super().clean()
                organization, owner = cleaned.get("organization"), cleaned.get("owner")
                if (
                    organization is not None
                    and owner is not None
                    and owner.pk != request.user.pk
                    and not may_choose_owner(request, organization.pk)
                ):
                    self.add_error(
                        "owner",
                        "Only an organisation admin may make someone else the owner of an agent: "
                        "you may only own the agents you create.",
                    )
                return cleaned

        return NewAgentForm

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: Agent) -> str:
        return secrets_state(obj.secrets) if obj.pk is not None else "—"

    @admin.display(description="provider")
    def provider(self, obj: Agent) -> str:
        config = obj.model_config_json
        return str(config.get("provider", "scripted")) if isinstance(config, dict) else "—"

    @admin.display(description="hooks")
    def declared_hooks(self, obj: Agent) -> str:
        try:
            names = [name for name, _params in parse_declaration(hooks_declaration(obj.model_config_json))]
        except HookDeclarationError:
            return "invalid declaration"
        rows = [row.name for row in obj.hook_declarations.all() if row.enabled]
        return ", ".join([*rows, *names]) or "—"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        return super().get_queryset(request).prefetch_related("hook_declarations")

    def related_history(self, obj: Agent) -> list[Any]:
        """The agent's hooks are historied on their own: their changes are listed here too."""
        return [(hook_subject, HookDeclaration.history.filter(agent_id=obj.pk), HOOK_HISTORY_FIELDS)]

    # --- the effective chain and "Try this chain" -------------------------------------------------

    def get_urls(self) -> list[Any]:
        from django.urls import path

        trial = self.admin_site.admin_view(self.try_chain_view)
        return [
            path("<path:object_id>/try-chain/", trial, name="agents_agent_try_chain"),
            *import_urls(self),
            *replay_urls(self),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        agent = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if agent is not None and self.has_view_or_change_permission(request, agent):
            context.update(self._chain_context(agent))
            if manages(request, agent):
                context["try_chain_url"] = reverse("admin:agents_agent_try_chain", args=[agent.pk])
                context["replay_url"] = reverse("admin:agents_agent_replay", args=[agent.pk])
                context.update(import_links(request, agent))
        return super().change_view(request, object_id, form_url, extra_context=context)

    @staticmethod
    def _chain_context(agent: Agent) -> dict[str, Any]:
        """The agent's effective chain as a new run would keep it (the engine's own builder)."""
        chain = hook_chain_of(agent)
        if "error" in chain:
            return {"chain_error": chain["error"], "chain_rows": []}
        disabled = list(
            HookDeclaration.objects.filter(
                organization_id=agent.organization_id, mode=HookDeclaration.Mode.OFF
            )
            .filter(Q(agent=agent) | Q(agent__isnull=True))
            .values_list("name", flat=True)
        )
        rows = chain_rows(chain)
        return {
            "chain_rows": rows,
            "chain_error": None,
            "chain_disabled": disabled,
            "chain_shadowed": any(row.in_shadow for row in rows),
            "gate_reasons": gate_reasons(agent, rows),
        }

    def try_chain_view(self, request: HttpRequest, object_id: str) -> Any:
        """Try the agent's chain on one call without running the tool (``console.chain_trial``).
        Operators and admins of the agent's organisation only; another organisation's agent is
        not found (404); an auditor of it may read the chain on the agent page, not try it."""
        agent = self.get_object(request, object_id)
        if agent is None or not self.has_view_or_change_permission(request, agent):
            raise Http404("No such agent.")
        if not manages(request, agent):
            raise PermissionDenied("Only the agent's operators may try its chain.")
        recent = list(
            ToolExecution.objects.filter(run__agent=agent)
            .order_by("-started_at", "-pk")
            .values("pk", "tool_name", "args", "started_at")[:20]
        )
        form = TryChainForm(request.POST or None, tools=agent_tool_specs(agent), recent=recent)
        report = None
        if request.method == "POST" and form.is_valid():
            try:
                report = chain_trial(
                    agent=agent,
                    user=request.user,
                    tool_name=form.cleaned_data["tool_name"],
                    tool_args=form.cleaned_data["tool_args"],
                    sample_result=form.cleaned_data["sample_result"],
                )
            except TrialError as exc:
                form.add_error(None, str(exc))
        return agent_subpage(
            self,
            request,
            agent,
            "admin/agents/agent/try_chain.html",
            title=f"Try the hook chain of {agent.name}",
            form=form,
            report=report,
            **self._chain_context(agent),
        )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # The JSON form (model_config_json.hooks.class_hooks) is still accepted: it becomes rows.
        hook_declarations_adopt_config(agent=form.instance)
