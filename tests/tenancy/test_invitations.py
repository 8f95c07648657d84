"""Joining an organisation takes the invitee's consent (#9 item 2): an organisation admin invites
in the admin, the invitee accepts while signed in, and only then is the membership created."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from fimone.errors import ServiceError
from tenancy.invitations import invitation_create
from tenancy.models import Invitation, Membership, Role
from tests import admin_kit
from tests.admin_kit import logged_in, page_text, url
from tests.personas import PASSWORD, make_user


def grant(user: Any, *codenames: str) -> None:
    admin_kit.grant(user, *codenames, app_label=("agents", "tenancy"))


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
    path = invite_in_admin(personas, invited_user=personas.stranger.username)
    invitation = Invitation.objects.get()
    assert invitation.invited_by == personas.admin and invitation.accepted_at is None
    assert not is_member(personas.stranger, personas), "an invitation adds nobody"

    client = Client(enforce_csrf_checks=True)
    signed_out = client.get(path)
    assert signed_out.status_code == 200 and f'href="/approvals/login/?next={path}"' in page_text(signed_out)
    assert "Sign in to accept" in page_text(signed_out)
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
    path = invite_in_admin(personas, invited_user=personas.stranger.username)
    intruder = make_user("ivan", personas.other_org)
    client = Client()
    client.force_login(intruder)

    assert client.get(path).status_code == 403
    response = client.post(path)

    text = page_text(response)
    assert response.status_code == 403
    assert "This invitation is for <b>sam</b>; you are signed in as <b>ivan</b>." in text
    assert "Sign out to accept it" in text and "Go to the inbox" not in text
    assert not is_member(intruder, personas) and Invitation.objects.get().accepted_at is None


def test_it_refuses_an_invitation_twice_forged_or_expired(personas) -> None:
    path = invite_in_admin(personas, invited_user=personas.stranger.username)
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
        {
            "organization": personas.org.pk,
            "invited_user": personas.stranger.username,
            "email": "",
            "role": "admin",
        },
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
        url(Invitation, "add"), {**base, "invited_user": personas.stranger.username, "email": "a@b.test"}
    )

    assert neither.status_code == 200 and both.status_code == 200
    assert not Invitation.objects.exists()


def test_the_form_names_the_invitee_by_username_and_chooses_the_admins_one_organisation(personas) -> None:
    grant(personas.admin, "view_invitation", "add_invitation")
    client = logged_in(personas.admin)

    form = client.get(url(Invitation, "add")).context["adminform"].form
    unknown = client.post(
        url(Invitation, "add"),
        {"organization": personas.org.pk, "invited_user": "nobody-here", "role": "member"},
    )
    made = client.post(
        url(Invitation, "add"),
        {
            "organization": personas.org.pk,
            "invited_user": personas.stranger.username.upper(),
            "role": "member",
        },
        follow=True,
    )

    assert form.initial["organization"] == personas.org.pk, "an admin of one organisation invites to it"
    assert "No account is named “nobody-here”" in page_text(unknown) and unknown.status_code == 200
    assert Invitation.objects.get().invited_user == personas.stranger
    # The link is shown once, in a box of its own with a button that copies it.
    text = made.content.decode()
    assert '<code id="invitation-link">http' in text and 'data-copy="invitation-link"' in text
    assert "portal/copy.js" in text


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


# --- onboarding: links that work, e-mail, a first password (issue 23, "Organisation admin") -------


def test_in_development_the_link_follows_the_address_the_admin_came_in_on(personas, settings) -> None:
    grant(personas.admin, "view_invitation", "add_invitation")
    settings.SITE_URL_FROM_REQUEST = True
    data = {
        "organization": personas.org.pk,
        "invited_user": personas.stranger.username,
        "email": "",
        "role": "member",
    }

    response = logged_in(personas.admin).post(
        url(Invitation, "add"), data, follow=True, HTTP_HOST="localhost:8123"
    )

    assert "http://localhost:8123/invitations/" in page_text(response)


def test_with_a_site_url_the_link_uses_it_whatever_the_request_says(personas, settings) -> None:
    grant(personas.admin, "view_invitation", "add_invitation")
    settings.SITE_URL_FROM_REQUEST, settings.SITE_URL = False, "https://fimone.example.com"
    data = {
        "organization": personas.org.pk,
        "invited_user": personas.stranger.username,
        "email": "",
        "role": "member",
    }

    text = page_text(
        logged_in(personas.admin).post(url(Invitation, "add"), data, follow=True, HTTP_HOST="localhost")
    )

    assert "https://fimone.example.com/invitations/" in text and "localhost/invitations" not in text


def test_production_refuses_to_start_without_a_site_url() -> None:
    from tests.fimone.test_settings import start_django

    proc = start_django(FIMONE_ENV="production", SECRET_KEY="x" * 50, ALLOWED_HOSTS="fimone.example.com")

    assert proc.returncode != 0 and "SITE_URL is required when FIMONE_ENV=production" in proc.stderr


def test_a_brand_new_invitee_gets_the_link_by_mail_sets_a_password_and_lands_in_the_inbox(
    personas, mailoutbox, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        path = invite_in_admin(personas, email="nina.ortiz@example.test", role=Role.APPROVER)
    [mail] = mailoutbox
    assert mail.to == ["nina.ortiz@example.test"] and path in mail.body and "Acme" in mail.subject
    nina = get_user_model().objects.get(email="nina.ortiz@example.test")
    assert nina.username == "nina.ortiz" and not nina.has_usable_password()
    assert not is_member(nina, personas), "an invitation adds nobody"

    client = Client(enforce_csrf_checks=True)
    to_password = client.get(path)
    assert to_password.status_code == 302 and "/password/" in to_password["Location"]
    form_page = client.get(to_password["Location"], follow=True)
    text = page_text(form_page)
    assert "Welcome to Acme" in text and 'id="invitee-username">nina.ortiz<' in text
    weak = client.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": "password", "new_password2": "password", "csrfmiddlewaretoken": csrf_of(form_page)},
    )
    assert weak.status_code == 200 and "too common" in page_text(weak)
    done = client.post(
        form_page.redirect_chain[-1][0],
        {
            "new_password1": "tall-Otter-42",
            "new_password2": "tall-Otter-42",
            "csrfmiddlewaretoken": csrf_of(weak),
        },
    )

    assert done.status_code == 302 and done["Location"] == "/approvals/"
    assert is_member(nina, personas, Role.APPROVER)
    assert int(client.session["_auth_user_id"]) == nina.pk, "signed in"
    nina.refresh_from_db()
    assert nina.check_password("tall-Otter-42")


def test_the_password_link_works_once_and_not_for_someone_with_a_password(personas) -> None:
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    path = invite_in_admin(personas, email="omar@example.test", role=Role.MEMBER)
    sam = urlsafe_base64_encode(force_bytes(personas.stranger.pk))
    token = path.strip("/").split("/")[-1]
    forged = Client().get(
        f"/invitations/{token}/password/{sam}/{default_token_generator.make_token(personas.stranger)}/",
        follow=True,
    )
    client = Client()
    link = client.get(path)["Location"]
    first = client.get(link, follow=True)
    client.post(
        first.redirect_chain[-1][0], {"new_password1": "tall-Otter-42", "new_password2": "tall-Otter-42"}
    )
    again = Client().get(path)
    replayed = Client().get(link, follow=True)

    assert "expired or was already used" in page_text(forged)
    assert again.status_code == 410, "accepted: the invitation is spent"
    assert replayed.status_code == 410
    personas.stranger.refresh_from_db()
    assert personas.stranger.check_password(PASSWORD), "nobody else's password is set from it"


def test_an_expired_password_link_says_so(personas, settings) -> None:
    from django.contrib.auth.tokens import PasswordResetTokenGenerator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    path = invite_in_admin(personas, email="pia@example.test", role=Role.MEMBER)
    pia = get_user_model().objects.get(email="pia@example.test")

    class LongAgo(PasswordResetTokenGenerator):
        def _now(self) -> dt.datetime:
            return dt.datetime.now() - dt.timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT * 2)

    uid = urlsafe_base64_encode(force_bytes(pia.pk))
    token = path.strip("/").split("/")[-1]
    page = Client().get(f"/invitations/{token}/password/{uid}/{LongAgo().make_token(pia)}/", follow=True)

    assert "This link to set your password has expired or was already used." in page_text(page)
    pia.refresh_from_db()
    assert not pia.has_usable_password()


@pytest.mark.parametrize(
    ("role", "lands"),
    [(Role.MEMBER, "/"), (Role.AUDITOR, "/approvals/history/"), (Role.OPERATOR, "/admin/")],
)
def test_each_role_lands_where_it_belongs_after_accepting(personas, role, lands) -> None:
    path = invite_in_admin(personas, invited_user=personas.stranger.username, role=role)
    client = Client()
    client.force_login(personas.stranger)

    assert client.post(path)["Location"] == lands
