"""The shadow decisions: what a hook in shadow mode would have done, one append-only, hash-chained
row per decision that would have changed a call or a run.

Written only by ``agents.shadow_log.shadow_decisions_record``; counted per declaration in the admin
(the "would have" counter); verified by ``manage.py audit_verify`` with the other chains.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from agents.models.agents import Agent
from agents.models.runs import Run
from fimone.audit_chain import ChainLink, canonical_time
from tenancy.models import organisation_key


class ShadowDecision(ChainLink):
    """A hook in shadow mode would have blocked, rewritten, asked, added context or failed
    (``decision``) on one call (``tool_call_id``, empty for a run's SessionStart) of a run; the
    call went on as if the hook were absent. ``declaration_pk`` names the declaration (kept as a
    number: the record outlives a declaration that is deleted); ``source`` is where it was declared
    (``agent``, ``organisation``). ``detail`` is the hook's reason, credentials masked.

    Tamper-evident and append-only like the connector call log (``fimone.audit_chain``)."""

    class Decision(models.TextChoices):
        BLOCK = "block", "would have blocked"
        ASK = "ask", "would have asked for approval"
        REWRITE = "rewrite", "would have rewritten"
        CONTEXT = "context", "would have added context"
        FAIL_CLOSED = "fail_closed", "would have failed closed"
        FAIL_OPEN = "fail_open", "would have failed open"

    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="+", null=True, blank=True)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+", null=True, blank=True)
    declaration_pk = models.BigIntegerField(null=True, blank=True, verbose_name="declaration")
    hook = models.CharField(max_length=100)
    source = models.CharField(max_length=20, blank=True)
    point = models.CharField(max_length=16)
    tool_call_id = models.CharField(max_length=100, blank=True)
    tool_name = models.CharField(max_length=120, blank=True)
    decision = models.CharField(max_length=12, choices=Decision.choices)
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "chain_seq"], name="shadowdecision_chain_link"),
        ]
        indexes = [
            models.Index(fields=["organization", "-created_at"]),
            models.Index(fields=["declaration_pk", "decision"]),
        ]

    def chain_payload(self) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "run": self.run_id,
            "declaration": self.declaration_pk,
            "hook": self.hook,
            "source": self.source,
            "point": self.point,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "decision": str(self.decision),
            "detail": self.detail,
            "created_at": canonical_time(self.created_at),
        }

    def __str__(self) -> str:
        return f"{self.hook} {self.get_decision_display()} {self.tool_name or self.point}"
