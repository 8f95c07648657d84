"""The connector call log: one append-only, hash-chained row per connector call.

Written only by ``agents.audit.connector_call_log_record`` and verified by
``manage.py audit_verify`` (``fimone.audit_chain``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from agents.models.agents import Agent
from agents.models.runs import Run
from fimone.audit_chain import ChainLink, canonical_time
from tenancy.models import organisation_key


class ConnectorCallLog(ChainLink):
    """One connector call, written once by the ``audit_log`` hook and never changed: who (agent,
    user, organisation, run), what (tool, arguments with secrets masked), how it ended
    (``succeeded`` / ``failed`` / ``blocked`` and by which hook), how long it took, and the size
    and SHA-256 of the tool's full result. History (docs/design.md §1.9): every relation is PROTECT.

    Tamper-evident (``fimone.audit_chain``): each row is a link of its organisation's hash chain,
    written only by ``agents.audit.connector_call_log_record``; ``manage.py audit_verify``
    recomputes it. Append-only: the ORM refuses ``update()``, ``delete()``, saving a stored row
    and deleting one (``fimone.models.AppendOnlyError``, a ``PermissionError``); on PostgreSQL a
    trigger refuses ``UPDATE`` and ``DELETE``."""

    class Outcome(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        BLOCKED = "blocked"

    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="+", null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+", null=True, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    tool_name = models.CharField(max_length=120, db_index=True)
    connector_slug = models.CharField(max_length=40, blank=True, help_text="Empty for built-in tools.")
    arguments = models.JSONField(default=dict, help_text="Secrets masked.")
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    blocked_by = models.CharField(max_length=120, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    result_size = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Bytes of the result's UTF-8 JSON text."
    )
    result_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    # Set before the hash is computed (not auto_now_add, which would set it after).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "tool_call_id"],
                condition=models.Q(run__isnull=False),
                name="connectorcalllog_unique_call",
            ),
            models.UniqueConstraint(fields=["organization", "chain_seq"], name="connectorcalllog_chain_link"),
        ]
        indexes = [models.Index(fields=["organization", "-created_at"])]

    def chain_payload(self) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "user": self.user_id,
            "run": self.run_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "connector_slug": self.connector_slug,
            "arguments": self.arguments,
            "outcome": str(self.outcome),
            "blocked_by": self.blocked_by,
            "duration_ms": self.duration_ms,
            "result_size": self.result_size,
            "result_sha256": self.result_sha256,
            "error": self.error,
            "created_at": canonical_time(self.created_at),
        }

    def __str__(self) -> str:
        return f"{self.tool_name} [{self.outcome}]"
