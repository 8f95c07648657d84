"""What the provider's groups decide holds where it matters: a decision made in a session that
predates a role removal is refused; passwords are off where the organisation says so, except its
admins' break-glass way in; signing out offers the provider's sign-out too."""

from __future__ import annotations

import html
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from approvals.models import ConfirmationEvent, ConfirmationStatus
from sso.models import ExternalIdentity, SignInRecord
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.oidc_provider.kit import Provider
from tests.personas import PASSWORD as LOCAL_PASSWORD
from tests.sso.kit import CLIENT_ID, PASSWORD, browser, configure, sign_in

Kind = SignInRecord.Kind


@pytest.mark.django_db(transaction=True)
def test_a_decision_from_a_session_older_than_a_role_removal_is_refused(
    personas, idp: Provider, sso_settings, resumes
) -> None:
    configure(personas.org, idp)
    idp.set_user("rita", PASSWORD, "rita@acme.test", ["fim-approvers"])
    old_session = browser()
    sign_in(idp, old_session, "rita")
    rita = ExternalIdentity.objects.get().user
    set_policy(personas)
    request = suspended_run(personas, Harness(pay_tool()))[1]
    assert request.approvers.filter(pk=rita.pk).exists()  # an approver when it opened

    idp.set_user("rita", PASSWORD, "rita@acme.test", [])  # HR took her out of the group
    sign_in(idp, browser(), "rita")  # she signed in elsewhere since: demoted
    response = old_session.client.post(
        f"/approvals/{request.pk}/decide/", {"decision": "approve"}, follow=True
    )

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by is None
    assert resumes.run_ids == []
    refused = request.events.get(kind=ConfirmationEvent.Kind.CLICK_REFUSED)
    assert (
        refused.actor == rita
        and refused.details["reason"] == "no longer an approver under the agent's current policy"
    )
    assert "no longer an approver" in html.unescape(response.content.decode())


@pytest.mark.django_db
def test_a_password_is_refused_where_the_organisation_signs_in_through_its_provider(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp, passwords_allowed=False)

    response = Client().post("/login/", {"username": "april", "password": LOCAL_PASSWORD})

    assert response.status_code == 200
    assert "Your organisation signs in through its identity provider: use “Sign in with Example IdP”." in (
        html.unescape(response.content.decode())
    )
    assert "_auth_user_id" not in response.wsgi_request.session
    refused = SignInRecord.objects.get(kind=Kind.PASSWORD_REFUSED)
    assert (refused.user, refused.organization) == (personas.approver, personas.org)
    # Globex signs in with passwords as before.
    assert Client().post("/login/", {"username": "sam", "password": LOCAL_PASSWORD}).status_code == 302


@pytest.mark.django_db
def test_an_admin_keeps_a_break_glass_password_and_its_use_is_recorded(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp, passwords_allowed=False)

    response = Client().post(
        "/admin/login/", {"username": "adam", "password": LOCAL_PASSWORD, "next": "/admin/"}
    )

    assert response.status_code == 302 and response["Location"] == "/admin/"
    record = SignInRecord.objects.get(kind=Kind.BREAK_GLASS)
    assert (record.user, record.organization) == (personas.admin, personas.org)


@pytest.mark.django_db
def test_a_wrong_password_is_not_told_that_sso_is_on(personas, idp: Provider, sso_settings) -> None:
    configure(personas.org, idp, passwords_allowed=False)

    response = Client().post("/login/", {"username": "april", "password": "wrong"})

    assert "identity provider" not in response.content.decode()
    assert not SignInRecord.objects.exists()


@pytest.mark.django_db
def test_the_sign_in_pages_offer_the_provider_and_only_enabled_ones(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    configure(personas.other_org, idp, name="Globex Okta", slug="globex", enabled=False)

    for path in ("/login/", "/approvals/login/", "/admin/login/"):
        page = Client().get(path).content.decode()
        assert "Sign in with Example IdP" in page, path
        assert "Globex Okta" not in page, path
    assert 'href="/sso/example/start/?next=/approvals/"' in Client().get("/approvals/login/").content.decode()


@pytest.mark.django_db
def test_without_a_provider_the_sign_in_pages_are_as_before(personas) -> None:
    page = Client().get("/login/").content.decode()

    assert "Sign in with" not in page
    assert Client().post("/login/", {"username": "alice", "password": LOCAL_PASSWORD}).status_code == 302


@pytest.mark.django_db
def test_signing_out_offers_the_providers_sign_out_which_ends_the_session_there(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    idp.set_client(
        CLIENT_ID,
        "client-secret-for-tests",
        ["http://testserver/sso/callback/"],
        ["http://testserver/login/"],
    )
    idp.set_user("rita", PASSWORD, "rita@acme.test", [])
    who = browser()
    sign_in(idp, who, "rita")

    page = who.client.post("/logout/")

    assert page.status_code == 200 and b"You are signed out" in page.content
    assert who.client.get("/approvals/").status_code == 302  # the platform's session is over
    link = html.unescape(page.content.decode()).split('href="')
    provider_sign_out = next(part.split('"')[0] for part in link if part.startswith(idp.end_session_endpoint))
    query = parse_qs(urlsplit(provider_sign_out).query)
    assert query["client_id"] == [CLIENT_ID] and query["post_logout_redirect_uri"] == [
        "http://testserver/login/"
    ]
    assert query["id_token_hint"]
    answer = who.idp_http.get(provider_sign_out, follow_redirects=False)
    assert answer.status_code == 302 and answer.headers["location"].startswith("http://testserver/login/")
    assert SignInRecord.objects.filter(kind=Kind.SIGNED_OUT, user__email="rita@acme.test").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("who", "sign_out", "sign_in_page"),
    [("member", "/logout/", "/login/"), ("admin", "/admin/logout/", "/admin/login/")],
    ids=["the portal", "the admin"],
)
def test_a_password_session_signs_out_as_before(personas, who, sign_out, sign_in_page) -> None:
    client = Client()
    client.force_login(getattr(personas, who))

    response = client.post(sign_out)

    assert response.status_code == 302 and response["Location"] == sign_in_page


@pytest.mark.django_db
def test_roles_mapping_lines_are_checked_with_the_line_named(personas, idp: Provider) -> None:
    from django.core.exceptions import ValidationError

    provider = configure(personas.org, idp)
    provider.group_roles = "fim-approvers = approver\nfim-kings = king"

    with pytest.raises(ValidationError) as raised:
        provider.full_clean()

    assert "line 2: 'king' is no role" in str(raised.value)


@pytest.mark.django_db
def test_the_admins_sign_out_also_offers_the_providers(personas, idp: Provider, sso_settings) -> None:
    configure(personas.org, idp)
    idp.set_user("ops", PASSWORD, "ops@acme.test", ["fim-operators"])
    who = browser()
    sign_in(idp, who, "ops")
    assert who.client.get("/admin/").status_code == 200  # an operator: the admin is theirs

    page = who.client.post("/admin/logout/")

    assert page.status_code == 200 and b"Also sign out of Example IdP" in page.content
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Fadmin%2Flogin%2F" in page.content.decode()
    assert who.client.get("/admin/").status_code == 302


@pytest.mark.django_db
def test_a_provider_named_like_another_organisations_shows_whose_it_is(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp, name="Acme Okta", slug="acme")
    # A rogue tenant names its provider like Acme's, to collect Acme people's passwords on its page.
    configure(personas.other_org, idp, name="Acme Okta", slug="acme-okta")

    page = Client().get("/login/").content.decode()

    assert 'href="/sso/acme/start/?next=/">Sign in with Acme Okta<span class="sso-org">Acme</span>' in page
    assert (
        'href="/sso/acme-okta/start/?next=/">Sign in with Acme Okta<span class="sso-org">Globex</span>'
        in page
    )
