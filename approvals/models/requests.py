"""Confirmation requests: the people asked, their votes, and the append-only event log (docs/design.md §5)."""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.utils import timezone

from agents.models import Agent, Run
from approvals.models.channel_configs import ChannelConfig
from approvals.models.delegation import StandingGrant
from fimone.audit_chain import ChainLink, canonical_digest, canonical_time
from fimone.models import AppendOnlyQuerySet, refuse_change
from tenancy.models import organisation_key


class ConfirmationStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


#: The kind of the event that settles a request with each final status.
VERDICT_EVENT_KIND = {
    ConfirmationStatus.APPROVED: "decided",
    ConfirmationStatus.REJECTED: "decided",
    ConfirmationStatus.EXPIRED: "expired",
    ConfirmationStatus.CANCELLED: "cancelled",
}


class ConfirmationRequest(models.Model):
    """A human's go / no-go on one tool call with exact arguments.

    ``status`` leaves ``pending`` once, by a conditional update in ``approvals.services``; nothing
    else writes it. Once it has, the verdict is final: on PostgreSQL a trigger refuses any change
    of the verdict columns (status, decider, moment, reason, arguments) and any deletion of a
    request, and the settling event records them for ``audit_verify``.
    """

    class Mode(models.TextChoices):
        CHANNEL = "channel"
        INLINE = "inline"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # History (docs/design.md §1.9): every relation is PROTECT, so no deletion of an organisation, agent,
    # run, user or channel removes a request by cascade.
    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="confirmation_requests")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="confirmation_requests")
    tool_call_id = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=120)
    tool_title = models.CharField(
        max_length=120, blank=True, help_text="The tool as people read it (its display name)."
    )
    tool_args = models.JSONField()
    context = models.JSONField(
        default=list,
        blank=True,
        help_text='What the call is about, for approvers: [{"label": …, "value": …}], read when the '
        "request opened (the action's context action, else its arguments).",
    )
    args_sha256 = models.CharField(max_length=64)
    status = models.CharField(
        max_length=12, choices=ConfirmationStatus.choices, default=ConfirmationStatus.PENDING, db_index=True
    )
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.CHANNEL)
    channel = models.CharField(max_length=20, default="web", help_text="Provider kind the card went to.")
    channel_config = models.ForeignKey(
        ChannelConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    external_message_id = models.CharField(max_length=200, blank=True)
    approvers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        through="ConfirmationApprover",
        through_fields=("request", "user"),
        related_name="approvable_requests",
    )
    allow_self_approval = models.BooleanField(default=False)
    # The policy's quorum, snapshotted at opening: a later change of policy never moves the bar
    # of a request in flight.
    approvals_required = models.PositiveSmallIntegerField(default=1)
    any_rejection_rejects = models.BooleanField(default=True)
    allow_edit_on_approve = models.BooleanField(default=False)
    # When an approver edited the arguments: ``tool_args`` / ``args_sha256`` are the approved ones
    # (what runs), these keep what the model proposed, and who changed them.
    # Escalation, snapshotted at opening: the tiers still to come (``[{"after_seconds",
    # "user_ids", "channel_config_id", "channel"}]``), how many happened, and when the next is due.
    escalation_plan = models.JSONField(default=list, blank=True)
    escalation_level = models.PositiveSmallIntegerField(default=0)
    next_escalation_at = models.DateTimeField(null=True, blank=True, db_index=True)
    first_tier_may_decide_after_escalation = models.BooleanField(default=True)
    # Stages, snapshotted at opening (``[{"name", "approvals_required", "timeout_seconds",
    # "user_ids", "tiers"}]``, empty for a request without stages), the one being asked now
    # (``approvals_required``, ``expires_at`` and the escalation fields are that stage's), and
    # when it opened.
    stage_plan = models.JSONField(default=list, blank=True)
    #: The W3C ``traceparent`` of the tool call that asked (fimone/telemetry.py), so its approval
    #: span is that call's child wherever the verdict is learnt; empty while telemetry is off.
    trace_context = models.CharField(max_length=64, blank=True, default="", editable=False)
    #: The standing approval that approved this call at once (no person was asked).
    grant = models.ForeignKey(
        StandingGrant, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    stage_index = models.PositiveSmallIntegerField(default=0)
    stage_opened_at = models.DateTimeField(null=True, blank=True)
    proposed_args = models.JSONField(null=True, blank=True)
    proposed_args_sha256 = models.CharField(max_length=64, blank=True)
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    responded_at = models.DateTimeField(null=True, blank=True)
    responded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    responded_by_external_id = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="confirmation_unique_call"),
        ]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} [{self.status}]"

    @property
    def is_pending(self) -> bool:
        return self.status == ConfirmationStatus.PENDING

    @property
    def was_edited(self) -> bool:
        return self.edited_by_id is not None

    @property
    def requested_args_sha256(self) -> str:
        """The hash of the arguments the call was proposed with (the gate recognises the call by
        it, whatever an approver changed)."""
        return self.proposed_args_sha256 or self.args_sha256

    @property
    def timeout_seconds(self) -> int:
        return round((self.expires_at - self.created_at).total_seconds())

    def verdict_record(self) -> dict[str, Any]:
        """The verdict columns as JSON values: what the event that settles the request records
        (``details["verdict"]``) and ``audit_verify`` compares with the row. The arguments are
        recorded by their canonical digest (the same for what the database gives back)."""
        return {
            "status": str(self.status),
            "responded_by": self.responded_by_id,
            "responded_by_external_id": self.responded_by_external_id,
            "reason": self.reason,
            "args_sha256": self.args_sha256,
            "tool_args": canonical_digest(self.tool_args),
        }


class ConfirmationApprover(models.Model):
    """One person of a request's approver snapshot (the table Django made for ``approvers``).

    Explicit so that it is history like the rest of the request: deleting a user who was asked
    to decide is refused (``PROTECT``) instead of silently shrinking the snapshot.
    """

    request = models.ForeignKey(
        ConfirmationRequest, on_delete=models.PROTECT, db_column="confirmationrequest_id", related_name="+"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    #: 0 for the people first asked, n for those added by the n-th escalation.
    tier = models.PositiveSmallIntegerField(default=0)
    #: The stage (0-based, of the request's ``stage_plan``) that asks this person; 0 without stages.
    stage = models.PositiveSmallIntegerField(default=0)
    #: Whom this person stands in for on this request (an absence's delegate, or a reassignment),
    #: ``None`` when they were asked in their own right.
    delegate_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    #: The absence that made them a stand-in (``None`` for an admin's reassignment, which lasts).
    absence = models.ForeignKey("Absence", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    #: When an admin reassigned this person's part of the request to someone else: they no longer decide it.
    withdrawn_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "approvals_confirmationrequest_approvers"
        # The same unique index Django made for the implicit table (same columns, same name).
        unique_together = [("request", "user")]

    def __str__(self) -> str:
        return f"{self.user_id} may decide {self.request_id}"


class ConfirmationVote(models.Model):
    """One approver's vote on a request: at most one per person (a second click counts once).

    Written only by ``approvals.services.confirmation_decide`` (and the click's one statement,
    ``approvals.decision_sql``), under a lock on the request, so the tally that settles the
    request always counts every vote. Never updated or deleted: the ORM refuses it
    (``AppendOnlyError``), and on PostgreSQL a trigger refuses it too.
    """

    request = models.ForeignKey(ConfirmationRequest, on_delete=models.PROTECT, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    approve = models.BooleanField()
    reason = models.TextField(blank=True)
    external_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["request", "user"], name="confirmation_one_vote_per_person"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {'approves' if self.approve else 'rejects'} {self.request_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            refuse_change(type(self), "save of a stored vote")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_change(type(self), "delete")


class ConfirmationEvent(ChainLink):
    """Append-only audit log of one request: rows are inserted, never updated or deleted.

    Tamper-evident (``fimone.audit_chain``): each event is a link of its organisation's hash chain,
    written only by ``approvals.services.log_event`` (and the click's one statement,
    ``approvals.decision_sql``); ``manage.py audit_verify`` recomputes it. The ORM refuses to
    update or delete an event (``AppendOnlyError``); on PostgreSQL a trigger refuses it too.

    The event that settles a request (``decided``, ``expired``, ``cancelled``) records the verdict
    columns it left on the request (``details["verdict"]``, :meth:`ConfirmationRequest.verdict_record`),
    so that ``audit_verify`` finds a verdict edited on the request row.
    """

    class Kind(models.TextChoices):
        CREATED = "created"
        DELIVERED = "delivered"
        DELIVERY_FAILED = "delivery_failed"
        CLICK_REFUSED = "click_refused"
        EDITED = "edited"
        ESCALATED = "escalated"
        STAGE_OPENED = "stage_opened"
        DELEGATED = "delegated"
        GRANTED = "granted"
        REASSIGNED = "reassigned"
        VOTED = "voted"
        DECIDED = "decided"
        EXPIRED = "expired"
        CANCELLED = "cancelled"
        EXECUTED = "executed"

    # The request's organisation, copied: the chain is per organisation and so is its lock.
    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    request = models.ForeignKey(ConfirmationRequest, on_delete=models.PROTECT, related_name="events")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_external_id = models.CharField(max_length=200, blank=True)
    details = models.JSONField(default=dict, blank=True)
    # Set before the hash is computed (not auto_now_add, which would set it after).
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "chain_seq"], name="confirmation_event_chain_link"
            ),
        ]

    def chain_payload(self) -> dict[str, Any]:
        return {
            "request": str(self.request_id),
            "kind": str(self.kind),
            "actor": self.actor_id,
            "actor_external_id": self.actor_external_id,
            "details": self.details,
            "created_at": canonical_time(self.created_at),
        }

    def __str__(self) -> str:
        return f"{self.kind} @ {self.created_at:%Y-%m-%d %H:%M:%S}"
