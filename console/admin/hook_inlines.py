"""The hook declarations as operators edit them, inline: an agent's own hooks (on the agent's page)
and the hooks an organisation enforces on all its agents (on the organisation's page). Both pages
also list the hooks' history (:data:`HOOK_HISTORY_FIELDS`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Field, JSONField, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agents import hook_declarations, selectors
from agents.admin.bound_secrets import SecretsEntryFormMixin
from agents.hook_declarations import check_may_change_kinds
from agents.models import HookDeclaration, ShadowDecision
from console.hook_editor import OWN_PREFIX, HookParamsField, chooses_tools, hook_choices
from fimone.admin_errors import PlainErrorsAdminMixin
from fimone.errors import ServiceError
from fimone.forms import JSONFormField
from hooks.catalog import SECRET_KINDS
from tenancy.models import Membership, Organization, Role


class HookDeclarationForm(SecretsEntryFormMixin, forms.ModelForm):
    """One hook declaration as an operator edits it: the hook picked from the catalog (or a kind
    of their own), its parameters as inputs built from the hook's parameter schema
    (:mod:`console.hook_editor`), matcher, priority, timeout, ``on_error`` and mode (enforce, shadow, off).

    The http signing secret is write-only: never rendered, blank keeps the stored one. A post
    without ``hook`` (the name and kind typed, parameters as JSON) is still read as before."""

    hook = forms.ChoiceField(
        required=False,
        help_text="Catalog hooks take the parameters below. Your own hooks run code: creating or "
        "changing one needs the 'Can create or change command, python and http hooks' permission.",
    )
    params = HookParamsField(label="Parameters")
    secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="http hooks: the HMAC-SHA256 signing secret (16+ characters); prompt hooks: the "
        "model's API key. Blank keeps the current one.",
    )

    class Meta:
        model = HookDeclaration
        # A hooks file's fields (``enabled`` is the older files' spelling of ``mode``), after the
        # catalog pick that fills them.
        fields = ("hook", *(field for field in hook_declarations.FIELDS if field != "enabled"))
        widgets = {"kind": forms.HiddenInput}
        labels = {"name": "Label", "point": "Event"}
        help_texts = {
            "name": "Your own hooks: a name for the chain and the run's trace.",
            "point": "Your own hooks: when it runs.",
            "matcher": 'The tools it runs for: empty or "*" for all, a glob ("oa__*"), or '
            '"re:<regex>". Catalog hooks with a Tools parameter choose their tools there instead, '
            "so they have no matcher.",
        }

    secrets_address = "the http hook's url"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial.pop("secret", None)
        instance = self.instance
        self.fields["hook"].choices = hook_choices(keep=instance.name if instance.kind == "class" else "")
        self.fields["name"].required = False
        if instance.pk is not None:
            self.initial["hook"] = (
                instance.name if instance.kind == "class" else f"{OWN_PREFIX}{instance.kind}"
            )
        picked = self.data.get(self.add_prefix("hook")) if self.is_bound else self.initial.get("hook")
        self.fields["params"].widget.picked = picked or ""

    def clean_secret(self) -> str | None:
        text = self.cleaned_data.get("secret") or ""
        if not text:
            return self.instance.secret if self.instance.pk else None
        return self._note_secrets_entered(text)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        hook = cleaned.get("hook") or ""
        if hook.startswith(OWN_PREFIX):
            cleaned["kind"] = hook[len(OWN_PREFIX) :]
        elif hook:
            cleaned["kind"], cleaned["name"] = "class", hook
            cleaned["point"] = ""  # a catalog hook's event is its own
        elif self.add_prefix("hook") in self.data and "hook" not in self.errors:
            self.add_error("hook", "Pick a hook from the catalog, or one of your own kinds.")
            return cleaned
        if not cleaned.get("name") and "hook" not in self.errors:
            self.add_error(
                "name", "Give your hook a label: it names the hook in the chain and the run's trace."
            )
        matcher = (cleaned.get("matcher") or "").strip()
        if (
            cleaned.get("kind") == "class"
            and chooses_tools(cleaned.get("name") or "")
            and matcher not in ("", "*")
            and matcher != (self.initial.get("matcher") or "")
        ):
            # One hook, one place to choose tools: its Tools parameter.
            self.add_error(
                "matcher",
                "This hook chooses its tools in its Tools parameter: put them there and leave the "
                "matcher empty.",
            )
        if cleaned.get("kind") not in SECRET_KINDS:
            cleaned["secret"] = None
        return cleaned


HOOK_HISTORY_FIELDS = ("point", "matcher", "params", "priority", "timeout", "on_error", "mode")
"""What a History page lists of a hook when it is added or removed."""


def hook_subject(record: Any) -> str:
    kind = "" if record.kind == "class" else f" ({record.get_kind_display()} hook)"
    return f"hook {record.name}{kind}"


class HookDeclarationFormSet(forms.BaseInlineFormSet):
    """Sets each row's organisation from the page's object and refuses any change to a command,
    python or http hook by someone without ``agents.manage_code_hooks`` (added, changed or
    deleted; turning a row into or out of such a kind included)."""

    request: HttpRequest

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        parent = self.instance
        form.instance.organization_id = (
            parent.pk if isinstance(parent, Organization) else parent.organization_id
        )
        return form

    def clean(self) -> None:
        super().clean()
        kinds: set[str] = set()
        for form in self.forms:
            if not form.has_changed() and form not in self.deleted_forms:
                continue
            kinds.add(form.cleaned_data.get("kind") or "")
            if form.instance.pk is not None:
                kinds.add(form.initial.get("kind") or "")
        try:
            check_may_change_kinds(actor=self.request.user, kinds=kinds)
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from None


class HookDeclarationInlineBase(PlainErrorsAdminMixin, admin.StackedInline):
    model = HookDeclaration
    form = HookDeclarationForm
    formset = HookDeclarationFormSet
    extra = 0
    show_change_link = False
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("hook", "mode", "would_have"),
                    ("name", "point"),
                    "params",
                    ("matcher", "priority", "timeout", "on_error"),
                    "secret",
                    "kind",
                )
            },
        ),
    )

    readonly_fields = ("would_have",)

    @admin.display(description="would have (in shadow)")
    def would_have(self, obj: HookDeclaration) -> str:
        """What the hook would have done while in shadow mode, counted, with a link to the
        decisions; a dash for a hook that never ran in shadow."""
        if obj.pk is None:
            return "—"
        counts = selectors.shadow_decision_counts(declaration_pks=[obj.pk]).get(obj.pk)
        if not counts:
            return "nothing yet" if obj.mode == HookDeclaration.Mode.SHADOW else "—"
        labels = dict(ShadowDecision.Decision.choices)
        parts = [f"{n} {labels.get(decision, decision)}" for decision, n in sorted(counts.items())]
        url = reverse("admin:agents_shadowdecision_changelist") + f"?declaration_pk={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, ", ".join(parts))

    @admin.display(description="hook")
    def hook(self, obj: HookDeclaration) -> str:
        """The hook a row holds, as a view-only page shows it."""
        return obj.name if obj.kind == "class" else f"{obj.name} ({obj.get_kind_display()})"

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        formset.request = request
        return formset

    def formfield_for_dbfield(self, db_field: Field, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, JSONField):
            kwargs["form_class"] = JSONFormField
        return super().formfield_for_dbfield(db_field, request, **kwargs)


class AgentHookInline(HookDeclarationInlineBase):
    """The agent's own hooks. Its organisation's enforced hooks run too, after these (the last word:
    ``hooks.contract.Band``)."""

    fk_name = "agent"
    verbose_name = "hook"
    verbose_name_plural = "hooks (the organisation's enforced hooks run after these: they have the last word)"


class EnforcedHookInline(HookDeclarationInlineBase):
    """Hooks the organisation enforces on every one of its agents."""

    fk_name = "organization"
    verbose_name = "enforced hook"
    verbose_name_plural = "enforced hooks (run for every agent after its own hooks: the last word)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[HookDeclaration]:
        return super().get_queryset(request).filter(agent__isnull=True)

    def _may_manage(self, request: HttpRequest, obj: Organization | None) -> bool:
        if request.user.is_superuser:
            return True
        return (
            obj is not None
            and Membership.objects.filter(user=request.user, organization=obj, role=Role.ADMIN).exists()
        )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj) and super().has_delete_permission(request, obj)
