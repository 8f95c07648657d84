"""Signing in through an organisation's OpenID provider — a real one, its own process
(tests/oidc_provider): accounts made at the first sign-in, roles following the provider's groups at
every sign-in and re-checked when a decision is made, and every token that must not sign anyone in
refused, each refusal recorded."""

from __future__ import annotations

import base64
import html
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from sso.backends import OidcBackend
from sso.models import ExternalIdentity, SignInRecord
from tenancy.models import Membership, Role
from tests.oidc_provider.kit import Provider, generate_key, key_id
from tests.sso.kit import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    REDIRECT_URI,
    browser,
    callback_of,
    configure,
    nonce_of,
    sign_in,
    start,
)

pytestmark = pytest.mark.django_db

Kind = SignInRecord.Kind


def roles_of(user: Any, org: Any) -> set[str]:
    return set(Membership.objects.filter(user=user, organization=org).values_list("role", flat=True))


def test_a_first_sign_in_creates_the_person_in_the_providers_organisation_with_their_groups_roles(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    subject = idp.set_user("rita", PASSWORD, "rita@acme.test", ["fim-approvers", "unrelated"], "Rita", "Ray")
    who = browser()

    response = sign_in(idp, who, "rita", next_url="/approvals/")

    assert response.status_code == 302 and response["Location"] == "/approvals/"
    link = ExternalIdentity.objects.select_related("user").get(subject=str(subject))
    rita = link.user
    assert (rita.username, rita.email, rita.get_full_name()) == (
        "rita@acme.test",
        "rita@acme.test",
        "Rita Ray",
    )
    assert not rita.has_usable_password()
    assert roles_of(rita, personas.org) == {Role.MEMBER, Role.APPROVER}
    assert not Membership.objects.filter(user=rita, organization=personas.other_org).exists()
    assert who.client.get("/approvals/").status_code == 200  # signed in: the inbox, not the sign-in page
    records = list(SignInRecord.objects.filter(user=rita).order_by("pk").values_list("kind", "role"))
    assert records == [(Kind.ROLE_GRANTED, "approver"), (Kind.ROLE_GRANTED, "member"), (Kind.SIGNED_IN, "")]


def test_a_group_removed_at_the_provider_takes_the_role_away_at_the_next_sign_in(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    idp.set_user("ron", PASSWORD, "ron@acme.test", ["fim-operators", "fim-approvers"])
    sign_in(idp, browser(), "ron")
    ron = ExternalIdentity.objects.get(user__email="ron@acme.test").user
    assert roles_of(ron, personas.org) == {Role.MEMBER, Role.OPERATOR, Role.APPROVER}
    ron.refresh_from_db()
    assert ron.is_staff  # operators use the admin

    idp.set_user("ron", PASSWORD, "ron@acme.test", ["fim-approvers"])
    sign_in(idp, browser(), "ron")

    ron.refresh_from_db()
    assert roles_of(ron, personas.org) == {Role.MEMBER, Role.APPROVER}
    assert not ron.is_staff
    removed = SignInRecord.objects.get(user=ron, kind=Kind.ROLE_REMOVED)
    assert removed.role == Role.OPERATOR and removed.provider.slug == "example"


def test_the_organisations_last_admin_is_not_demoted_by_the_provider(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    Membership.objects.filter(organization=personas.org, role=Role.ADMIN).delete()  # adam is gone
    idp.set_user("ada", PASSWORD, "ada@acme.test", ["fim-admins"])
    sign_in(idp, browser(), "ada")
    ada = ExternalIdentity.objects.get(user__email="ada@acme.test").user

    idp.set_user("ada", PASSWORD, "ada@acme.test", [])
    sign_in(idp, browser(), "ada")

    assert roles_of(ada, personas.org) == {Role.MEMBER, Role.ADMIN}
    kept = SignInRecord.objects.get(user=ada, kind=Kind.ROLE_KEPT)
    assert "without an admin" in kept.detail


def test_the_same_subject_signs_in_to_the_same_account_and_an_e_mail_alone_claims_nothing(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    # Sam of Globex has the address the provider asserts: he is no member of Acme, so no takeover.
    personas.stranger.email = "sam@acme.test"
    personas.stranger.save()
    idp.set_user("sam", PASSWORD, "sam@acme.test", [])

    sign_in(idp, browser(), "sam")
    sign_in(idp, browser(), "sam")

    link = ExternalIdentity.objects.get(user__email="sam@acme.test", provider__slug="example")
    assert link.user != personas.stranger
    assert ExternalIdentity.objects.count() == 1
    assert not Membership.objects.filter(user=personas.stranger, organization=personas.org).exists()


def test_a_member_with_the_verified_address_is_linked_rather_than_duplicated(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    idp.set_user("april", PASSWORD, personas.approver.email, ["fim-approvers"])

    sign_in(idp, browser(), "april")

    assert ExternalIdentity.objects.get().user == personas.approver


def test_an_e_mail_domain_the_organisation_does_not_allow_is_refused_and_recorded(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp, allowed_domains="acme.test, acme.example")
    idp.set_user("eve", PASSWORD, "eve@evil.test", ["fim-admins"])

    response = sign_in(idp, browser(), "eve")

    assert response.status_code == 403
    assert b"eve@evil.test may not sign in to Acme" in response.content
    assert not ExternalIdentity.objects.exists()
    refused = SignInRecord.objects.get(kind=Kind.REFUSED)
    assert (refused.email, refused.organization) == ("eve@evil.test", personas.org)


def test_a_deactivated_account_is_refused(personas, idp: Provider, sso_settings) -> None:
    configure(personas.org, idp)
    idp.set_user("dora", PASSWORD, "dora@acme.test", [])
    sign_in(idp, browser(), "dora")
    dora = ExternalIdentity.objects.get().user
    dora.is_active = False
    dora.save()

    who = browser()
    response = sign_in(idp, who, "dora")

    assert response.status_code == 403 and b"deactivated" in response.content
    assert who.client.get("/approvals/").status_code == 302


def test_a_callback_used_twice_or_not_started_in_this_browser_is_refused(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    idp.set_user("rita", PASSWORD, "rita@acme.test", [])
    who = browser()
    back = idp.login_and_authorize(start(who), "rita", PASSWORD, client=who.idp_http)
    assert who.client.get(callback_of(back)).status_code == 302
    who.client.logout()

    again = who.client.get(callback_of(back))
    elsewhere = browser().client.get(callback_of(back))

    for response in (again, elsewhere):
        assert response.status_code == 400
        assert b"not started in this browser, or it was used already" in response.content


def test_an_unknown_or_switched_off_provider_is_a_page_not_an_error(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp, enabled=False)

    response = browser().client.get("/sso/example/start/")

    assert response.status_code == 404 and b"no such sign-in" in response.content


def test_a_provider_that_cannot_be_reached_is_said_so(personas, sso_settings) -> None:
    from tests.oidc_provider.kit import free_port

    configure(personas.org, SimpleNamespace(issuer=f"http://127.0.0.1:{free_port()}/o"))

    response = browser().client.get("/sso/example/start/")

    assert response.status_code == 503 and b"cannot be reached just now" in response.content
    assert "did not answer" in SignInRecord.objects.get(kind=Kind.REFUSED).detail


def test_an_internal_provider_is_refused_unless_egress_allows_it(
    personas, idp: Provider, sso_settings
) -> None:
    configure(personas.org, idp)
    sso_settings.EGRESS_ALLOW = []

    response = browser().client.get("/sso/example/start/")

    assert response.status_code == 503
    assert "loopback" in SignInRecord.objects.get(kind=Kind.REFUSED).detail


# --- tokens that must not sign anyone in ---------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def tampered(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "someone-else"
    return ".".join([header, _b64(json.dumps(claims).encode()), signature])


BAD_TOKENS = {
    "another issuer": ("the token was issued by another provider", {"issuer_host": "localhost"}),
    "another audience": ("the token was issued for another application", {"client_id": "another-app"}),
    "a replayed nonce": ("its nonce does not match", {"nonce": "the-nonce-of-an-earlier-sign-in"}),
    "a tampered signature": ("the token's signature does not verify", {"tamper": True}),
}


@pytest.mark.parametrize("case", list(BAD_TOKENS))
def test_a_token_that_must_not_sign_anyone_in_is_refused(
    case: str, personas, idp: Provider, sso_settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider really issued each of these tokens (signed with its key); the token endpoint's
    answer to this sign-in is replaced by it, as a man in the middle or a confused provider would."""
    reason, how = BAD_TOKENS[case]
    configure(personas.org, idp)
    idp.set_user("mallory", PASSWORD, "mallory@acme.test", ["fim-admins"])
    who = browser()
    authorization = start(who)
    back = idp.login_and_authorize(authorization, "mallory", PASSWORD, client=who.idp_http)
    client_id = how.get("client_id", CLIENT_ID)
    tokens = idp.token_for(
        client_id,
        CLIENT_SECRET if client_id == CLIENT_ID else "another-secret",
        REDIRECT_URI,
        "mallory",
        PASSWORD,
        nonce=how.get("nonce", nonce_of(authorization)),
        issuer_host=how.get("issuer_host", "127.0.0.1"),
    )
    if how.get("tamper"):
        tokens["id_token"] = tampered(tokens["id_token"])
    monkeypatch.setattr(OidcBackend, "get_token", lambda self, payload: tokens)

    response = who.client.get(callback_of(back))

    assert response.status_code == 403, response.content[:300]
    assert reason in SignInRecord.objects.get(kind=Kind.REFUSED).detail, SignInRecord.objects.get().detail
    assert reason in html.unescape(response.content.decode())
    assert not ExternalIdentity.objects.exists()
    assert who.client.get("/approvals/").status_code == 302  # still signed out
    assert reason in SignInRecord.objects.get(kind=Kind.REFUSED).detail


def test_an_expired_token_is_refused(
    personas, idp: Provider, sso_settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(personas.org, idp)
    sso_settings.SSO_CLOCK_SKEW_SECONDS = 0
    idp.set_user("mallory", PASSWORD, "mallory@acme.test", [])
    who = browser()
    authorization = start(who)
    back = idp.login_and_authorize(authorization, "mallory", PASSWORD, client=who.idp_http)
    idp.id_token_seconds = 1
    try:
        idp.restart()
        tokens = idp.token_for(
            CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, "mallory", PASSWORD, nonce=nonce_of(authorization)
        )
    finally:
        idp.id_token_seconds = 3600
        idp.restart()
    claims = json.loads(base64.urlsafe_b64decode(tokens["id_token"].split(".")[1] + "=="))
    while time.time() < claims["exp"] + 2:  # well past its end: no test on the edge of a clock
        time.sleep(0.25)
    monkeypatch.setattr(OidcBackend, "get_token", lambda self, payload: tokens)

    response = who.client.get(callback_of(back))

    assert response.status_code == 403 and b"has expired" in response.content
    assert not ExternalIdentity.objects.exists()


def test_a_key_rotation_at_the_provider_is_followed(personas, idp: Provider, sso_settings) -> None:
    configure(personas.org, idp)
    idp.set_user("rita", PASSWORD, "rita@acme.test", [])
    assert sign_in(idp, browser(), "rita").status_code == 302  # the key set is now cached
    old = idp.key_pem
    new = generate_key()
    try:
        idp.restart(key_pem=new, old_key_pems=[])
        assert [k["kid"] for k in idp.jwks()["keys"]] == [key_id(new)]

        response = sign_in(idp, browser(), "rita")
    finally:
        idp.restart(key_pem=old, old_key_pems=[])

    assert response.status_code == 302, response.content[:300]
    assert SignInRecord.objects.filter(kind=Kind.SIGNED_IN).count() == 2
