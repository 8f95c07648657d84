"""The admin of connectors (their write-only secrets bound to the base URL) and of their actions,
edited inline on the connector's page.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Field, Q, QuerySet, URLField
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin.archiving import ArchivableAdminMixin
from agents.admin.bound_secrets import (
    CONNECTOR_BASE_URL_HELP,
    SecretsClearedMessageMixin,
    SecretsEntryFormMixin,
)
from agents.admin.scoping import ManagedInlineMixin, OrganizationScopedAdmin
from agents.archiving import check_may_unarchive_connector
from agents.mcp_connectors import (
    check_may_set_command,
    connector_action_listing_accept,
    connector_tools_refresh,
    listing_fingerprint,
)
from agents.models import Connector, ConnectorAction
from agents.models.connectors import hints_in_words, hints_listed
from fimone.errors import ServiceError
from fimone.forms import WriteOnlySecretsForm, secrets_state
from fimone.history import ConfigHistoryAdmin
from fimone.parsers import loads as json_loads

URL_FORMFIELD = {"assume_scheme": "https"}
"""A base URL typed without a scheme is taken as https (Django 6's default, chosen now)."""


def _connector_formfield(db_field: Field, **kwargs: Any) -> forms.Field | None:
    if isinstance(db_field, URLField):
        kwargs.update(URL_FORMFIELD)
    return db_field.formfield(**kwargs)


CONNECTOR_FIELDS = (
    "organization",
    "slug",
    "name",
    "kind",
    "base_url",
    "mcp_transport",
    "command",
    "secrets",
    "timeout_seconds",
)
"""What an operator edits on a connector's page, in order."""


class ConnectorAdminForm(SecretsEntryFormMixin, WriteOnlySecretsForm):
    """An HTTP connector's secrets are bound to its base URL's origin; a database connector's DSN
    is its own address (it changes only by entering the secrets again)."""

    secrets_example = (
        '{"headers": {"Authorization": "Bearer …"}} or '
        '{"dsn": "postgres://app:…@db/shop", "read_dsn": "postgres://reader:…@db/shop"} or, for an '
        'MCP server run over stdio, {"env": {"API_KEY": "…"}}'
    )
    #: set by the admin: whose change this is (a stdio MCP server's command is code)
    request: HttpRequest | None = None

    class Meta:
        model = Connector
        fields = CONNECTOR_FIELDS
        formfield_callback = _connector_formfield

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "base_url" in self.fields:
            self.fields["base_url"].help_text += CONNECTOR_BASE_URL_HELP

    def clean_secrets(self) -> dict[str, Any] | None:
        return self._note_secrets_entered(super().clean_secrets())

    def _post_clean(self) -> None:
        super()._post_clean()
        if self.request is None or self.errors:
            return
        try:
            check_may_set_command(actor=self.request.user, connector=self.instance)
        except ServiceError as exc:
            self.add_error("command" if "command" in self.fields else None, exc.message)


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


class McpToolForm(ConnectorActionForm):
    """An MCP tool as operators edit it: its flags, and, when the server's latest listing says
    something else of it than was accepted, a box to accept that change. The form carries the
    fingerprint of the change it showed, so that a change made after the page was shown is not
    accepted unread (:func:`~agents.mcp_connectors.connector_action_listing_accept`)."""

    accept_server_change = forms.BooleanField(
        required=False,
        label="Accept the server's change",
        help_text="Takes what the server now says of this tool (shown above) as accepted: its description "
        "and schema are offered to agents from then on. Its flags stay as you set them here.",
    )
    server_change_seen = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        change = self.instance.listing_to_review if self.instance.pk else {}
        if change:
            self.initial["server_change_seen"] = listing_fingerprint(change)
        else:
            self.fields["accept_server_change"].disabled = True
            self.fields["accept_server_change"].help_text = "Nothing to review."


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
    readonly_fields = ("tool", "remote_name", "server_hints", "server_change", "missing_since")
    mcp_fieldsets = (
        (
            None,
            {
                "fields": (
                    ("name", "tool"),
                    ("remote_name", "missing_since"),
                    "display_name",
                    ("enabled", "requires_confirmation", "is_write"),
                    "server_hints",
                    "server_change",
                    "accept_server_change",
                    "server_change_seen",
                    "description",
                )
            },
        ),
        (
            "Parameters (JSON schema, from the server)",
            {"classes": ("collapse",), "fields": ("parameters_schema",)},
        ),
    )

    class Media:
        css = {"all": ("console/connector_actions.css",)}

    def get_fieldsets(self, request: HttpRequest, obj: Connector | None = None) -> Any:
        if obj is not None and obj.is_mcp:
            return self.mcp_fieldsets
        return super().get_fieldsets(request, obj)

    def get_extra(self, request: HttpRequest, obj: Connector | None = None, **kwargs: Any) -> int:
        return 0

    def has_add_permission(self, request: HttpRequest, obj: Connector | None = None) -> bool:
        # An MCP server's tools come from its listing, never typed in.
        if obj is not None and obj.is_mcp:
            return False
        return super().has_add_permission(request, obj)

    @admin.display(description="what the server says of it")
    def server_hints(self, obj: ConnectorAction) -> str:
        # The server's word is shown as its claim: the flags above are what calls obey.
        claim = f"{hints_in_words(obj.annotations)} ({hints_listed(obj.annotations)})"
        return f"the server says: {claim}. That is its claim: the flags are yours, set above."

    @admin.display(description="waiting for your review")
    def server_change(self, obj: ConnectorAction) -> SafeString | str:
        words = obj.listing_change_in_words() if obj.pk else []
        if not words:
            return "Nothing: the server lists it as accepted."
        # The server's text is shown escaped (format_html): it is data, never markup.
        items = format_html_join("", "<li>{}</li>", ((phrase,) for phrase in words))
        change = obj.listing_to_review
        schema = ""
        if "input_schema" in change:
            schema = format_html(
                "<p>The server's new input schema:</p><pre>{}</pre>",
                json.dumps(change["input_schema"], indent=2, sort_keys=True),
            )
        return format_html(
            "<ul>{}</ul>{}<p>Offered to agents as accepted until you accept the change below; its flags "
            "stay as you set them either way.</p>",
            items,
            schema,
        )

    @admin.display(description="tool name")
    def tool(self, obj: ConnectorAction) -> str:
        return obj.tool_name if obj.pk else "— (the connector's slug, two underscores, the name)"

    def get_formset(self, request: HttpRequest, obj: Connector | None = None, **kwargs: Any) -> Any:
        if obj is not None and obj.is_mcp:
            kwargs.setdefault("form", McpToolForm)
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
        if obj is not None and obj.is_mcp:
            # The method plays no part for an MCP tool, nor do its server's hints: the flags are
            # the operator's, and start at the safe side.
            fields = formset.form.base_fields
            if "requires_confirmation" in fields:
                fields["requires_confirmation"].help_text = (
                    "Yes for every tool the server lists, whatever it claims: each call waits for a "
                    "person. Set it to No for a tool you trust to run unasked."
                )
            if "is_write" in fields:
                fields["is_write"].help_text = (
                    "Yes for every tool the server lists, whatever it claims: refused while the "
                    "organisation is read-only. Set it to No only for a tool you know only reads."
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
        "address",
        "action_count",
        "tools_to_review",
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
    readonly_fields = ("secrets_state", "tools_listed_at", *ArchivableAdminMixin.archive_fields)
    inlines = (ConnectorActionInline,)
    actions = ("refresh_tools", "archive_selected", "unarchive_selected")
    archive_service, unarchive_service = "connector_archive", "connector_unarchive"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Connector]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _actions=Count("actions", distinct=True),
                _to_review=Count("actions", filter=~Q(actions__listing_to_review={}), distinct=True),
            )
        )

    def get_fields(self, request: HttpRequest, obj: Connector | None = None) -> list[str]:
        fields = list(CONNECTOR_FIELDS)
        fields.insert(fields.index("secrets"), "secrets_state")
        fields.extend(self.archive_fields)
        if obj is not None and obj.is_mcp:
            fields.insert(fields.index("timeout_seconds") + 1, "tools_listed_at")
        if obj is not None and not self.has_change_permission(request, obj):
            # A view-only page renders every field as text: leave the secrets out.
            fields.remove("secrets")
        return fields

    def unarchive_refusal(self, request: HttpRequest, obj: Connector) -> str | None:  # type: ignore[override]
        # A stdio server's command runs again once it is back: the same check as the service's.
        try:
            check_may_unarchive_connector(connector=obj, user=request.user)
        except ServiceError as exc:
            return exc.message
        return None

    @admin.display(description="actions", ordering="_actions")
    def action_count(self, obj: Connector) -> int:
        return obj._actions  # type: ignore[attr-defined]

    @admin.display(description="server changes", ordering="_to_review")
    def tools_to_review(self, obj: Connector) -> str:
        """How many of an MCP server's tools it now lists otherwise than was accepted."""
        count = obj._to_review  # type: ignore[attr-defined]
        return f"{count} to review" if count else "—"

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: Connector) -> str:
        return secrets_state(obj.secrets) if obj.pk is not None else "—"

    def get_form(
        self, request: HttpRequest, obj: Connector | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        # A subclass per request: the form checks who may set a stdio server's command.
        return type(form.__name__, (form,), {"request": request})

    @admin.display(description="address", ordering="base_url")
    def address(self, obj: Connector) -> str:
        if obj.runs_a_command:
            return "stdio: " + " ".join(str(part) for part in (obj.command or [])[:3])
        return obj.base_url

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        connector = form.instance
        self._accept_server_changes(request, formsets)
        if connector.is_mcp and not connector.is_archived:
            # Listed on every save: what the server offers now is what the operator sees.
            self._refresh(request, connector)

    def _accept_server_changes(self, request: HttpRequest, formsets: Any) -> None:
        """Accept, through the service, each MCP tool's server change the operator ticked (after
        the flags they set on the same page were saved)."""
        for formset in formsets:
            for tool_form in formset.forms:
                cleaned = getattr(tool_form, "cleaned_data", None) or {}
                if not cleaned.get("accept_server_change") or tool_form.instance.pk is None:
                    continue
                try:
                    accepted = connector_action_listing_accept(
                        action=tool_form.instance,
                        actor=request.user,
                        seen=cleaned.get("server_change_seen") or "",
                    )
                except ServiceError as exc:
                    self.message_user(request, f"Not accepted: {exc.message}", messages.WARNING)
                    continue
                self.message_user(
                    request,
                    f"Accepted the server's change to {accepted.tool_name}; its flags are as you set them.",
                    messages.SUCCESS,
                )

    @admin.action(description="List the MCP servers' tools again")
    def refresh_tools(self, request: HttpRequest, queryset: QuerySet[Connector]) -> None:
        chosen = list(queryset)
        if not any(connector.is_mcp for connector in chosen):
            self.message_user(request, "Only MCP connectors list their tools.", messages.WARNING)
            return
        for connector in chosen:
            if connector.is_mcp:
                self._refresh(request, connector)

    def _refresh(self, request: HttpRequest, connector: Connector) -> None:
        try:
            diff = connector_tools_refresh(connector=connector, actor=request.user)
        except ServiceError as exc:
            self.message_user(
                request, f"{connector.name}: its tools could not be listed: {exc.message}", messages.WARNING
            )
            return
        self.message_user(request, f"{connector.name}: " + " ".join(diff.lines()), messages.SUCCESS)
