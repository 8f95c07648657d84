"""Agents: the assistants of an organisation, with their model configuration, the connector
actions and built-in tools they may use, and the agents they may delegate to.

An agent's own model ``api_key`` is bound to its endpoint (:mod:`agents.models.bound_secrets`).
Its hook declarations (:mod:`agents.models.hooks`) are declared below it and refer to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from agents.checks import check_agent_config
from agents.models.bound_secrets import SecretsBoundQuerySet, SecretsBoundToAddress
from agents.models.connectors import ConnectorAction
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint
from tenancy.models import organisation_key


class Agent(SecretsBoundToAddress, models.Model):
    """An assistant. Its own ``api_key`` (in :attr:`secrets`) is bound to the origin of the model
    endpoint it was entered for (``model_config_json.base_url``, or the platform's endpoint
    without one): :class:`SecretsBoundToAddress`."""

    class Engine(models.TextChoices):
        REACT = "react", "ReAct"
        DAG = "dag", "DAG"

    organization = organisation_key(on_delete=models.CASCADE, related_name="agents")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_agents")
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    engine = models.CharField(max_length=8, choices=Engine.choices, default=Engine.REACT)
    model_config_json = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"provider": "scripted"|"openai", "model": …, "params": {…}, '
        '"hooks": {"class_hooks": ["name", {"name": …, "params": {…}}]}}',
    )
    secrets = EncryptedJSONField(
        null=True,
        blank=True,
        help_text='Encrypted at rest, never shown again: {"api_key": "sk-…"} for the openai provider.',
    )
    require_confirmation_for_all = models.BooleanField(default=False)
    actions = models.ManyToManyField(ConnectorAction, blank=True, related_name="agents")
    builtin_tools = models.JSONField(
        default=list, blank=True, help_text='e.g. ["current_time", "calculator"]'
    )
    max_iterations = models.PositiveIntegerField(default=12)
    delegates = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="delegated_from",
        help_text="Agents of the same organisation this agent may call (its call_agent tool). Each "
        "runs with its own hooks and its own confirmation settings.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived agents cannot run; their history stays readable."
    )
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    # Configuration history; the secrets are never copied into it (fimone.history).
    history = HistoricalRecords(excluded_fields=["secrets"], bases=[SecretsFingerprint])
    objects = SecretsBoundQuerySet.as_manager()
    secrets_address_fields = frozenset({"model_config_json"})

    def __str__(self) -> str:
        return self.name

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    def secrets_address(self) -> Any:
        config = self.model_config_json if isinstance(self.model_config_json, dict) else {}
        return url_origin(config.get("base_url"))  # None: the platform's own endpoint

    def archived_reason(self) -> str | None:
        """Why this agent may not run (it or its organisation is archived), else ``None``."""
        if self.archived_at is not None:
            return "this agent is archived and cannot run"
        if self.organization.archived_at is not None:
            return "this agent's organisation is archived; its agents cannot run"
        return None

    def clean(self) -> None:
        check_agent_config(self)

    def hook_declarations_query(self) -> Any:
        """The declarations a run of this agent carries (enforced or in shadow, not off): its
        organisation's and its own, in (priority, pk) order."""
        # The declarations refer to this model (agents.models.hooks imports this module), so their
        # model is reached through that relation rather than imported.
        declarations = self._meta.get_field("hook_declarations").related_model
        return (
            declarations.objects.filter(
                Q(agent__isnull=True) | Q(agent_id=self.pk), organization_id=self.organization_id
            )
            .exclude(mode="off")
            .order_by("priority", "pk")
        )

    def hook_declaration_items(
        self, rows: Iterable[Any] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """:meth:`hook_declarations_query`'s declarations as ``hooks.catalog`` items:
        ``(enforced by its organisation, its own)``, each in (priority, pk) order. ``rows``: those
        declarations as a caller already read them (a statement on the event loop), else they
        are read here."""
        enforced: list[dict[str, Any]] = []
        own: list[dict[str, Any]] = []
        for row in self.hook_declarations_query() if rows is None else rows:  # one read, both lists
            (enforced if row.agent_id is None else own).append(row.as_item())
        return enforced, own

    def provider_config(self) -> dict[str, Any]:
        """The model configuration a provider is built from: ``model_config_json`` with the
        decrypted ``api_key`` from :attr:`secrets`. In memory only; never stored or shown."""
        config = dict(self.model_config_json) if isinstance(self.model_config_json, dict) else {}
        api_key = self.secrets.get("api_key") if isinstance(self.secrets, dict) else None
        if api_key:
            config["api_key"] = api_key
        return config
