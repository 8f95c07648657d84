"""Demo data for ``make run``: an organisation with a user per role and a superuser."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from agents.models import Membership, Organization, Role

DEMO_PASSWORD = "demo-pass-2026"  # noqa: S105 - published demo credentials, README lists them
DEMO_USERS: list[tuple[str, str | None]] = [
    ("admin", None),  # the superuser
    ("alice", Role.MEMBER),
    ("oscar", Role.OPERATOR),
    ("april", Role.APPROVER),
    ("aude", Role.AUDITOR),
    ("adam", Role.ADMIN),
]


@transaction.atomic
def demo_setup(*, base_url: str | None = None) -> dict[str, Any]:
    User = get_user_model()
    org, _ = Organization.objects.get_or_create(name="Acme Procurement (demo)")
    users = []
    for username, role in DEMO_USERS:
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@demo.test"})
        user.set_password(DEMO_PASSWORD)
        user.is_staff = role in (None, Role.OPERATOR, Role.ADMIN, Role.AUDITOR)
        user.is_superuser = role is None
        user.save()
        if role is not None:
            Membership.objects.get_or_create(organization=org, user=user, role=role)
        users.append((username, "superuser" if role is None else str(role.label)))
    _ = base_url or settings.SITE_URL
    return {"organization": org.name, "users": users}
