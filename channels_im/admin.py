"""The admin of channel configurations and IM identities.

Channel secrets are write-only: the form never renders them, a blank field keeps the stored value,
and no page (change, view-only, error) ever shows one. The callback URL to paste into the
platform's console is shown read-only. A configuration that carried approval cards cannot be
deleted (its requests are history): deactivate it instead. "Send a test card" asks the channel's
provider to post a harmless message and reports what happened. A staff user who is not a
superuser sees only the configurations of the organisations they operate or administer, and those
organisations' IM identities, which they may unlink but not link (see :class:`ImIdentityAdmin`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from agents.admin.bound_secrets import SecretsClearedMessageMixin, SecretsEntryFormMixin
from agents.admin.scoping import ADMIN_VIEWER_ROLES, OrganizationScopedFieldsMixin
from approvals.channel_contract import DeliveryError
from approvals.channels import channel_for
from approvals.models import ChannelConfig, ConfirmationRequest
from channels_im.models import ImIdentity
from fimone.forms import WriteOnlySecretsForm, secrets_state
from fimone.history import ConfigHistoryAdmin
from tenancy import selectors as tenancy_selectors
from tenancy.models import Membership

log = logging.getLogger(__name__)


def _managed_organization_ids(request: HttpRequest) -> QuerySet[Membership]:
    return tenancy_selectors.organization_ids_of(user=request.user, roles=tenancy_selectors.ORG_MANAGER_ROLES)


def _visible_organization_ids(request: HttpRequest) -> QuerySet[Membership]:
    return tenancy_selectors.organization_ids_of(user=request.user, roles=ADMIN_VIEWER_ROLES)


def _manages(request: HttpRequest, obj: ChannelConfig | ImIdentity | None) -> bool:
    """Changes only in the organisations the staff user operates or administers (auditors and
    operators of another organisation read only)."""
    if obj is None or request.user.is_superuser:
        return True
    return _managed_organization_ids(request).filter(organization_id=obj.organization_id).exists()


def callback_url(config: ChannelConfig) -> str:
    """The absolute URL the platform posts clicks to."""
    return settings.SITE_URL + reverse("im-callback", args=[config.callback_key])


class ChannelConfigAdminForm(SecretsEntryFormMixin, WriteOnlySecretsForm):
    secrets_address = "Feishu domain, Slack api_url, WeCom api_base: the provider's default if unset"
    secrets_example = (
        'Slack {"bot_token": "xoxb-…", "signing_secret": "…"}, Feishu {"app_id": "cli_…", '
        '"app_secret": "…", "verification_token": "…", "encrypt_key": "…"}, WeCom {"secret": "…", '
        '"token": "<callback Token>", "encoding_aes_key": "<callback EncodingAESKey, 43 characters>"} '
        '(WeCom settings: {"corp_id": "ww…", "agent_id": 1000002, "touser": "userid1|userid2"})'
    )

    class Meta:
        model = ChannelConfig
        fields = ("organization", "kind", "name", "active", "is_default", "secrets", "settings_json")

    def clean_secrets(self) -> dict[str, Any] | None:
        return self._note_secrets_entered(super().clean_secrets())


@admin.register(ChannelConfig)
class ChannelConfigAdmin(SecretsClearedMessageMixin, OrganizationScopedFieldsMixin, ConfigHistoryAdmin):
    form = ChannelConfigAdminForm
    list_display = ("name", "organization", "kind", "active", "is_default", "created_at")
    list_select_related = ("organization",)
    list_filter = ("kind", "active")
    search_fields = ("name", "organization__name")
    readonly_fields = ("callback", "secrets_state")
    actions = ("send_test_card",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChannelConfig]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(organization_id__in=_visible_organization_ids(request))

    def get_fields(self, request: HttpRequest, obj: ChannelConfig | None = None) -> list[str]:
        fields = ["organization", "kind", "name", "active", "is_default", "callback", "secrets_state"]
        if obj is None or self.has_change_permission(request, obj):
            # A view-only page renders every field as its value: the secrets stay off it.
            fields.append("secrets")
        return [*fields, "settings_json"]

    def has_delete_permission(self, request: HttpRequest, obj: ChannelConfig | None = None) -> bool:
        """No delete button for a configuration that carried approval cards (deactivate it instead):
        its requests point at it. The bulk action still exists for unused ones; one with history
        selected there gets Django's "protected" page."""
        if obj is not None and ConfirmationRequest.objects.filter(channel_config=obj).exists():
            return False
        return super().has_delete_permission(request, obj) and _manages(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: ChannelConfig | None = None) -> bool:
        return super().has_change_permission(request, obj) and _manages(request, obj)

    @admin.display(description="callback URL")
    def callback(self, obj: ChannelConfig) -> str:
        return callback_url(obj) if obj.pk else "— (shown once saved)"

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: ChannelConfig) -> str:
        return secrets_state(obj.secrets) if obj.pk else "none"

    @admin.action(description="Send a test card", permissions=["change"])
    def send_test_card(self, request: HttpRequest, queryset: QuerySet[ChannelConfig]) -> None:
        for config in queryset.select_related("organization").order_by("pk"):
            try:
                ref = channel_for(config).send_test_card()
            except (DeliveryError, LookupError) as exc:
                self.message_user(request, f"Test card to {config} failed: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"Test card sent to {config} (message {ref}).", messages.SUCCESS)


@admin.register(ImIdentity)
class ImIdentityAdmin(OrganizationScopedFieldsMixin, admin.ModelAdmin):
    """Linking an identity decides whose clicks count as whose, so only the person themselves
    (the link flow, :mod:`channels_im.identities`) or a superuser links one. Other staff users
    see the identities of the organisations they operate or administer and may unlink them
    (delete), but never create one or change its user or external id."""

    list_display = (
        "external_id",
        "provider",
        "user",
        "organization",
        "display_name",
        "linked_by",
        "linked_at",
    )
    list_select_related = ("user", "organization", "linked_by")
    list_filter = ("provider",)
    search_fields = ("external_id", "display_name", "user__username", "user__email")
    fields = ("organization", "user", "provider", "external_id", "display_name", "linked_by", "linked_at")
    readonly_fields = ("linked_by", "linked_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ImIdentity]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(organization_id__in=_visible_organization_ids(request))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: ImIdentity | None = None) -> bool:
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: ImIdentity | None = None) -> bool:
        return super().has_delete_permission(request, obj) and _manages(request, obj)

    def save_model(self, request: HttpRequest, obj: ImIdentity, form: Any, change: bool) -> None:
        if not change or {"user", "external_id", "provider", "organization"} & set(form.changed_data):
            obj.linked_by, obj.linked_at = request.user, timezone.now()
            log.info(
                "IM identity linked by superuser %s: %s:%s -> user %s in organisation %s",
                request.user.pk,
                obj.provider,
                obj.external_id,
                obj.user_id,
                obj.organization_id,
            )
        super().save_model(request, obj, form, change)
