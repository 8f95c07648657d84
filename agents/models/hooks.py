"""Hook declarations: the hooks an agent runs, and those its organisation enforces on every agent.

A declaration is checked by building it as a run would (``hooks.catalog.build_item``); an http
hook's signing secret is bound to its URL's origin (:mod:`agents.models.bound_secrets`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from agents.models.agents import Agent
from agents.models.bound_secrets import SecretsBoundQuerySet, SecretsBoundToAddress
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from hooks.catalog import CODE_KINDS, SECRET_KINDS, HookDeclarationError, build_item
from tenancy.models import organisation_key


class HookDeclaration(SecretsBoundToAddress, models.Model):
    """One hook an agent runs, or, with no agent, one its organisation *enforces* on every agent.

    Kinds (``hooks.catalog.KINDS``): ``class`` names a catalog hook and ``params`` are its
    parameters; ``command`` has ``{"argv": [...], "env": {...}}``; ``python`` has
    ``{"path": "package.module.Name", ...params}``; ``http`` has ``{"url": ...}`` and its signing
    ``secret`` (encrypted), bound to the origin of the URL it was entered for: changing the URL's
    scheme, host or port needs the secret again (:class:`SecretsBoundToAddress`). Everything is
    checked on :meth:`clean` by building the hook exactly as
    a run would (``hooks.catalog.build_item``). ``priority``, ``timeout`` and ``on_error`` left
    empty take the kind's (or the catalog class's) defaults.

    Enforced hooks run for every agent of the organisation, after the agent's own hooks of the
    same point, so they have the last word (``hooks.catalog`` states the ordering rule); only the
    organisation's row can disable one or put it in shadow.

    ``mode``: ``enforce`` (its decisions apply), ``shadow`` (it runs, and what it would have done is
    recorded — in the run's trace, marked, and as a :class:`~agents.models.ShadowDecision` — while
    the call goes on as if it were absent: ``hooks.shadow``) or ``off`` (not in the chain). A change
    of mode is a recorded configuration change like any other (``history``).

    Creating or changing a command, python or http declaration needs the
    ``agents.manage_code_hooks`` permission (checked by the services, the admin and the import).
    """

    class Kind(models.TextChoices):
        CLASS = "class", "Catalog hook"
        COMMAND = "command", "Command"
        PYTHON = "python", "Python"
        HTTP = "http", "HTTP"
        PROMPT = "prompt", "Prompt (a model judges)"

    class Point(models.TextChoices):
        PRE_TOOL_USE = "PreToolUse", "Before a tool call (PreToolUse)"
        POST_TOOL_USE = "PostToolUse", "After a tool call (PostToolUse)"
        SESSION_START = "SessionStart", "When a run starts (SessionStart)"

    class OnError(models.TextChoices):
        DEFAULT = "", "Kind default"
        BLOCK = "block", "Block (fail closed)"
        ALLOW = "allow", "Allow"

    class Mode(models.TextChoices):
        ENFORCE = "enforce", "Enforce"
        SHADOW = "shadow", "Shadow (record what it would do)"
        OFF = "off", "Off"

    organization = organisation_key(on_delete=models.CASCADE, related_name="hook_declarations")
    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="hook_declarations",
        help_text="Empty: enforced on every agent of the organisation.",
    )
    name = models.CharField(max_length=100, help_text="Class hooks: the catalog name. Other kinds: a label.")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.CLASS)
    point = models.CharField(
        max_length=16, choices=Point.choices, blank=True, help_text="Empty: the catalog class's point."
    )
    matcher = models.CharField(
        max_length=200,
        blank=True,
        help_text='Tool names it runs for: empty or "*" for all, a glob ("oa__*"), or "re:<regex>".',
    )
    priority = models.IntegerField(null=True, blank=True, help_text="Lower runs earlier; below the gate.")
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds.")
    on_error = models.CharField(max_length=8, choices=OnError.choices, blank=True)
    mode = models.CharField(
        max_length=8,
        choices=Mode.choices,
        default=Mode.ENFORCE,
        help_text="Enforce: its decisions apply. Shadow: it runs and what it would have done (block, "
        "rewrite, ask) is recorded, but the call goes on as if it were absent. Off: not in the chain.",
    )
    params = models.JSONField(default=dict, blank=True)
    secret = EncryptedJSONField(
        null=True,
        blank=True,
        help_text="http hooks: the HMAC-SHA256 signing secret; prompt hooks: the model's API key. "
        "Encrypted, never shown.",
    )
    # Every change is recorded (who, when, old and new values); the secret is never copied.
    history = HistoricalRecords(excluded_fields=["secret"])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SecretsBoundQuerySet.as_manager()
    secrets_field = "secret"
    secrets_address_fields = frozenset({"kind", "params"})

    class Meta:
        ordering = ["organization", "agent", "priority", "pk"]
        permissions = [("manage_code_hooks", "Can create or change command, python and http hooks")]
        indexes = [models.Index(fields=["organization", "agent"])]

    def __str__(self) -> str:
        owner = self.agent if self.agent_id else f"{self.organization} (enforced)"
        shadow = ", shadow" if self.mode == self.Mode.SHADOW else ""
        return f"{self.name} [{self.kind}{shadow}] on {owner}"

    @property
    def enabled(self) -> bool:
        """In the chain: enforced or in shadow."""
        return self.mode != self.Mode.OFF

    @property
    def is_enforced(self) -> bool:
        return self.agent_id is None

    def secrets_address(self) -> Any:
        if self.kind == self.Kind.HTTP and isinstance(self.params, dict):
            return (self.kind, url_origin(self.params.get("url")))
        if self.kind == self.Kind.PROMPT and isinstance(self.params, dict):
            model = self.params.get("model")
            return (self.kind, url_origin(model.get("base_url")) if isinstance(model, dict) else None)
        return (self.kind,)

    @property
    def is_code(self) -> bool:
        return self.kind in CODE_KINDS

    def as_item(self) -> dict[str, Any]:
        """The declaration as ``hooks.catalog`` reads it (the secret in clear, in memory only)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "point": self.point or None,
            "matcher": self.matcher,
            "params": self.params,
            "priority": self.priority,
            "timeout": self.timeout,
            "on_error": self.on_error or None,
            "secret": self.secret if self.kind in SECRET_KINDS else None,
            "mode": self.mode,
            "id": self.pk,
        }

    def clean(self) -> None:
        if (
            self.agent_id is not None
            and self.organization_id is not None
            and self.agent.organization_id != self.organization_id
        ):
            raise ValidationError({"agent": "the agent belongs to another organisation"})
        if not isinstance(self.params, dict):
            raise ValidationError({"params": "must be a JSON object"})
        if self.kind not in SECRET_KINDS and self.secret is not None:
            raise ValidationError({"secret": "only http and prompt hooks have a secret"})
        try:
            hook = build_item(self.as_item())
        except HookDeclarationError as exc:
            raise ValidationError({"params": str(exc)}) from None
        if not self.point:
            self.point = str(hook.point)
