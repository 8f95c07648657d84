"""Who may do what in an organisation, read from memberships: the checks every app's services
call before they act (``check_*`` raises :class:`~fimone.errors.ServiceError`, ``not_found`` for
someone who may not even know the object is there)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from fimone.errors import ServiceError
from tenancy.models import Membership, Role


def check_member(*, user: Any, organization_id: int) -> None:
    if not Membership.objects.filter(user=user, organization_id=organization_id).exists():
        raise ServiceError("not found", code="not_found")


def member_roles(*, user: Any, organization_id: int) -> set[str]:
    """``user``'s roles in the organisation; empty for someone who is not a member."""
    return set(member_roles_query(user_id=user.pk, organization_id=organization_id))


def member_roles_query(*, user_id: int, organization_id: int) -> QuerySet[Any]:
    """The roles :func:`member_roles` reads (also read on the event loop: ``agents.run_start_on_loop``)."""
    return Membership.objects.filter(user_id=user_id, organization_id=organization_id).values_list(
        "role", flat=True
    )


def may_manage_runs_of(*, user: Any, organization_id: int) -> bool:
    """Operators and admins of an organisation (and superusers) may cancel its members' runs."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(
        user=user, organization_id=organization_id, role__in=[Role.OPERATOR, Role.ADMIN]
    ).exists()


def check_operator(*, user: Any, organization_id: int) -> None:
    """Operators and admins of the organisation, and superusers; others are told ``not_found``."""
    if not may_manage_runs_of(user=user, organization_id=organization_id):
        raise ServiceError("not found", code="not_found")


def check_organization_admin(*, user: Any, organization_id: int) -> None:
    """Admins of the organisation, and superusers; others are told ``not_found``."""
    if getattr(user, "is_superuser", False):
        return
    if not Membership.objects.filter(user=user, organization_id=organization_id, role=Role.ADMIN).exists():
        raise ServiceError("not found", code="not_found")
