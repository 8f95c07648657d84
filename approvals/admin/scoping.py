"""Which records a staff user sees and manages in the approvals admin: those of their own
organisations (every one for a superuser), as ``agents.admin.scoping`` rules for the agents'.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpRequest

from agents.admin.scoping import ADMIN_VIEWER_ROLES
from tenancy import selectors as tenancy_selectors


def visible(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """``queryset`` (of rows with an ``organization``) narrowed to the organisations the staff user
    may view in the admin."""
    if request.user.is_superuser:
        return queryset
    return queryset.filter(
        organization_id__in=tenancy_selectors.organization_ids_of(user=request.user, roles=ADMIN_VIEWER_ROLES)
    )


def manages(request: HttpRequest, obj: Model | None) -> bool:
    """Whether the staff user manages ``obj``'s organisation (``True`` for a new object: its form
    offers only the organisations they manage)."""
    if obj is None or request.user.is_superuser:
        return True
    managed = tenancy_selectors.organization_ids_of(
        user=request.user, roles=tenancy_selectors.ORG_MANAGER_ROLES
    )
    return managed.filter(organization_id=obj.organization_id).exists()  # type: ignore[attr-defined]


def managed_only(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """``queryset`` narrowed to the organisations the staff user manages (the choices a policy's
    form offers, e.g. its channel configurations)."""
    managed = tenancy_selectors.organization_ids_of(
        user=request.user, roles=tenancy_selectors.ORG_MANAGER_ROLES
    )
    return queryset.filter(organization_id__in=managed)
