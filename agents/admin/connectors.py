"""The admin of connectors (their write-only secrets bound to the base URL) and of their actions,
edited inline on the connector's page.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, Field, QuerySet, URLField
from django.http import HttpRequest

from agents.admin.archiving import ArchivableAdminMixin
from agents.admin.bound_secrets import (
    CONNECTOR_BASE_URL_HELP,
    SecretsClearedMessageMixin,
    SecretsEntryFormMixin,
)
from agents.admin.scoping import ManagedInlineMixin, OrganizationScopedAdmin
from agents.models import Connector, ConnectorAction
from fimone.forms import WriteOnlySecretsForm, secrets_state
from fimone.history import ConfigHistoryAdmin
from fimone.parsers import loads as json_loads

URL_FORMFIELD = {"assume_scheme": "https"}
"""A base URL typed without a scheme is taken as https (Django 6's default, chosen now)."""


def _connector_formfield(db_field: Field, **kwargs: Any) -> forms.Field | None:
    if isinstance(db_field, URLField):
        kwargs.update(URL_FORMFIELD)
    return db_field.formfield(**kwargs)


class ConnectorAdminForm(SecretsEntryFormMixin, WriteOnlySecretsForm):
    """An HTTP connector's secrets are bound to its base URL's origin; a database connector's DSN
    is its own address (it changes only by entering the secrets again)."""

    secrets_example = (
        '{"headers": {"Authorization": "Bearer …"}} or '
        '{"dsn": "postgres://app:…@db/shop", "read_dsn": "postgres://reader:…@db/shop"}'
    )

    class Meta:
        model = Connector
        fields = ("organization", "slug", "name", "kind", "base_url", "secrets", "timeout_seconds")
        formfield_callback = _connector_formfield

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "base_url" in self.fields:
            self.fields["base_url"].help_text += CONNECTOR_BASE_URL_HELP

    def clean_secrets(self) -> dict[str, Any] | None:
        return self._note_secrets_entered(super().clean_secrets())


CONTEXT_FIELD_RE = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")
"""A field of a context action's answer: a key, or a dotted path into nested objects."""


class ConnectorActionForm(forms.ModelForm):
    """A connector action as operators edit it: ``context_fields`` typed as a comma-separated list
    ("vendor, description, amount") rather than JSON."""

    context_fields = forms.CharField(
        required=False,
        label="Fields approvers see",
        help_text="Fields of the context action's answer, in order, separated by commas, e.g. "
        '"vendor, description, amount, currency" (a dotted path reads a nested field). Empty: '
        "approvers see the call's arguments.",
        widget=forms.TextInput(attrs={"size": 50}),
    )

    class Meta:
        model = ConnectorAction
        fields = (
            "name",
            "display_name",
            "method",
            "path_template",
            "requires_confirmation",
            "is_write",
            "description",
            "parameters_schema",
            "context_action",
            "context_fields",
        )
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3, "cols": 60}),
            "path_template": forms.TextInput(attrs={"size": 40}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.context_fields if self.instance.pk else []
        if isinstance(stored, list) and "context_fields" in self.fields:
            self.initial["context_fields"] = ", ".join(str(name) for name in stored)

    def clean_context_fields(self) -> list[str]:
        text = (self.cleaned_data.get("context_fields") or "").strip()
        if text.startswith("["):  # pasted as JSON, the way the field is stored
            try:
                parsed = json_loads(text)
            except ValueError:
                parsed = None
            if not isinstance(parsed, list) or not all(isinstance(name, str) for name in parsed):
                raise forms.ValidationError('Write the fields separated by commas: "vendor, amount".')
            text = ", ".join(parsed)
        names = [name.strip() for name in text.split(",")]
        names = [name for name in names if name]
        bad = [name for name in names if not CONTEXT_FIELD_RE.match(name)]
        if bad:
            raise forms.ValidationError(
                f"Not a field name: {', '.join(bad)}. Use names such as vendor or payee.iban, "
                "separated by commas."
            )
        return names

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("context_fields") and not cleaned.get("context_action"):
            self.add_error("context_action", "Choose the action whose answer holds the fields approvers see.")
        read = cleaned.get("context_action")
        if read is not None and self.instance.pk and read.pk == self.instance.pk:
            self.add_error("context_action", "An action cannot describe its own calls: choose a read action.")
        return cleaned


class ConnectorActionInline(ManagedInlineMixin, admin.StackedInline):
    """Each action stacked, so that it fits a laptop and a phone: what identifies it and whether a
    person must approve its calls first, then its description, then two folded sections for the
    long fields (its parameter schema, what approvers see)."""

    model = ConnectorAction
    form = ConnectorActionForm
    extra = 0
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("name", "tool"),
                    "display_name",
                    ("method", "path_template"),
                    ("requires_confirmation", "is_write"),
                    "description",
                )
            },
        ),
        ("Parameters (JSON schema)", {"classes": ("collapse",), "fields": ("parameters_schema",)}),
        (
            "What approvers see",
            {
                "classes": ("collapse",),
                "description": "When a call of this action asks for approval, the context action (a read "
                "action of this connector) is called with the call's arguments, and the fields listed "
                "are shown on the approvers' card. For example, a payment's card can show the purchase "
                "it pays: its vendor, description and amount.",
                "fields": ("context_action", "context_fields"),
            },
        ),
    )
    readonly_fields = ("tool",)

    class Media:
        css = {"all": ("agents/connector_actions.css",)}

    @admin.display(description="tool name")
    def tool(self, obj: ConnectorAction) -> str:
        return obj.tool_name if obj.pk else "— (the connector's slug, two underscores, the name)"

    def get_formset(self, request: HttpRequest, obj: Connector | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        field = formset.form.base_fields.get("context_action")
        if field is not None:
            # Only a read action of this very connector describes its calls (another connector's,
            # or another organisation's, never): the choices are the connector's GET actions.
            reads = ConnectorAction.objects.none()
            if obj is not None and obj.pk is not None:
                reads = obj.actions.filter(method=ConnectorAction.Method.GET).select_related("connector")
            field.queryset = reads.order_by("name")
            field.label_from_instance = lambda action: f"{action.title} ({action.tool_name})"
            field.help_text = (
                "A read (GET) action of this connector whose answer shows approvers what a call is "
                "about. Save a new action first to choose it here."
            )
        return formset


@admin.register(Connector)
class ConnectorAdmin(
    SecretsClearedMessageMixin, ArchivableAdminMixin, OrganizationScopedAdmin, ConfigHistoryAdmin
):
    """Archiving a connector (operators) withdraws its tools from every agent."""

    form = ConnectorAdminForm
    formfield_overrides = {URLField: URL_FORMFIELD}
    list_display = (
        "name",
        "slug",
        "organization",
        "kind",
        "base_url",
        "action_count",
        "is_archived",
        "created_at",
    )
    list_select_related = ("organization",)
    list_filter = (
        "kind",
        ("archived_at", admin.EmptyFieldListFilter),
        ("organization", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("name", "slug", "base_url", "organization__name")
    readonly_fields = ("secrets_state", *ArchivableAdminMixin.archive_fields)
    inlines = (ConnectorActionInline,)
    actions = ("archive_selected", "unarchive_selected")
    archive_service, unarchive_service = "connector_archive", "connector_unarchive"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Connector]:
        return super().get_queryset(request).annotate(_actions=Count("actions", distinct=True))

    def get_fields(self, request: HttpRequest, obj: Connector | None = None) -> list[str]:
        fields = [
            "organization",
            "slug",
            "name",
            "kind",
            "base_url",
            "secrets_state",
            "secrets",
            "timeout_seconds",
            *self.archive_fields,
        ]
        if obj is not None and not self.has_change_permission(request, obj):
            # A view-only page renders every field as text: leave the secrets out.
            fields.remove("secrets")
        return fields

    @admin.display(description="actions", ordering="_actions")
    def action_count(self, obj: Connector) -> int:
        return obj._actions  # type: ignore[attr-defined]

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: Connector) -> str:
        return secrets_state(obj.secrets) if obj.pk is not None else "—"
