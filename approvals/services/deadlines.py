"""What time does to a pending request (the beat / in-process sweep, :mod:`approvals.sweeper`):
its next escalation tier is asked when due, and it expires at its deadline. One query each when
nothing is due, whatever the number of pending requests.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.db import transaction
from django.utils import timezone

from approvals.live import OPENED, inbox_changed
from approvals.models import ConfirmationApprover, ConfirmationRequest, ConfirmationStatus
from approvals.policy import eligible_ids
from approvals.services.event_log import Kind, log_event
from approvals.services.settling import verdict_follow_up
from approvals.signals import confirmation_opened


def confirmation_escalate_due(*, now: dt.datetime | None = None, limit: int = 500) -> int:
    """Escalate pending requests whose next tier is due (the beat / in-process sweep). One query
    when nothing is due. Each escalation is its own transaction and happens once: the conditional
    update on ``escalation_level`` lets only one sweeper move a request to its next tier."""
    now = now or timezone.now()
    due = list(
        ConfirmationRequest.objects.filter(
            status=ConfirmationStatus.PENDING, next_escalation_at__lte=now, expires_at__gt=now
        ).values_list("pk", flat=True)[:limit]
    )
    escalated = 0
    for request_id in due:
        with transaction.atomic():
            if _escalate(request_id=request_id, now=now):
                escalated += 1
    return escalated


def _escalate(*, request_id: uuid.UUID, now: dt.datetime) -> bool:
    """Move ``request_id`` to its next escalation tier: its tier's people join its approvers and
    its card goes to the tier's channel. ``False`` when it has no tier left or another sweeper
    moved it first. Call inside a transaction (the caller's, one per request)."""
    request = ConfirmationRequest.objects.select_related("channel_config").get(pk=request_id)
    level, plan = request.escalation_level, request.escalation_plan or []
    if level >= len(plan):
        return False
    tier = plan[level]
    following = plan[level + 1] if level + 1 < len(plan) else None
    channel_config_id = tier.get("channel_config_id") or request.channel_config_id
    channel = tier.get("channel") or request.channel
    won = ConfirmationRequest.objects.filter(
        pk=request_id,
        status=ConfirmationStatus.PENDING,
        escalation_level=level,
        stage_index=request.stage_index,
    ).update(
        escalation_level=level + 1,
        # Counted from the opening of the request, or of its current stage.
        next_escalation_at=(request.stage_opened_at or request.created_at)
        + dt.timedelta(seconds=following["after_seconds"])
        if following
        else None,
        channel_config_id=channel_config_id,
        channel=channel,
        # A new card: the previous card's id no longer names the one to update.
        external_message_id=""
        if channel_config_id != request.channel_config_id
        else request.external_message_id,
    )
    if not won:
        return False
    added = eligible_ids(
        organization_id=request.organization_id,
        user_ids=set(tier.get("user_ids") or []),
        requester_id=request.requested_by_id,
        allow_self=request.allow_self_approval,
        agent=request.agent,
    )
    # People already asked (by this stage) move up to this tier (they may decide even if the first
    # tier may not); someone another stage of the request asks stays there (one vote a person).
    stage = request.stage_index
    ConfirmationApprover.objects.filter(request_id=request_id, user_id__in=added, stage=stage).update(
        tier=level + 1
    )
    ConfirmationApprover.objects.bulk_create(
        [
            ConfirmationApprover(request_id=request_id, user_id=user_id, tier=level + 1, stage=stage)
            for user_id in added
        ],
        ignore_conflicts=True,
    )
    log_event(
        request_id=request_id,
        kind=Kind.ESCALATED,
        tier=level + 1,
        after_seconds=tier["after_seconds"],
        added_approvers=sorted(added),
        channel=channel,
        channel_config_id=channel_config_id,
        from_channel_config_id=request.channel_config_id,
    )
    transaction.on_commit(
        lambda: confirmation_opened.send(sender=ConfirmationRequest, request_id=request_id, channel=channel)
    )
    transaction.on_commit(lambda: inbox_changed(request_id=request_id, change=OPENED))
    return True


def confirmation_expire_due(*, now: dt.datetime | None = None, limit: int = 500) -> int:
    """Expire pending requests past their deadline (the beat / in-process sweep). One query when
    nothing is due. Each expiry is its own transaction with the same conditional update as a
    decision, so it races safely with clicks."""
    now = now or timezone.now()
    due = list(
        ConfirmationRequest.objects.filter(
            status=ConfirmationStatus.PENDING, expires_at__lte=now
        ).values_list("pk", flat=True)[:limit]
    )
    expired = 0
    for request_id in due:
        with transaction.atomic():
            won = ConfirmationRequest.objects.filter(pk=request_id, status=ConfirmationStatus.PENDING).update(
                status=ConfirmationStatus.EXPIRED, responded_at=now
            )
            if not won:
                continue
            request = ConfirmationRequest.objects.get(pk=request_id)
            log_event(
                request_id=request_id,
                kind=Kind.EXPIRED,
                timeout_seconds=request.timeout_seconds,
                verdict=request.verdict_record(),
            )
            verdict_follow_up(request)
            expired += 1
    return expired
