"""Channel configurations: the ways an organisation reaches its approvers (a Feishu or Slack app,
a WeCom agent, e-mail; the web inbox needs none). An approver policy, an escalation tier and a
request name the one their cards go to. The providers that check and use a configuration are the
channel app's, found by kind (:mod:`approvals.channels`).

The table keeps the name it had when this model was part of the channel app
(``channels_im_channelconfig``): the move changed where it is declared, not the data.
"""

from __future__ import annotations

import secrets as pysecrets
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from agents.models import SecretsBoundQuerySet, SecretsBoundToAddress
from approvals.channels import channel_for, provider_class
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint
from tenancy.models import organisation_key


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

    organization = organisation_key(on_delete=models.CASCADE, related_name="channel_configs")
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
    history = HistoricalRecords(
        excluded_fields=["secrets", "callback_key"],
        bases=[SecretsFingerprint],
        table_name="channels_im_historicalchannelconfig",
    )

    objects = SecretsBoundQuerySet.as_manager()
    secrets_address_fields = frozenset({"kind", "settings_json"})

    class Meta:
        db_table = "channels_im_channelconfig"
        constraints = [
            models.UniqueConstraint(
                fields=["organization"], condition=models.Q(is_default=True), name="channelconfig_one_default"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def secrets_address(self) -> Any:
        """The kind and the origin of the URL the secrets are sent to: the one of the setting its
        provider names (:attr:`~approvals.channel_contract.Channel.secrets_address_setting`), or that
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


def channel_choice(*, help_text: str) -> models.ForeignKey[Any, Any]:
    """The optional channel a policy (or one of its escalation tiers) picks for its cards: empty
    falls back (the help text says to what); a configuration deleted leaves it empty."""
    return models.ForeignKey(
        ChannelConfig,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name="channel",
        help_text=help_text,
    )
