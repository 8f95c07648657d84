"""Plain reads of confirmation requests: one request by id or by call, a user's inbox, a request's
event log, and how a person is named on every page, card and event.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from approvals.models import (
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from tenancy.models import Membership


def display_name(user: Any) -> str:
    if user is None:
        return "nobody"
    full = user.get_full_name() if hasattr(user, "get_full_name") else ""
    return full or user.get_username()


def request_status(*, request_id: uuid.UUID) -> str:
    return ConfirmationRequest.objects.filter(pk=request_id).values_list("status", flat=True).get()


def request_for_call(*, run_id: int, tool_call_id: str) -> ConfirmationRequest | None:
    return (
        ConfirmationRequest.objects.select_related("responded_by")
        .filter(run_id=run_id, tool_call_id=tool_call_id)
        .first()
    )


def request_for_decision(*, request_id: uuid.UUID) -> ConfirmationRequest | None:
    """The request with the related rows every decider shows next (cards, pages). The agent's
    configuration and secrets are not loaded: a click needs its name, and no secret of it."""
    return (
        ConfirmationRequest.objects.select_related("agent", "requested_by", "responded_by")
        .defer("agent__model_config_json", "agent__secrets", "agent__instructions", "agent__builtin_tools")
        .filter(pk=request_id)
        .first()
    )


def inbox_for(*, user: Any) -> QuerySet[ConfirmationRequest]:
    """Pending, unexpired requests ``user`` is asked to decide (by the request's current stage,
    in their own right or standing in for someone, not reassigned away) and has not voted on yet,
    in organisations they still belong to, soonest deadline first (a change of policy since
    opening is checked when they decide)."""
    # Asked by the request's current stage (0 for a request without stages).
    asked = ConfirmationApprover.objects.filter(
        request_id=OuterRef("pk"), user_id=user.pk, stage=OuterRef("stage_index"), withdrawn_at__isnull=True
    )
    return (
        ConfirmationRequest.objects.filter(
            Exists(asked),
            status=ConfirmationStatus.PENDING,
            expires_at__gt=timezone.now(),
            organization_id__in=Membership.objects.filter(user=user).values("organization_id"),
        )
        .exclude(pk__in=ConfirmationVote.objects.filter(user_id=user.pk).values("request_id"))
        .select_related("agent", "requested_by", "run", "run__conversation")
        .order_by("expires_at")
    )


def request_events(*, request: ConfirmationRequest) -> QuerySet[ConfirmationEvent]:
    """The append-only log of ``request``, oldest first."""
    return (
        ConfirmationEvent.objects.filter(request=request).select_related("actor").order_by("created_at", "pk")
    )


def stand_in_for(*, user: Any, request_ids: list[Any]) -> dict[str, str]:
    """For the requests of ``request_ids`` that ask ``user`` in someone else's place (an absence's
    delegate, a reassignment): whom, by request id (as text, for templates). One query."""
    rows = ConfirmationApprover.objects.filter(
        user_id=user.pk, request_id__in=request_ids, delegate_of__isnull=False, withdrawn_at__isnull=True
    ).select_related("delegate_of")
    return {str(row.request_id): display_name(row.delegate_of) for row in rows}
