"""Joining an organisation takes the invitee's consent (#9 item 2).

An organisation admin (or a superuser) invites an existing user, or an e-mail address, with a
role (:func:`invitation_create`); the inviter passes the one-time link on, and the invitee opens
it signed in and accepts (:func:`invitation_accept`). Only then is the membership created. An
admin who could add anyone could otherwise make another organisation's approver a member of
theirs and act on them there.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from agents.models import Invitation, Membership, Organization, Role
from agents.roles import membership_set
from agents.services import ServiceError
from fimone.onetime import LinkRefused, new_token, token_digest

log = logging.getLogger(__name__)

INVITATION_TTL = dt.timedelta(days=7)


class InvitationRefused(LinkRefused):
    """The invitation cannot be accepted (``status``: the HTTP status the page answers with)."""


def invitation_url(token: str) -> str:
    return settings.SITE_URL + reverse("invitation", args=[token])


def may_invite(*, user: Any, organization_id: int) -> bool:
    """Organisation admins (and superusers) invite, as only they grant roles."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(user=user, organization_id=organization_id, role=Role.ADMIN).exists()


@transaction.atomic
def invitation_create(
    *,
    organization: Organization,
    invited_by: Any,
    role: str,
    invited_user: Any = None,
    email: str = "",
) -> tuple[Invitation, str]:
    """Invite ``invited_user`` (or whoever signs in with ``email``) to ``organization`` as
    ``role``. Returns the invitation and its link (shown once: only a digest is stored)."""
    if not may_invite(user=invited_by, organization_id=organization.pk):
        raise ServiceError("only an admin of the organisation may invite to it", code="permission_denied")
    if role not in Role.values:
        raise ServiceError(f"unknown role {role!r}", field="role")
    if (invited_user is None) == (not email):
        raise ServiceError("name the invited user or give their e-mail address, not both")
    token, digest = new_token()
    invitation = Invitation.objects.create(
        organization=organization,
        invited_user=invited_user,
        email=email or "",
        role=role,
        invited_by=invited_by,
        token_sha256=digest,
        expires_at=timezone.now() + INVITATION_TTL,
    )
    log.info(
        "user %s invited %s to organisation %s as %s",
        invited_by.pk,
        f"user {invited_user.pk}" if invited_user is not None else "an e-mail address",
        organization.pk,
        role,
    )
    return invitation, invitation_url(token)


def invitation_check(*, token: str, user: Any) -> Invitation:
    """The invitation behind ``token`` if ``user`` may accept it now; else
    :class:`InvitationRefused` (404 unknown or forged, 410 accepted or expired, 403 for
    someone else)."""
    invitation = (
        Invitation.objects.select_related("organization", "invited_by")
        .filter(token_sha256=token_digest(token))
        .first()
    )
    if invitation is None:
        raise InvitationRefused("This invitation link is not valid.", status=404)
    if invitation.accepted_at is not None:
        raise InvitationRefused("This invitation was already accepted.", status=410)
    if invitation.expires_at <= timezone.now():
        raise InvitationRefused("This invitation has expired: ask for a new one.", status=410)
    if invitation.invited_user_id is not None:
        addressed = invitation.invited_user_id == user.pk
    else:
        addressed = bool(user.email) and user.email.strip().lower() == invitation.email.strip().lower()
    if not addressed or not user.is_active:
        raise InvitationRefused("This invitation is for someone else.", status=403)
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, user: Any) -> Membership:
    """Accept the invitation behind ``token`` as the signed-in ``user``: they become a member of
    its organisation with its role. Single use (a conditional update spends it)."""
    invitation = invitation_check(token=token, user=user)
    now = timezone.now()
    spent = Invitation.objects.filter(pk=invitation.pk, accepted_at__isnull=True, expires_at__gt=now).update(
        accepted_at=now, accepted_by=user
    )
    if not spent:
        raise InvitationRefused("This invitation was already accepted.", status=410)
    membership = membership_set(organization=invitation.organization, user=user, role=invitation.role)
    log.info(
        "user %s accepted the invitation %s to organisation %s as %s",
        user.pk,
        invitation.pk,
        invitation.organization_id,
        invitation.role,
    )
    return membership
