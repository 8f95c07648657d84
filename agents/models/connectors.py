"""Connectors, the services agents call, and their actions: each action is a tool an agent's model
may call, named ``<connector slug>__<action name>``.

A connector with history is never deleted (``agents.history``); its secrets are bound to its
address (:mod:`agents.models.bound_secrets`). :func:`validate_tool_slug` is named by migrations
as ``agents.models.validate_tool_slug``: the package exports it under that name.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from agents.history import check_connector_deletable
from agents.models.bound_secrets import SecretsBoundQuerySet, SecretsBoundToAddress
from agents.models.organisations import Organization
from agents.tools.schema import check_parameters_schema
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint

SLUG_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def validate_tool_slug(value: str) -> None:
    """Connector slugs and action names build tool names ``<connector>__<action>``."""
    if not SLUG_RE.match(value) or "__" in value:
        raise ValidationError(
            "use lower-case letters, digits and single underscores, starting with a letter (max 40)"
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

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="connectors", verbose_name="organisation"
    )
    slug = models.CharField(max_length=40, validators=[validate_tool_slug], help_text="Tool name prefix.")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.HTTP)
    base_url = models.URLField(blank=True, help_text="HTTP connectors: the service's base URL.")
    secrets = EncryptedJSONField(
        null=True,
        blank=True,
        help_text=(
            "Encrypted at rest. HTTP: {'headers': {...}}; database: {'dsn': 'postgres://…'} plus, "
            "recommended, {'read_dsn': 'postgres://reader@…'}: a role that may only read, used by "
            "the read tool (sql_query) instead of dsn."
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
    secrets_address_fields = frozenset({"kind", "base_url"})

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="connector_unique_slug")]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"

    def secrets_address(self) -> Any:
        if self.kind == self.Kind.HTTP:
            return (self.kind, url_origin(self.base_url))
        return (self.kind,)

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
        if self.secrets is not None and not isinstance(self.secrets, dict):
            raise ValidationError({"secrets": "must be a JSON object"})
        if self.kind == self.Kind.HTTP and not self.base_url:
            raise ValidationError({"base_url": "an HTTP connector needs a base URL"})
        if self.kind == self.Kind.DATABASE and not (self.secrets or {}).get("dsn"):
            raise ValidationError({"secrets": "a database connector needs {'dsn': …} in its secrets"})
        read_dsn = (self.secrets or {}).get("read_dsn")
        if self.kind == self.Kind.DATABASE and read_dsn is not None and not isinstance(read_dsn, str):
            raise ValidationError({"secrets": "read_dsn must be a DSN string, like dsn"})


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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
    name = models.CharField(max_length=40, validators=[validate_tool_slug])
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

    class Meta:
        constraints = [models.UniqueConstraint(fields=["connector", "name"], name="action_unique_name")]

    def __str__(self) -> str:
        return self.tool_name

    def save(self, *args: Any, **kwargs: Any) -> None:
        writes = self.method in WRITE_METHODS
        if self.requires_confirmation is None:
            self.requires_confirmation = writes
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

    def clean(self) -> None:
        check_parameters_schema(self.parameters_schema)
