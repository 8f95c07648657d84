"""The admin of single sign-on: an organisation's identity providers (its admins configure them;
the client secret is write-only) and the sign-in record (read only, under Audit)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agents.admin.scoping import ADMIN_VIEWER_ROLES
from fimone.admin_errors import PlainErrorsAdminMixin
from fimone.history import ConfigHistoryAdmin
from sso.discovery import ProviderUnavailable, metadata_of
from sso.models import IdentityProvider, SignInRecord
from tenancy import selectors as tenancy_selectors
from tenancy.invitations import public_base_url
from tenancy.models import Organization, Role

ADMIN_ROLES = (Role.ADMIN,)


def _administered(request: HttpRequest) -> QuerySet[Any]:
    return tenancy_selectors.organization_ids_of(user=request.user, roles=ADMIN_ROLES)


def _visible(request: HttpRequest) -> QuerySet[Any]:
    return tenancy_selectors.organization_ids_of(user=request.user, roles=ADMIN_VIEWER_ROLES)


class IdentityProviderForm(forms.ModelForm):
    client_secret = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Write-only: stored encrypted and never shown again. Leave empty to keep the stored one.",
    )

    class Meta:
        model = IdentityProvider
        fields = (
            "organization",
            "name",
            "slug",
            "issuer",
            "client_id",
            "scopes",
            "groups_claim",
            "group_roles",
            "allowed_domains",
            "passwords_allowed",
            "enabled",
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.cleaned_data.get("client_secret"):
            return data
        if not (self.instance.pk and self.instance.client_secret):
            self.add_error("client_secret", "The provider's client secret is needed.")
        elif "issuer" in self.changed_data:
            # The secret is bound to the provider it was entered for (docs/design.md §1.14): a new issuer
            # (whose token endpoint would receive it) takes it entered again.
            self.add_error("client_secret", "The issuer changed: enter the client secret again.")
        return data

    def save(self, commit: bool = True) -> IdentityProvider:
        provider = super().save(commit=False)
        if self.cleaned_data.get("client_secret"):
            provider.secrets = {"client_secret": self.cleaned_data["client_secret"]}
        if commit:
            provider.save()
        return provider


@admin.register(IdentityProvider)
class IdentityProviderAdmin(PlainErrorsAdminMixin, ConfigHistoryAdmin):
    form = IdentityProviderForm
    list_display = ("name", "organization", "issuer", "enabled", "passwords_allowed")
    list_select_related = ("organization",)
    list_filter = ("enabled", "passwords_allowed")
    search_fields = ("name", "slug", "issuer", "organization__name")
    readonly_fields = ("redirect_uri", "secret_state")
    actions = ("check_provider",)

    def get_fieldsets(self, request: HttpRequest, obj: IdentityProvider | None = None) -> Any:
        provider = ["organization", "name", "slug", "issuer", "client_id", "redirect_uri", "secret_state"]
        if obj is None or self.has_change_permission(request, obj):
            provider.append("client_secret")  # a view-only page shows no secret field at all
        return (
            (None, {"fields": provider}),
            (
                "Who signs in, with which roles",
                {"fields": ("scopes", "groups_claim", "group_roles", "allowed_domains")},
            ),
            ("Sign-in", {"fields": ("passwords_allowed", "enabled")}),
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[IdentityProvider]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(organization_id__in=_visible(request))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "organization" and not request.user.is_superuser:
            kwargs["queryset"] = Organization.objects.filter(pk__in=_administered(request))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def _administers(self, request: HttpRequest, obj: IdentityProvider | None) -> bool:
        if request.user.is_superuser:
            return True
        if obj is None:
            return _administered(request).exists()
        return (
            not obj.from_environment
            and _administered(request).filter(organization_id=obj.organization_id).exists()
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and self._administers(request, None)

    def has_change_permission(self, request: HttpRequest, obj: IdentityProvider | None = None) -> bool:
        return super().has_change_permission(request, obj) and self._administers(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: IdentityProvider | None = None) -> bool:
        return super().has_delete_permission(request, obj) and self._administers(request, obj)

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        # The redirect URI starts where the server is reached (public_base_url): in development
        # without SITE_URL, the address this page came in on, on whatever host and port.
        context["adminform"].form.instance.base_url = public_base_url(request)
        return super().render_change_form(request, context, *args, **kwargs)

    @admin.display(description="redirect URI")
    def redirect_uri(self, obj: IdentityProvider) -> str:
        """What to register at the provider (the same for every provider), from the address the
        page was opened on (:meth:`render_change_form`), else ``SITE_URL``."""
        return getattr(obj, "base_url", settings.SITE_URL).rstrip("/") + reverse("sso:callback")

    @admin.display(description="stored client secret")
    def secret_state(self, obj: IdentityProvider) -> str:
        return "set" if obj.pk and obj.client_secret else "none"

    @admin.action(description="Check the provider (discovery document and keys)", permissions=["view"])
    def check_provider(self, request: HttpRequest, queryset: QuerySet[IdentityProvider]) -> None:
        for provider in queryset.order_by("name"):
            try:
                metadata = metadata_of(provider.issuer, fresh=True)
            except ProviderUnavailable as exc:
                self.message_user(request, f"{provider}: {exc}", messages.ERROR)
                continue
            logout = "offers sign-out" if metadata.end_session_endpoint else "no sign-out endpoint"
            self.message_user(
                request,
                format_html(
                    "{}: reachable; signs ID tokens with {}; {}.", provider, metadata.algorithm, logout
                ),
                messages.SUCCESS,
            )


@admin.register(SignInRecord)
class SignInRecordAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "who", "role", "detail", "provider")
    list_select_related = ("organization", "provider", "user")
    list_filter = ("kind",)
    search_fields = ("email", "subject", "user__username", "detail")
    date_hierarchy = "created_at"

    @admin.display(description="who", ordering="email")
    def who(self, obj: SignInRecord) -> str:
        return str(obj.user or obj.email or obj.subject or "—")

    def get_queryset(self, request: HttpRequest) -> QuerySet[SignInRecord]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(organization_id__in=_visible(request))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: SignInRecord | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: SignInRecord | None = None) -> bool:
        return False
