"""Reads of confirmation requests."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.models import Membership, Role, Run
from approvals.models import (
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
)
from approvals.policy import describe_refusal


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
    """Pending, unexpired requests ``user`` is an approver of, in organisations they still belong
    to, soonest deadline first (a change of policy since opening is checked when they decide)."""
    return (
        ConfirmationRequest.objects.filter(
            approvers=user,
            status=ConfirmationStatus.PENDING,
            expires_at__gt=timezone.now(),
            organization_id__in=Membership.objects.filter(user=user).values("organization_id"),
        )
        .select_related("agent", "requested_by", "run", "run__conversation")
        .order_by("expires_at")
    )


def display_name(user: Any) -> str:
    if user is None:
        return "nobody"
    full = user.get_full_name() if hasattr(user, "get_full_name") else ""
    return full or user.get_username()


# --- who may see what (web inbox, history, decision API) -----------------------------------------

AUDIT_ROLES = (Role.AUDITOR, Role.ADMIN)
"""Roles that may read every confirmation request of their organisation."""


def _audited_organization_ids(*, user: Any) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, role__in=AUDIT_ROLES).values("organization_id")


def _with_relations(queryset: QuerySet[ConfirmationRequest]) -> QuerySet[ConfirmationRequest]:
    return queryset.select_related(
        "organization", "agent", "requested_by", "responded_by", "run", "run__conversation"
    )


def requests_visible_to(*, user: Any) -> QuerySet[ConfirmationRequest]:
    """Requests ``user`` may read: those they may decide or asked for, every request of the
    organisations they audit or administer, and everything for a superuser."""
    if not getattr(user, "is_authenticated", False):
        return ConfirmationRequest.objects.none()
    requests = ConfirmationRequest.objects.all()
    if not user.is_superuser:
        # A subquery on the approvers table rather than a join: a join would repeat a request
        # once per matching approver row and need DISTINCT.
        decidable = ConfirmationApprover.objects.filter(user_id=user.pk).values("request_id")
        requests = requests.filter(
            Q(pk__in=decidable)
            | Q(requested_by_id=user.pk)
            | Q(organization_id__in=_audited_organization_ids(user=user))
        )
    return _with_relations(requests)


def request_get(*, request_id: uuid.UUID, user: Any) -> ConfirmationRequest | None:
    """Request ``request_id`` if ``user`` may read it (:func:`requests_visible_to`), else ``None``
    — an unknown id and a hidden one look the same to the caller."""
    return requests_visible_to(user=user).filter(pk=request_id).first()


def request_events(*, request: ConfirmationRequest) -> QuerySet[ConfirmationEvent]:
    """The append-only log of ``request``, oldest first."""
    return (
        ConfirmationEvent.objects.filter(request=request).select_related("actor").order_by("created_at", "pk")
    )


def may_decide(*, request: ConfirmationRequest, user: Any) -> bool:
    """Whether ``user`` could decide ``request`` right now (the service decides for real: this only
    chooses whether a page offers the buttons)."""
    return (
        request.is_pending
        and request.expires_at > timezone.now()
        and describe_refusal(request=request, user=user) is None
    )


def may_view_history(*, user: Any) -> bool:
    """Whether ``user`` may read the approval history: superusers, org auditors and admins."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser) or _audited_organization_ids(user=user).exists()


def history_for(*, user: Any, status: str | None = None) -> QuerySet[ConfirmationRequest]:
    """Every request of the organisations ``user`` audits or administers (all of them for a
    superuser), newest first, optionally only those with ``status``. Empty for anyone else."""
    if not may_view_history(user=user):
        return ConfirmationRequest.objects.none()
    requests = ConfirmationRequest.objects.all()
    if not user.is_superuser:
        requests = requests.filter(organization_id__in=_audited_organization_ids(user=user))
    if status:
        requests = requests.filter(status=status)
    return _with_relations(requests).order_by("-created_at", "-pk")


# --- who may read the run behind a request ------------------------------------------------------


def runs_visible_to(*, user: Any) -> QuerySet[Run]:
    """Runs whose transcript ``user`` may read: their own, and the run behind every request they
    may read (:func:`requests_visible_to`: its approvers, its requester, the auditors and admins
    of its organisation) — for anyone but the owner and a superuser, only while they still belong
    to that organisation: an approver who left keeps no window on the agent's work. The one rule
    for the transcript page and the run stream alike."""
    if not getattr(user, "is_authenticated", False):
        return Run.objects.none()
    if user.is_superuser:
        return Run.objects.all()
    behind_requests = requests_visible_to(user=user).filter(
        organization_id__in=Membership.objects.filter(user=user).values("organization_id")
    )
    return Run.objects.filter(Q(user_id=user.pk) | Q(pk__in=behind_requests.values("run_id")))


def run_visible_to(*, run_id: int, user: Any) -> bool:
    """Whether ``user`` may read run ``run_id`` (:func:`runs_visible_to`)."""
    return runs_visible_to(user=user).filter(pk=run_id).exists()


def run_for_transcript(*, run_id: int, user: Any) -> Run | None:
    """Run ``run_id`` with its agent, organisation and owner if ``user`` may read it, else ``None``
    — an unknown id and a hidden one look the same."""
    return (
        runs_visible_to(user=user)
        .select_related("agent", "agent__organization", "user", "conversation")
        .filter(pk=run_id)
        .first()
    )


def requests_of_run(*, run: Run, user: Any) -> QuerySet[ConfirmationRequest]:
    """The requests of ``run`` that ``user`` may read, oldest first (the transcript links them)."""
    return requests_visible_to(user=user).filter(run=run).order_by("created_at", "pk")
