"""Who may see what: the requests a user may read (web inbox, history, decision API), whether they
may decide one or read the record, and the runs behind the requests they may read.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.models import Run
from approvals.models import ApproverPolicy, ConfirmationApprover, ConfirmationRequest, EscalationTier
from approvals.policy import APPROVER_ROLES
from approvals.selectors.votes import has_voted
from approvals.standing import describe_refusal
from tenancy.models import Membership, Organization, Role

AUDIT_ROLES = (Role.AUDITOR, Role.OPERATOR, Role.ADMIN)
"""Roles that may read every confirmation request of their organisation (operators read the
approval record as they read runs in the admin: ``tenancy.roles``; they still decide nothing)."""


def _audited_organization_ids(*, user: Any) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, role__in=AUDIT_ROLES).values("organization_id")


def audited_organization_ids(*, user: Any) -> QuerySet[Any]:
    """The organisations whose record ``user`` may read (every one for a superuser)."""
    if user.is_superuser:
        return Organization.objects.values("pk")
    return _audited_organization_ids(user=user)


def with_relations(queryset: QuerySet[ConfirmationRequest]) -> QuerySet[ConfirmationRequest]:
    """``queryset`` with the rows every page shows beside a request, read in the same query."""
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
    return with_relations(requests)


def request_get(*, request_id: uuid.UUID, user: Any) -> ConfirmationRequest | None:
    """Request ``request_id`` if ``user`` may read it (:func:`requests_visible_to`), else ``None``
    — an unknown id and a hidden one look the same to the caller."""
    return requests_visible_to(user=user).filter(pk=request_id).first()


def requests_get(*, request_ids: list[uuid.UUID], user: Any) -> list[ConfirmationRequest]:
    """Those of ``request_ids`` that ``user`` may read (:func:`request_get`), with who asked and who
    decided."""
    return list(
        requests_visible_to(user=user)
        .filter(pk__in=request_ids)
        .select_related("requested_by", "responded_by", "agent")
    )


def may_decide(*, request: ConfirmationRequest, user: Any) -> bool:
    """Whether ``user`` could decide ``request`` right now (the service decides for real: this only
    chooses whether a page offers the buttons)."""
    return (
        request.is_pending
        and request.expires_at > timezone.now()
        and describe_refusal(request=request, user=user) is None
        and not has_voted(request=request, user=user)
    )


def may_view_history(*, user: Any) -> bool:
    """Whether ``user`` may read the approval history: superusers, and the auditors, operators
    and admins of an organisation."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser) or _audited_organization_ids(user=user).exists()


def may_use_inbox(*, user: Any) -> bool:
    """Whether the inbox is of use to ``user``, who then finds it in the portal's and the admin's
    headers: someone requests may go to — a superuser, an approver or admin of an organisation, a
    person an approver policy or an escalation tier names — or anyone asked before (something may
    wait for them now). Operators and auditors, who configure and read, are not: an "Inbox (0)"
    would promise them decisions they never make. Whether they may decide a given request is
    checked on it."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(
        user.is_superuser
        or Membership.objects.filter(user=user, role__in=APPROVER_ROLES).exists()
        or ApproverPolicy.objects.filter(named_users=user).exists()
        or EscalationTier.objects.filter(named_users=user).exists()
        or ConfirmationApprover.objects.filter(user=user).exists()
    )


def runs_visible_to(*, user: Any) -> QuerySet[Run]:
    """Runs whose transcript ``user`` may read: their own, and the run behind every request they
    may read (:func:`requests_visible_to`: its approvers, its requester, the auditors and admins
    of its organisation) — for anyone but a superuser, only while they still belong to that
    organisation: someone who left keeps no window on the agent's work, their own runs included.
    The one rule for the transcript page and the run stream alike (a stream checks it again when
    its watcher's memberships change, :mod:`tenancy.access`)."""
    if not getattr(user, "is_authenticated", False):
        return Run.objects.none()
    if user.is_superuser:
        return Run.objects.all()
    organizations = Membership.objects.filter(user=user).values("organization_id")
    behind_requests = requests_visible_to(user=user).filter(organization_id__in=organizations)
    return Run.objects.filter(
        Q(user_id=user.pk, agent__organization_id__in=organizations)
        | Q(pk__in=behind_requests.values("run_id"))
    )


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
