"""Joining an organisation takes the invitee's consent (#9 item 2): an organisation admin invites
in the admin, the invitee accepts while signed in, and only then is the membership created."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from agents.invitations import invitation_create
from agents.models import Invitation, Membership, Role
from agents.services import ServiceError
from tests import admin_kit
from tests.admin_kit import logged_in, page_text, url
from tests.personas import PASSWORD, make_user


def grant(user: Any, *codenames: str) -> None:
    admin_kit.grant(user, *codenames, app_label="agents")


def invite_in_admin(personas: Any, **fields: Any) -> str:
    """Adam (Acme's admin) invites through the admin; returns the path of the link shown once."""
    grant(personas.admin, "view_invitation", "add_invitation")
    data = {"organization": personas.org.pk, "invited_user": "", "email": "", "role": Role.APPROVER, **fields}
    response = logged_in(personas.admin).post(url(Invitation, "add"), data, follow=True)
    assert response.status_code == 200
    [link] = re.findall(r"https?://\S+/invitations/[A-Za-z0-9_\-]+/", page_text(response))
    return urlsplit(link).path


def csrf_of(response: Any) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.content.decode()).group(1)


def is_member(user: Any, personas: Any, role: str = Role.APPROVER) -> bool:
    return Membership.objects.filter(user=user, organization=personas.org, role=role).exists()


def test_an_invited_user_accepts_signed_in_and_only_then_becomes_a_member(personas) -> None:
    path = invite_in_admin(personas, invited_user=personas.stranger.pk)
    invitation = Invitation.objects.get()
    assert invitation.invited_by == personas.admin and invitation.accepted_at is None
    assert not is_member(personas.stranger, personas), "an invitation adds nobody"

    client = Client(enforce_csrf_checks=True)
    assert client.get(path)["Location"] == f"/approvals/login/?next={path}"
    login = client.get(f"/approvals/login/?next={path}")
    client.post(
        "/approvals/login/",
        {"username": "sam", "password": PASSWORD, "next": path, "csrfmiddlewaretoken": csrf_of(login)},
    )
    page = client.get(path)
    assert page.status_code == 200 and "Join <b>Acme</b> as approver?" in page.content.decode()
    assert not is_member(personas.stranger, personas), "a GET accepts nothing"
    assert client.post(path).status_code == 403, "a POST without the CSRF token accepts nothing"

    accepted = client.post(path, {"csrfmiddlewaretoken": csrf_of(page)})

    assert accepted.status_code == 302
    assert is_member(personas.stranger, personas)
    invitation.refresh_from_db()
    assert invitation.accepted_by == personas.stranger and invitation.accepted_at is not None


def test_an_invitation_by_email_is_accepted_by_the_user_with_that_address(personas) -> None:
    path = invite_in_admin(personas, email="SAM@example.test")
    client = Client()
    client.force_login(personas.stranger)

    assert client.post(path).status_code == 302
    assert is_member(personas.stranger, personas)


def test_it_refuses_an_invitation_accepted_by_someone_else(personas) -> None:
    path = invite_in_admin(personas, invited_user=personas.stranger.pk)
    intruder = make_user("ivan", personas.other_org)
    client = Client()
    client.force_login(intruder)

    assert client.get(path).status_code == 403
    response = client.post(path)

    assert response.status_code == 403 and "for someone else" in response.content.decode()
    assert not is_member(intruder, personas) and Invitation.objects.get().accepted_at is None


def test_it_refuses_an_invitation_twice_forged_or_expired(personas) -> None:
    path = invite_in_admin(personas, invited_user=personas.stranger.pk)
    client = Client()
    client.force_login(personas.stranger)
    assert client.post(path).status_code == 302

    assert client.post(path).status_code == 410
    assert client.post(path[:-3] + "zz/").status_code == 404
    later = invitation_create(
        organization=personas.org, invited_by=personas.admin, role=Role.ADMIN, invited_user=personas.stranger
    )[1]
    Invitation.objects.filter(role=Role.ADMIN).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert client.post(urlsplit(later).path).status_code == 410
    assert not is_member(personas.stranger, personas, Role.ADMIN)


def test_it_refuses_an_operator_inviting_to_their_organisation(personas) -> None:
    grant(personas.operator, "view_invitation", "add_invitation")
    client = logged_in(personas.operator)

    form = client.get(url(Invitation, "add")).context["adminform"].form
    response = client.post(
        url(Invitation, "add"),
        {"organization": personas.org.pk, "invited_user": personas.stranger.pk, "email": "", "role": "admin"},
    )

    assert list(form.fields["organization"].queryset) == []
    assert response.status_code == 200 and not Invitation.objects.exists()
    with pytest.raises(ServiceError):
        invitation_create(
            organization=personas.org,
            invited_by=personas.operator,
            role=Role.ADMIN,
            invited_user=personas.operator,
        )


def test_an_invitation_names_a_user_or_an_address_not_both(personas) -> None:
    grant(personas.admin, "view_invitation", "add_invitation")
    client = logged_in(personas.admin)
    base = {"organization": personas.org.pk, "role": "member"}

    neither = client.post(url(Invitation, "add"), {**base, "invited_user": "", "email": ""})
    both = client.post(
        url(Invitation, "add"), {**base, "invited_user": personas.stranger.pk, "email": "a@b.test"}
    )

    assert neither.status_code == 200 and both.status_code == 200
    assert not Invitation.objects.exists()


def test_an_organisation_admin_sees_only_their_organisations_invitations(personas) -> None:
    invitation_create(
        organization=personas.other_org, invited_by=make_superuser(), role=Role.MEMBER, email="x@example.test"
    )
    invite_in_admin(personas, email="y@example.test")

    listing = page_text(logged_in(personas.admin).get(url(Invitation, "changelist")))

    assert "y@example.test" in listing and "x@example.test" not in listing


def make_superuser() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root2", "root2@example.test", PASSWORD)
