"""Delegation and absence (docs/design.md §5): an approver away until a date names who decides in their
place, and an organisation admin reassigns a person's pending requests to someone else.

A stand-in is a row of the request's approver snapshot that names whom it stands in for
(``ConfirmationApprover.delegate_of``): it takes that person's seat (one vote between them), at the
same stage and tier, and decides only while the absence runs and with the absent person's standing
(:func:`approvals.standing.describe_refusal`). Delegation never chains: a delegate is never away, and
nobody away is a delegate. Every stand-in is logged on the request, naming both people.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.live import OPENED, inbox_changed
from approvals.models import Absence, ConfirmationApprover, ConfirmationRequest, ConfirmationStatus
from approvals.policy import APPROVER_ROLES, eligible_ids
from approvals.selectors import display_name
from approvals.services.event_log import Kind, log_event
from tenancy.models import Membership

MAX_ABSENCE_DAYS = 366
"""The longest absence one sets at once."""


class AbsenceRefused(Exception):
    """Why an absence or a reassignment cannot be set, in words for the person asking."""


def active_absences(*, organization_id: int, now: dt.datetime | None = None) -> Any:
    now = now or timezone.now()
    return Absence.objects.filter(
        organization_id=organization_id, ended_at__isnull=True, starts_at__lte=now, ends_at__gt=now
    )


def check_absence(
    *, user: Any, organization_id: int, delegate: Any, ends_at: dt.datetime, now: dt.datetime
) -> str | None:
    """Why ``user`` may not be away until ``ends_at`` with ``delegate`` deciding in their place
    (``None`` when they may)."""
    if ends_at <= now:
        return "the end of the absence must be in the future"
    if ends_at > now + dt.timedelta(days=MAX_ABSENCE_DAYS):
        return f"an absence lasts at most {MAX_ABSENCE_DAYS} days"
    if delegate is None or delegate.pk == user.pk:
        return "choose someone else to decide in your place"
    approvers = Membership.objects.filter(organization_id=organization_id, role__in=APPROVER_ROLES)
    if not approvers.filter(user_id=user.pk).exists():
        return "only approvers and admins of the organisation set an absence"
    if not delegate.is_active or not approvers.filter(user_id=delegate.pk).exists():
        return f"{display_name(delegate)} is not an approver of the organisation"
    running = active_absences(organization_id=organization_id, now=now)
    if running.filter(user_id=delegate.pk).exists():
        return f"{display_name(delegate)} is away too: choose someone who is here (delegation never chains)"
    standing_in = running.filter(delegate_id=user.pk).exclude(user_id=delegate.pk).first()
    if standing_in is not None:
        return (
            f"you stand in for {display_name(standing_in.user)} until "
            f"{standing_in.ends_at:%Y-%m-%d %H:%M %Z}: they must come back, or choose another delegate, first"
        )
    if running.filter(user_id=user.pk).exists():
        return "you are away already: come back first, then set the new absence"
    return None


@transaction.atomic
def absence_set(*, user: Any, organization_id: int, delegate: Any, ends_at: dt.datetime) -> Absence:
    """``user`` is away until ``ends_at`` and ``delegate`` decides in their place: the pending
    requests that ask ``user`` ask ``delegate`` too, and so do those opened until then. Raises
    :class:`AbsenceRefused`. The organisation's approvers' memberships are locked meanwhile, so
    two absences set at once cannot make a chain."""
    now = timezone.now()
    list(
        Membership.objects.select_for_update().filter(
            organization_id=organization_id, role__in=APPROVER_ROLES
        )
    )
    problem = check_absence(
        user=user, organization_id=organization_id, delegate=delegate, ends_at=ends_at, now=now
    )
    if problem is not None:
        raise AbsenceRefused(problem)
    absence = Absence.objects.create(
        organization_id=organization_id,
        user=user,
        delegate=delegate,
        starts_at=now,
        ends_at=ends_at,
        created_by=user,
    )
    pending = ConfirmationRequest.objects.filter(
        organization_id=organization_id, status=ConfirmationStatus.PENDING, expires_at__gt=now
    )
    rows = ConfirmationApprover.objects.filter(
        request__in=pending, user_id=user.pk, withdrawn_at__isnull=True
    ).select_related("request", "request__agent")
    for row in rows:
        stand_in(row=row, absence=absence)
    return absence


def stand_in(*, row: ConfirmationApprover, absence: Absence) -> bool:
    """Add ``absence.delegate`` to ``row``'s request in the seat of ``row.user`` (same stage and
    tier), if they may decide it and are not asked already; log it. Caller is in a transaction."""
    request = row.request
    delegate_id = absence.delegate_id
    allowed = eligible_ids(
        organization_id=request.organization_id,
        user_ids={delegate_id},
        requester_id=request.requested_by_id,
        allow_self=request.allow_self_approval,
        agent=request.agent,
    )
    if delegate_id not in allowed:
        return False
    _, created = ConfirmationApprover.objects.get_or_create(
        request_id=request.pk,
        user_id=delegate_id,
        defaults={"tier": row.tier, "stage": row.stage, "delegate_of_id": row.user_id, "absence": absence},
    )
    if not created:
        return False
    log_event(
        request_id=request.pk,
        organization_id=request.organization_id,
        kind=Kind.DELEGATED,
        actor=absence.user,
        approvers=[delegate_id],
        stands_in_for=[row.user_id],
        until=absence.ends_at.isoformat(),
    )
    request_id = request.pk
    transaction.on_commit(lambda: inbox_changed(request_id=request_id, change=OPENED))
    return True


@transaction.atomic
def absence_end(*, absence: Absence) -> Absence:
    """The person is back: their delegate no longer decides in their place (from now on)."""
    locked = Absence.objects.select_for_update().get(pk=absence.pk)
    if locked.ended_at is None and locked.ends_at > timezone.now():
        locked.ended_at = timezone.now()
        locked.save(update_fields=["ended_at"])
    return locked


def stand_ins_at_opening(
    *, organization_id: int, asked: list[set[int]], now: dt.datetime
) -> dict[int, Absence]:
    """For a request about to open, whose stages ask ``asked`` (one set per stage): the running
    absences of the people asked, by person."""
    people = set().union(*asked) if asked else set()
    if not people:
        return {}
    return {
        absence.user_id: absence
        for absence in active_absences(organization_id=organization_id, now=now).filter(user_id__in=people)
    }


@transaction.atomic
def confirmation_reassign(*, organization_id: int, person: Any, to: Any, by: Any) -> int:
    """An organisation admin's reassignment: ``person``'s part of the pending requests of the
    organisation they have not voted on goes to ``to`` (who must be an approver or admin of it,
    and may decide each request: not its requester, not barred by separation of duties).
    ``person`` no longer decides them. Returns how many requests moved. Raises
    :class:`AbsenceRefused`."""
    approvers = Membership.objects.filter(organization_id=organization_id, role__in=APPROVER_ROLES)
    if to is None or to.pk == person.pk:
        raise AbsenceRefused("choose someone else to take the requests")
    if not to.is_active or not approvers.filter(user_id=to.pk).exists():
        raise AbsenceRefused(f"{display_name(to)} is not an approver of the organisation")
    now = timezone.now()
    pending = ConfirmationRequest.objects.select_for_update(no_key=True).filter(
        organization_id=organization_id, status=ConfirmationStatus.PENDING, expires_at__gt=now
    )
    rows = (
        ConfirmationApprover.objects.filter(request__in=pending, user_id=person.pk, withdrawn_at__isnull=True)
        .exclude(request__votes__user_id=person.pk)
        .select_related("request", "request__agent")
    )
    moved = 0
    for row in rows:
        request = row.request
        list(ConfirmationRequest.objects.select_for_update(no_key=True).filter(pk=request.pk))
        allowed = eligible_ids(
            organization_id=organization_id,
            user_ids={to.pk},
            requester_id=request.requested_by_id,
            allow_self=request.allow_self_approval,
            agent=request.agent,
        )
        if to.pk not in allowed:
            continue
        _, created = ConfirmationApprover.objects.get_or_create(
            request_id=request.pk,
            user_id=to.pk,
            defaults={"tier": row.tier, "stage": row.stage, "delegate_of_id": person.pk},
        )
        ConfirmationApprover.objects.filter(pk=row.pk).update(withdrawn_at=now)
        log_event(
            request_id=request.pk,
            organization_id=organization_id,
            kind=Kind.REASSIGNED,
            actor=by,
            approvers=[to.pk],
            stands_in_for=[person.pk],
            already_asked=not created,
        )
        request_id = request.pk
        transaction.on_commit(lambda r=request_id: inbox_changed(request_id=r, change=OPENED))
        moved += 1
    return moved
