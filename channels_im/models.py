"""IM identities (who a clicker is), link offers and replay keys; the channel configurations they
belong to are the approvals app's (:class:`approvals.models.ChannelConfig`)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from approvals.models import ChannelConfig, ChannelKind
from approvals.models import new_callback_key as new_callback_key  # named by its migrations
from tenancy.models import Membership, organisation_key


class ImIdentity(models.Model):
    """Maps a platform user id (Feishu open_id, Slack user id, WeCom userid) to a user of ours, within one
    organisation: a click counts only through an identity of the organisation of the channel it
    came through (docs/design.md §1.11). Only the person themselves (the link flow, :class:`ImLinkOffer`)
    or a superuser links an identity; organisation staff may only view and unlink."""

    organization = organisation_key(on_delete=models.CASCADE, related_name="im_identities")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="im_identities")
    provider = models.CharField(max_length=12, choices=ChannelKind.choices)
    external_id = models.CharField(max_length=200)
    display_name = models.CharField(max_length=200, blank=True)
    linked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who linked it: the person themselves, or a superuser.",
    )
    linked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "IM identity"
        verbose_name_plural = "IM identities"
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "provider", "external_id"], name="imidentity_unique_external"
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.external_id} → {self.user}"

    def clean(self) -> None:
        if (
            self.organization_id is not None
            and self.user_id is not None
            and not Membership.objects.filter(
                organization_id=self.organization_id, user_id=self.user_id
            ).exists()
        ):
            raise ValidationError({"user": "link identities only to members of the organisation"})


class ImLinkOffer(models.Model):
    """A one-time offer, made to a verified clicker nobody is linked to, to link their IM user id
    to the account of whoever confirms it signed in (and is a member of the organisation).

    Only a SHA-256 of the token is stored; the token itself is shown once, to the clicker only.
    An offer is single use (``used_at``) and short-lived (``expires_at``); at most one unused offer
    per clicker and channel exists (a new click replaces it)."""

    token_sha256 = models.CharField(max_length=64, unique=True)
    organization = organisation_key(on_delete=models.CASCADE, related_name="+")
    channel_config = models.ForeignKey(ChannelConfig, on_delete=models.CASCADE, related_name="link_offers")
    provider = models.CharField(max_length=12, choices=ChannelKind.choices)
    external_id = models.CharField(max_length=200)
    display_name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["channel_config", "external_id"],
                condition=models.Q(used_at__isnull=True),
                name="imlinkoffer_one_open_per_clicker",
            )
        ]

    def __str__(self) -> str:
        return f"link offer for {self.provider}:{self.external_id}"


class ReplayKey(models.Model):
    """A callback already handled, remembered without Redis (``channels_im.replay``).

    ``key`` is the SHA-256 of the caller's key, so the sender's text never lands in the table.
    The row counts until ``expires_at``; after it the same key is new again, and expired rows are
    purged in bulk now and then.
    """

    key = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key[:12]}… until {self.expires_at:%Y-%m-%d %H:%M:%S}"
