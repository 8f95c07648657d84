"""Connectors, the services agents call, and their actions: each action is a tool an agent's model
may call, named ``<connector slug>__<action name>``.

A connector with history is never deleted (``agents.history``); its secrets are bound to its
address (:mod:`agents.models.bound_secrets`). :func:`validate_tool_slug` is named by migrations
as ``agents.models.validate_tool_slug``: the package exports it under that name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from agents.history import check_connector_deletable
from agents.models.bound_secrets import SecretsBoundQuerySet, SecretsBoundToAddress
from agents.tools.schema import check_parameters_schema
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint
from hooks.kinds.command import check_argv
from tenancy.models import organisation_key

SLUG_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
ACTION_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
TOOL_NAME_MAX = 64
"""What OpenAI-compatible models accept as a function name; ``<slug>__<action>`` stays within it."""
RESERVED_SLUGS = frozenset({"mcp"})
"""``mcp__<server>__<tool>`` is Claude Code's spelling of MCP tools, which hook matchers accept: no
connector may be named so that its own tools would read like that."""


def validate_tool_slug(value: str) -> None:
    """Connector slugs and action names build tool names ``<connector>__<action>``."""
    if not SLUG_RE.match(value) or "__" in value:
        raise ValidationError(
            "use lower-case letters, digits and single underscores, starting with a letter (max 40)"
        )


def validate_action_name(value: str) -> None:
    """An action's name: a slug (:func:`validate_tool_slug`) for HTTP and database actions; an
    MCP tool keeps its server's name where a model can read it (letters, digits, ``_`` and ``-``,
    no double underscore: :meth:`ConnectorAction.clean` holds the stricter rule for the others)."""
    if not ACTION_NAME_RE.match(value) or "__" in value:
        raise ValidationError(
            "use letters, digits, '-' and single underscores, starting with a letter or digit"
        )


class ConnectorQuerySet(SecretsBoundQuerySet):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Refused (``ProtectedError``) before anything is written if a connector has history."""
        check_connector_deletable(self)
        return super().delete()


class Connector(SecretsBoundToAddress, models.Model):
    """A service agents call. One whose tools have history (``agents.history``) is never deleted:
    archive it instead.

    Its secrets are bound to the address they were entered for (:class:`SecretsBoundToAddress`):
    an HTTP connector's is its base URL's origin; a database connector's DSN is its own address,
    so only entering the secrets again changes it."""

    class Kind(models.TextChoices):
        HTTP = "http", "HTTP service"
        DATABASE = "database", "Database"
        MCP = "mcp", "MCP server"

    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP"
        STDIO = "stdio", "stdio (a command run here)"

    organization = organisation_key(on_delete=models.CASCADE, related_name="connectors")
    slug = models.CharField(max_length=40, validators=[validate_tool_slug], help_text="Tool name prefix.")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.HTTP)
    base_url = models.URLField(
        blank=True, help_text="HTTP connectors: the service's base URL. MCP over HTTP: the server's endpoint."
    )
    mcp_transport = models.CharField(
        "MCP transport", max_length=8, choices=Transport.choices, blank=True, help_text="MCP servers only."
    )
    command = models.JSONField(
        default=list,
        blank=True,
        help_text="MCP over stdio: the server's command as a list, run without a shell, e.g. "
        '["/usr/bin/npx", "-y", "@modelcontextprotocol/server-everything"]. The first item is an '
        "absolute path. Only people who may manage command hooks may set it.",
    )
    tools_listed_at = models.DateTimeField(
        null=True, blank=True, help_text="MCP servers: when their tools were last listed."
    )
    secrets = EncryptedJSONField(
        null=True,
        blank=True,
        help_text=(
            "Encrypted at rest. HTTP: {'headers': {...}}; database: {'dsn': 'postgres://…'} plus, "
            "recommended, {'read_dsn': 'postgres://reader@…'}: a role that may only read, used by "
            "the read tool (sql_query) instead of dsn. MCP: {'headers': {...}} over HTTP, "
            "{'env': {...}} for a stdio server's environment."
        ),
    )
    timeout_seconds = models.FloatField(default=15.0)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived connectors keep their history; their tools are not offered"
    )
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = ConnectorQuerySet.as_manager()
    # Configuration history; the secrets are never copied into it (fimone.history).
    history = HistoricalRecords(excluded_fields=["secrets"], bases=[SecretsFingerprint])
    secrets_address_fields = frozenset({"kind", "base_url", "mcp_transport", "command"})

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="connector_unique_slug")]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"

    def secrets_address(self) -> Any:
        if self.kind == self.Kind.HTTP:
            return (self.kind, url_origin(self.base_url))
        if self.kind == self.Kind.MCP:
            # Headers go to the server's origin; a stdio server's env goes to the program run.
            if self.mcp_transport == self.Transport.HTTP:
                return (self.kind, self.mcp_transport, url_origin(self.base_url))
            command = self.command if isinstance(self.command, list) else []
            return (self.kind, self.mcp_transport, tuple(str(part) for part in command))
        return (self.kind,)

    @property
    def is_mcp(self) -> bool:
        return self.kind == self.Kind.MCP

    @property
    def runs_a_command(self) -> bool:
        """An MCP server run here over stdio: its command is code of the operator's choosing."""
        return self.kind == self.Kind.MCP and self.mcp_transport == self.Transport.STDIO

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        """Refused (``ProtectedError``) before anything is written if the connector has history."""
        check_connector_deletable([self])
        return super().delete(*args, **kwargs)

    @property
    def tool_prefix(self) -> str:
        """Every tool of this connector is named ``<slug>__…`` (slugs hold no double underscore)."""
        return f"{self.slug}__"

    def clean(self) -> None:
        if self.slug in RESERVED_SLUGS:
            reserved = f"{self.slug!r} is reserved (Claude Code's spelling of MCP tools)"
            raise ValidationError({"slug": reserved})
        if self.secrets is not None and not isinstance(self.secrets, dict):
            raise ValidationError({"secrets": "must be a JSON object"})
        if self.kind == self.Kind.MCP:
            self._clean_mcp()
        elif self.mcp_transport or self.command:
            raise ValidationError({"mcp_transport": "only MCP connectors have a transport or a command"})
        if self.kind == self.Kind.HTTP and not self.base_url:
            raise ValidationError({"base_url": "an HTTP connector needs a base URL"})
        if self.kind == self.Kind.DATABASE and not (self.secrets or {}).get("dsn"):
            raise ValidationError({"secrets": "a database connector needs {'dsn': …} in its secrets"})
        read_dsn = (self.secrets or {}).get("read_dsn")
        if self.kind == self.Kind.DATABASE and read_dsn is not None and not isinstance(read_dsn, str):
            raise ValidationError({"secrets": "read_dsn must be a DSN string, like dsn"})

    def _clean_mcp(self) -> None:
        if self.mcp_transport == self.Transport.HTTP:
            if not self.base_url:
                raise ValidationError({"base_url": "an MCP server over HTTP needs its endpoint's URL"})
            if self.command:
                raise ValidationError({"command": "an MCP server over HTTP has no command"})
        elif self.mcp_transport == self.Transport.STDIO:
            if self.base_url:
                raise ValidationError({"base_url": "an MCP server over stdio has no URL"})
            try:
                check_argv(self.command)
            except ValueError as exc:
                raise ValidationError({"command": str(exc)}) from None
        else:
            raise ValidationError({"mcp_transport": "choose how to reach the MCP server: HTTP or stdio"})
        for key, allowed in (("headers", self.Transport.HTTP), ("env", self.Transport.STDIO)):
            value = (self.secrets or {}).get(key)
            if value is not None and (self.mcp_transport != allowed or not isinstance(value, dict)):
                raise ValidationError(
                    {"secrets": f"{key!r} must be an object, and only for MCP over {allowed.label}"}
                )


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def mcp_server_claim(annotations: Any) -> tuple[bool, bool]:
    """``(writes, destructive)``: what an MCP server claims of one of its tools, its hints read as
    the MCP specification defines them: a tool that does not say ``readOnlyHint: true`` may write,
    and one that may write is destructive unless it says ``destructiveHint: false`` (a hint that is
    not a boolean says nothing).

    A claim, shown to operators and never applied: a tool's flags are the operator's decision
    (:meth:`ConnectorAction.save`, :mod:`agents.mcp_connectors`)."""
    hints = annotations if isinstance(annotations, dict) else {}
    writes = hints.get("readOnlyHint") is not True
    destructive = writes and hints.get("destructiveHint") is not False
    return writes, destructive


def hints_in_words(annotations: Any) -> str:
    """What a server's hints claim of its tool, in a word or three: "read-only", "writes, not
    destructive" or "destructive" (:func:`mcp_server_claim`)."""
    writes, destructive = mcp_server_claim(annotations)
    if not writes:
        return "read-only"
    return "destructive" if destructive else "writes, not destructive"


def hints_listed(annotations: Any) -> str:
    """A server's hints as it gives them: ``readOnlyHint: true, title: "Lookup"``, or "no hints"."""
    hints = annotations if isinstance(annotations, dict) else {}
    if not hints:
        return "no hints"
    return ", ".join(f"{key}: {json.dumps(value)}" for key, value in sorted(hints.items()))


def _parameter_names(schema: Any) -> str:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return ", ".join(sorted(properties)) if isinstance(properties, dict) and properties else "none"


def humanized_name(name: str) -> str:
    """A tool or action name as people read it: ``purchase_pay`` → "Purchase pay"."""
    words = name.replace("__", " ").replace("_", " ").replace("-", " ").split()
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else name


class ConnectorAction(models.Model):
    class Method(models.TextChoices):
        GET = "GET"
        POST = "POST"
        PUT = "PUT"
        PATCH = "PATCH"
        DELETE = "DELETE"

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="actions")
    name = models.CharField(max_length=64, validators=[validate_action_name])
    display_name = models.CharField(
        max_length=120,
        blank=True,
        help_text="The name people read for this tool, e.g. “Pay a purchase”. Empty: made from the name.",
    )
    description = models.TextField(blank=True)
    method = models.CharField(max_length=8, choices=Method.choices, default=Method.GET)
    path_template = models.CharField(
        max_length=500, blank=True, help_text="Path under the base URL; {name} is filled from the arguments."
    )
    parameters_schema = models.JSONField(
        default=dict, blank=True, help_text="JSON schema (type: object) of the tool's arguments."
    )
    requires_confirmation = models.BooleanField(
        null=True, blank=True, help_text="Empty: yes for POST/PUT/PATCH/DELETE, no for GET."
    )
    is_write = models.BooleanField(
        "changes data", null=True, blank=True, help_text="Empty: derived from the method."
    )
    context_action = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="A read action of the same connector whose answer shows approvers what a call "
        "of this one is about (for a payment: the purchase it pays), called with the same arguments "
        "when approval is asked.",
    )
    context_fields = models.JSONField(
        default=list,
        blank=True,
        help_text='Which fields of that answer approvers see, in order, e.g. ["vendor", "description", '
        '"amount"]. Empty: the call\'s own arguments.',
    )
    remote_name = models.CharField(
        max_length=128, blank=True, help_text="MCP tools: the tool's name on its server."
    )
    annotations = models.JSONField(
        default=dict,
        blank=True,
        help_text="MCP tools: the hints the server gave (readOnlyHint, destructiveHint, …) when its "
        "listing was first taken or last accepted by an operator. Its claim: never applied to the flags.",
    )
    listing_to_review = models.JSONField(
        default=dict,
        blank=True,
        help_text="MCP tools: what the server's latest listing says of the tool where it differs from "
        "what was accepted (its description, input_schema or annotations), kept for an operator to "
        "review; nothing of it is offered to agents until they accept it. Empty: nothing to review.",
    )
    enabled = models.BooleanField(
        default=True,
        help_text="Offered to agents. A tool an MCP server adds after its first listing stays off until "
        "an operator turns it on.",
    )
    missing_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="MCP tools: when the server stopped listing it (not offered meanwhile).",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["connector", "name"], name="action_unique_name")]

    def __str__(self) -> str:
        return self.tool_name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.remote_name:
            # An MCP server's hints are its claim, not the operator's decision (docs/design.md §1.16):
            # until an operator sets them, its tool changes data and asks a person first.
            writes = confirm = True
        else:
            writes = confirm = self.method in WRITE_METHODS
        if self.requires_confirmation is None:
            self.requires_confirmation = confirm
        if self.is_write is None:
            self.is_write = writes
        super().save(*args, **kwargs)

    @property
    def tool_name(self) -> str:
        return f"{self.connector.slug}__{self.name}"

    @property
    def title(self) -> str:
        """What people read for this tool: its display name, else one made from its name."""
        return self.display_name.strip() or humanized_name(self.name)

    def listing_change_in_words(self) -> list[str]:
        """What the server's latest listing says of this MCP tool that differs from what was
        accepted (``listing_to_review``), one phrase each, e.g. "the server now says: read-only →
        destructive"; empty when nothing waits for review."""
        change = self.listing_to_review if isinstance(self.listing_to_review, dict) else {}
        words = []
        if "annotations" in change:
            before, after = hints_in_words(self.annotations), hints_in_words(change["annotations"])
            if before != after:
                words.append(f"the server now says: {before} → {after}")
            else:
                listed_now = hints_listed(change["annotations"])
                words.append(f"its hints changed: {hints_listed(self.annotations)} → {listed_now}")
        if "description" in change:
            description = str(change["description"] or "").strip()
            words.append(
                f"its description now reads: {description}" if description else "its description is now empty"
            )
        if "input_schema" in change:
            before, after = _parameter_names(self.parameters_schema), _parameter_names(change["input_schema"])
            if before != after:
                words.append(f"its input schema changed (parameters: {before} → {after})")
            else:
                words.append(f"its input schema changed (the same parameters, other types or rules: {after})")
        return words

    def clean(self) -> None:
        check_parameters_schema(self.parameters_schema)
        connector = self.connector if self.connector_id is not None else None
        if connector is not None and not connector.is_mcp and self.name:
            try:
                validate_tool_slug(self.name)
            except ValidationError as exc:
                raise ValidationError({"name": exc.messages}) from None
        if connector is not None and len(f"{connector.slug}__{self.name}") > TOOL_NAME_MAX:
            too_long = f"the tool name would pass {TOOL_NAME_MAX} characters: shorten it"
            raise ValidationError({"name": too_long})
