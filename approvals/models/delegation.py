"""Decisions handed on: to a stand-in while an approver is away, or to a standing approval."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from agents.models import Agent
from tenancy.models import organisation_key


class Absence(models.Model):
    """An approver away until ``ends_at``: the requests that ask them also ask ``delegate`` (a stand-in
    who decides in their place, with the standing the absent person has), those pending when the
    absence was set and those opened during it. A delegate is never away themselves, and nobody
    away is a delegate: delegation never chains or loops. Ended early by the person coming back
    (``ended_at``). Kept as history: never deleted."""

    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="absences")
    delegate = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="stand_ins")
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When the person came back early.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-starts_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(user=models.F("delegate")), name="absence_not_self"),
        ]
        indexes = [models.Index(fields=["organization", "user", "ends_at"])]

    def __str__(self) -> str:
        return f"{self.user} away until {self.ends_at:%Y-%m-%d %H:%M}, requests to {self.delegate}"

    def is_active(self, now: Any = None) -> bool:
        now = now or timezone.now()
        return self.ended_at is None and self.starts_at <= now < self.ends_at


class StandingGrant(models.Model):
    """A standing approval: an approver, approving one call, also approved later calls of the same
    tool whose arguments meet ``conditions`` (``confirm_when``'s rows), in the same conversation
    or for the whole agent, until ``expires_at`` (or until revoked). The gate uses it under a lock
    on this row, so a revocation and a use never overlap; each use is a request settled
    ``approved`` at once and logged with the grant's id. Kept as history: never deleted."""

    class Scope(models.TextChoices):
        CONVERSATION = "conversation", "this conversation"
        AGENT = "agent", "this agent"

    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="standing_grants")
    conversation = models.ForeignKey(
        "agents.Conversation", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    scope = models.CharField(max_length=12, choices=Scope.choices)
    tool_name = models.CharField(max_length=120)
    conditions = models.JSONField(help_text="The arguments it covers: confirm_when's rows, all holding.")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    source_request = models.ForeignKey(
        "ConfirmationRequest",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The approval it came with.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: until revoked.")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    uses = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["agent", "tool_name", "revoked_at"])]

    def __str__(self) -> str:
        return f"standing approval #{self.pk} of {self.tool_name}"

    def is_active(self, now: Any = None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)
