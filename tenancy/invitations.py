"""Joining an organisation takes the invitee's consent (#9 item 2).

An organisation admin (or a superuser) invites an existing user, or an e-mail address, with a
role (:func:`invitation_create`); the link goes to the invitee by e-mail when the deployment sends
mail, and is shown once to the inviter to pass on. The invitee opens it signed in and accepts
(:func:`invitation_accept`). Only then is the membership created. An admin who could add anyone
could otherwise make another organisation's approver a member of theirs and act on them there.

Someone invited by an address nobody signs in with yet gets an account without a password when
invited; following the link, they set their password through Django's own password-setting
machinery (a token bound to the account's password, which expires: ``PASSWORD_RESET_TIMEOUT``),
which also accepts the invitation and signs them in (``tenancy.views``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from fimone.errors import ServiceError
from fimone.onetime import LinkKind, LinkRefused, new_token
from tenancy.models import Invitation, Membership, Organization, Role
from tenancy.roles import membership_set

log = logging.getLogger(__name__)

INVITATION_TTL = dt.timedelta(days=7)


class InvitationRefused(LinkRefused):
    """The invitation cannot be accepted (``status``: the HTTP status the page answers with;
    ``addressee``: whom it is for, when the one who opened it is someone else)."""

    def __init__(self, message: str, *, status: int, addressee: str = "") -> None:
        super().__init__(message, status=status)
        self.addressee = addressee


INVITATION_LINKS = LinkKind(
    used_at="accepted_at",
    used_by="accepted_by",
    unknown="This invitation link is not valid.",
    used="This invitation was already accepted.",
    expired="This invitation has expired: ask for a new one.",
    refused=InvitationRefused,
)
"""Invitations as one-time links: how they are opened and spent (accepted), and refused."""


def public_base_url(request: Any = None) -> str:
    """The address links start with: ``SITE_URL``, or, in development without one, the address
    ``request`` came in on (so a link works on whatever host and port the server runs)."""
    if request is not None and settings.SITE_URL_FROM_REQUEST:
        return f"{request.scheme}://{request.get_host()}"
    return settings.SITE_URL


def invitation_url(token: str, *, base_url: str | None = None) -> str:
    return (base_url or settings.SITE_URL).rstrip("/") + reverse("invitation", args=[token])


LANDINGS = {
    Role.APPROVER: "approvals:inbox",
    Role.AUDITOR: "approvals:history",
    Role.OPERATOR: "admin:index",
    Role.ADMIN: "admin:index",
}
"""Where a new member of each role starts (a member chats: the portal's home)."""


def landing_url(role: str) -> str:
    """The page a person who just joined with ``role`` starts from."""
    return reverse(LANDINGS.get(role, "portal:home"))


def addressee_label(invitation: Invitation) -> str:
    """Whom the invitation is for, as its page names them."""
    if invitation.invited_user_id is not None:
        user = invitation.invited_user
        return user.get_full_name() or user.get_username()
    return invitation.email


def invitee_of(invitation: Invitation) -> Any:
    """The account the invitation is for (by e-mail: the active one with that address), if any."""
    if invitation.invited_user_id is not None:
        return invitation.invited_user
    return (
        get_user_model()
        .objects.filter(email__iexact=invitation.email.strip(), is_active=True)
        .order_by("pk")
        .first()
    )


def _username_for(email: str) -> str:
    """A free username made from the address's local part (``ana.lima``, ``ana.lima2``, …)."""
    users = get_user_model().objects
    base = re.sub(r"[^\w.@+-]", "", email.split("@", 1)[0])[:140] or "member"
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}{n}"
    return name


def _account_for(email: str) -> Any:
    """The account someone invited by ``email`` will use: theirs if one has that address, else a
    new one without a password (nobody can sign in to it until they set one from the link)."""
    users = get_user_model().objects
    existing = users.filter(email__iexact=email.strip()).order_by("pk").first()
    if existing is not None:
        return existing
    return users.create_user(username=_username_for(email), email=email.strip(), password=None)


def _send_link(*, invitation: Invitation, link: str, address: str) -> None:
    inviter = invitation.invited_by
    who = (inviter.get_full_name() or inviter.get_username()) if inviter is not None else "An administrator"
    role = invitation.get_role_display().lower()
    body = (
        f"{who} invites you to join {invitation.organization.name} on FIM One hooks as {role}.\n\n"
        f"Open this link to accept (it works until {invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n"
        f"{link}\n\nIf you did not expect this invitation, ignore this message."
    )
    try:
        send_mail(f"Join {invitation.organization.name} on FIM One hooks", body, None, [address])
    except Exception:  # the inviter still has the link to pass on
        log.exception("the invitation %s could not be sent by e-mail", invitation.pk)


def may_invite(*, user: Any, organization_id: int) -> bool:
    """Organisation admins (and superusers) invite, as only they grant roles."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(user=user, organization_id=organization_id, role=Role.ADMIN).exists()


class InvitationMade(NamedTuple):
    invitation: Invitation
    link: str
    """The link to pass on, shown once (only a digest of its token is stored)."""
    emailed_to: str
    """The address it is e-mailed to once committed; "" when the deployment sends no mail."""


@transaction.atomic
def invitation_create(
    *,
    organization: Organization,
    invited_by: Any,
    role: str,
    invited_user: Any = None,
    email: str = "",
    base_url: str | None = None,
) -> InvitationMade:
    """Invite ``invited_user`` (or whoever signs in with ``email``) to ``organization`` as
    ``role``: the link goes by e-mail to the invitee's address when the deployment sends mail.
    ``base_url``: the address links start with (:func:`public_base_url`).

    Nobody signs in with ``email`` yet: an account without a password is made for it, which the
    invitee completes by setting a password from the link."""
    if not may_invite(user=invited_by, organization_id=organization.pk):
        raise ServiceError("only an admin of the organisation may invite to it", code="permission_denied")
    if role not in Role.values:
        raise ServiceError(f"unknown role {role!r}", field="role")
    if (invited_user is None) == (not email):
        raise ServiceError("name the invited user or give their e-mail address, not both")
    if email:
        _account_for(email)
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
    link = invitation_url(token, base_url=base_url)
    address = email or getattr(invited_user, "email", "") or ""
    if not (settings.EMAIL_BACKEND and address):
        return InvitationMade(invitation, link, "")
    transaction.on_commit(lambda: _send_link(invitation=invitation, link=link, address=address))
    return InvitationMade(invitation, link, address)


def invitation_find(*, token: str) -> Invitation:
    """The open invitation behind ``token``; else :class:`InvitationRefused` (404 unknown or
    forged, 410 accepted or expired)."""
    return INVITATION_LINKS.open(
        Invitation.objects.select_related("organization", "invited_by", "invited_user"), token
    )


def invitation_check(*, token: str, user: Any) -> Invitation:
    """The invitation behind ``token`` if ``user`` may accept it now; else
    :class:`InvitationRefused` (404 unknown or forged, 410 accepted or expired, 403 for
    someone else, with whom it is for)."""
    invitation = invitation_find(token=token)
    if invitation.invited_user_id is not None:
        addressed = invitation.invited_user_id == user.pk
    else:
        addressed = bool(user.email) and user.email.strip().lower() == invitation.email.strip().lower()
    if not addressed or not user.is_active:
        raise InvitationRefused(
            "This invitation is for someone else.", status=403, addressee=addressee_label(invitation)
        )
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, user: Any) -> Membership:
    """Accept the invitation behind ``token`` as the signed-in ``user``: they become a member of
    its organisation with its role. Single use (a conditional update spends it)."""
    invitation = invitation_check(token=token, user=user)
    INVITATION_LINKS.spend(invitation, user=user)
    membership = membership_set(organization=invitation.organization, user=user, role=invitation.role)
    log.info(
        "user %s accepted the invitation %s to organisation %s as %s",
        user.pk,
        invitation.pk,
        invitation.organization_id,
        invitation.role,
    )
    return membership
