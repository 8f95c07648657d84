"""Reads of single sign-on: the providers people may sign in with, and whose passwords are off."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from sso.models import IdentityProvider
from tenancy.models import Membership


def providers_for_sign_in() -> QuerySet[IdentityProvider]:
    """The enabled providers, for the sign-in pages' "Sign in with …" buttons."""
    return IdentityProvider.objects.filter(enabled=True, organization__archived_at__isnull=True).order_by(
        "name"
    )


def provider_enabled(*, slug: str) -> IdentityProvider | None:
    return providers_for_sign_in().select_related("organization").filter(slug=slug).first()


def password_closed_organization_ids(*, user: Any) -> set[int]:
    """The organisations ``user`` belongs to whose enabled provider turned passwords off."""
    mine = Membership.objects.filter(user=user).values("organization_id")
    return set(
        IdentityProvider.objects.filter(
            enabled=True, passwords_allowed=False, organization_id__in=mine
        ).values_list("organization_id", flat=True)
    )
