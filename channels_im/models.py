"""Channel configurations (per organisation) and IM identities (who a clicker is)."""

from __future__ import annotations

import secrets as pysecrets
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from agents.models import Membership, Organization, SecretsBoundQuerySet, SecretsBoundToAddress
from channels_im.providers import channel_for, provider_class
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint


def new_callback_key() -> str:
    return pysecrets.token_urlsafe(24)


class ChannelKind(models.TextChoices):
    WEB = "web", "Web inbox"
    FEISHU = "feishu", "Feishu / Lark"
    SLACK = "slack", "Slack"
    WECOM = "wecom", "WeCom (企业微信)"
    EMAIL = "email", "E-mail"


class ChannelConfig(SecretsBoundToAddress, models.Model):
    """One way to reach approvers. Secrets (app secret, encrypt key, bot token, signing secret)
    are encrypted at rest and never shown back, and bound to the provider's address they were
    entered for (Feishu ``domain``, Slack ``api_url``, WeCom ``api_base``; their scheme, host and
    port): changing it clears them unless they are entered again (``SecretsBoundToAddress``)."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="channel_configs", verbose_name="organisation"
    )
    kind = models.CharField(max_length=12, choices=ChannelKind.choices)
    name = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    is_default = models.BooleanField(default=False, help_text="The organisation's default approval channel.")
    secrets = EncryptedJSONField(null=True, blank=True)
    settings_json = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "Provider settings: Feishu chat_id / domain, Slack channel / api_url, "
            "WeCom corp_id / agent_id / touser (or toparty, totag) / api_base."
        ),
    )
    callback_key = models.CharField(
        max_length=64,
        unique=True,
        default=new_callback_key,
        editable=False,
        help_text="Part of the callback URL.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Configuration history; the secrets (and the callback URL's key) are never copied into it.
    history = HistoricalRecords(excluded_fields=["secrets", "callback_key"], bases=[SecretsFingerprint])

    objects = SecretsBoundQuerySet.as_manager()
    secrets_address_fields = frozenset({"kind", "settings_json"})

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization"], condition=models.Q(is_default=True), name="channelconfig_one_default"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def secrets_address(self) -> Any:
        """The kind and the origin of the URL the secrets are sent to: the one of the setting its
        provider names (:attr:`~channels_im.base.Channel.secrets_address_setting`), or that
        provider's default. Only the kinds listed in :class:`ChannelKind` are looked up: the
        stored value may be anything, and it names the module a provider is loaded from."""
        setting, default = (
            provider_class(self.kind).secrets_address_setting
            if self.kind in ChannelKind.values
            else ("", None)
        )
        options = self.settings_json if isinstance(self.settings_json, dict) else {}
        return (self.kind, url_origin(options.get(setting) or default))

    def clean(self) -> None:
        """Refuse a configuration its provider could not use (missing keys, a non-https URL)."""
        if self.secrets is not None and not isinstance(self.secrets, dict):
            raise ValidationError({"secrets": "must be a JSON object"})
        if self.kind not in ChannelKind.values:
            return  # the kind field reports it (an empty or unknown kind has no provider to ask)
        try:
            channel_for(self).check_config()
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class ImIdentity(models.Model):
    """Maps a platform user id (Feishu open_id, Slack user id, WeCom userid) to a user of ours, within one
    organisation: a click counts only through an identity of the organisation of the channel it
    came through (docs/design.md §1.11). Only the person themselves (the link flow, :class:`ImLinkOffer`)
    or a superuser links an identity; organisation staff may only view and unlink."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="im_identities", verbose_name="organisation"
    )
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
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="+", verbose_name="organisation"
    )
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
