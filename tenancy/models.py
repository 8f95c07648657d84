"""Organisations, the roles their members hold, and invitations to join one.

Their tables keep the names they had when these models were part of the agents app
(``agents_organization``, …): the move changed where they are declared, not the data.

A user belongs to an organisation through one :class:`Membership` per :class:`Role`; an
:class:`Invitation` becomes a membership only when its invitee accepts it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords


class Organization(models.Model):
    name = models.CharField(max_length=200, unique=True)
    read_only = models.BooleanField(
        default=False, help_text="When set, agents of this organisation may not run write actions."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived organisations keep their history; their agents cannot run."
    )
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    history = HistoricalRecords(table_name="agents_historicalorganization")

    class Meta:
        db_table = "agents_organization"
        # The product writes "organisation"; Django would derive the US spelling from the class.
        verbose_name = "organisation"
        verbose_name_plural = "organisations"

    def __str__(self) -> str:
        return self.name

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


def organisation_key(*, on_delete: Any, related_name: str) -> models.ForeignKey[Any, Any]:
    """The foreign key every organisation-owned model holds to its organisation (the product's
    spelling in forms and the admin: "organisation"). ``PROTECT`` for records, which outlive
    nothing they name; ``CASCADE`` for configuration, which goes with its organisation."""
    return models.ForeignKey(
        Organization, on_delete=on_delete, related_name=related_name, verbose_name="organisation"
    )


class Role(models.TextChoices):
    MEMBER = "member", "Member"
    OPERATOR = "operator", "Operator"
    APPROVER = "approver", "Approver"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Admin"


class Membership(models.Model):
    organization = organisation_key(on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    manager = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text='Who this person reports to: an approval stage can ask "the requester\'s manager". '
        "Set on any of the person's roles in the organisation.",
    )

    class Meta:
        db_table = "agents_membership"
        constraints = [
            models.UniqueConstraint(fields=["organization", "user", "role"], name="membership_unique_role")
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.role} of {self.organization}"


class Invitation(models.Model):
    """An offer, made by an organisation admin, for an existing user (named, or by e-mail address)
    to join the organisation with a role. Only when the invitee accepts it, signed in, is the
    :class:`Membership` created: nobody is added to an organisation without their consent.
    Only a SHA-256 of the invitation's token is stored; the link is shown once, to the inviter."""

    organization = organisation_key(on_delete=models.CASCADE, related_name="invitations")
    invited_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="invitations",
        help_text="The user invited; or leave empty and give their e-mail address.",
    )
    email = models.EmailField(blank=True, help_text="Accepted by the signed-in user with this address.")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(editable=False)
    accepted_at = models.DateTimeField(null=True, blank=True, editable=False)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        db_table = "agents_invitation"

    def __str__(self) -> str:
        invitee = self.invited_user or self.email
        return f"{invitee} invited to {self.organization} as {self.role}"

    def clean(self) -> None:
        if self.invited_user_id is None and not self.email:
            raise ValidationError("name the invited user or give their e-mail address")
        if self.invited_user_id is not None and self.email:
            raise ValidationError("name the invited user or give an e-mail address, not both")
