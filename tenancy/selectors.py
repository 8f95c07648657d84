"""Reads of organisations and memberships."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from tenancy.models import Membership, Organization, Role

ORG_MANAGER_ROLES = (Role.OPERATOR, Role.ADMIN)
"""Roles whose staff users manage their organisation's objects in the admin."""


def organization_ids_of(*, user: Any, roles: tuple[str, ...] | None = None) -> QuerySet[Membership]:
    """A subquery of the ids of the organisations ``user`` belongs to (with one of ``roles``, if given)."""
    memberships = Membership.objects.filter(user=user)
    if roles is not None:
        memberships = memberships.filter(role__in=roles)
    return memberships.values("organization_id")


def organizations_managed_by(*, user: Any) -> QuerySet[Organization]:
    """The organisations where ``user`` is an operator or an admin."""
    return Organization.objects.filter(pk__in=organization_ids_of(user=user, roles=ORG_MANAGER_ROLES))
