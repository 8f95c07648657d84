"""Bad sign-ins as the real provider's token endpoint answers them: the platform exchanges the code
over HTTP as it always does (nothing in between is replaced), and the provider refuses the code
or hands back a token that must not sign anyone in. Each time the person reads why on a page (never
an error page), nobody is signed in, and the refusal is recorded with its reason (docs/design.md §1.8)."""

from __future__ import annotations

import html
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from sso.models import ExternalIdentity, SignInRecord
from tests.oidc_provider.kit import Provider, generate_key, key_id, pkce_challenge
from tests.sso.kit import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    REDIRECT_URI,
    Browser,
    browser,
    callback_of,
    configure,
    start,
)

pytestmark = pytest.mark.django_db

Kind = SignInRecord.Kind


def with_query(url: str, **changes: str) -> str:
    """``url`` with some of its query parameters changed, as someone tampering with it would."""
    parts = urlsplit(url)
    query = {name: values[0] for name, values in parse_qs(parts.query).items()}
    return urlunsplit(parts._replace(query=urlencode({**query, **changes})))


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def refused_as_the_person_sees_it(who: Browser, back: str) -> tuple[str, SignInRecord]:
    """The provider's redirect back followed in ``who``'s browser: the page's words (after checking
    it is a refusal page, not an error), once checked that nobody is signed in; and the refusal
    recorded."""
    response = who.client.get(callback_of(back))
    page = html.unescape(response.content.decode())
    assert response.status_code == 403, page[:500]
    assert "Sign-in refused" in page and "Traceback" not in page
    assert "_auth_user_id" not in who.client.session
    assert who.client.get("/approvals/").status_code == 302  # to the sign-in page
    assert not ExternalIdentity.objects.exists()
    assert not SignInRecord.objects.filter(kind=Kind.SIGNED_IN).exists()
    return page, SignInRecord.objects.get(kind=Kind.REFUSED)


@pytest.fixture
def mallory(personas: Any, idp: Provider, sso_settings: Any) -> Iterator[Browser]:
    """Acme signs in through the provider; Mallory, in its groups of admins, is at her browser."""
    configure(personas.org, idp)
    idp.set_user("mallory", PASSWORD, "mallory@acme.test", ["fim-admins"])
    who = browser()
    yield who
    who.close()


# --- codes the token endpoint refuses -------------------------------------------------------------


def redeemed_elsewhere_first(idp: Provider, who: Browser) -> str:
    """A code someone else redeemed before the platform could: a leaked code (with the verifier of
    the sign-in it was issued to) raced to the token endpoint."""
    back = idp.login_and_authorize(start(who), "mallory", PASSWORD, client=who.idp_http)
    verifier = who.client.session["oidc_states"][query_of(back)["state"]]["code_verifier"]
    first = httpx.post(
        idp.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": query_of(back)["code"],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
        },
        timeout=30,
    )
    assert first.status_code == 200 and "id_token" in first.json()  # the first use was accepted
    return back


def issued_to_another_application(idp: Provider, who: Browser) -> str:
    """A code the provider issued to another application (same callback address, this sign-in's
    state, nonce and PKCE challenge): a code injected from another client of the provider."""
    authorization = with_query(start(who), client_id="another-app")
    return idp.login_and_authorize(authorization, "mallory", PASSWORD, client=who.idp_http)


def bound_to_another_verifier(idp: Provider, who: Browser) -> str:
    """A code bound to another PKCE challenge than this sign-in's: someone else's code, got with
    their own verifier and injected into this browser's callback."""
    their_challenge = pkce_challenge(secrets.token_urlsafe(48))
    authorization = with_query(start(who), code_challenge=their_challenge)
    return idp.login_and_authorize(authorization, "mallory", PASSWORD, client=who.idp_http)


BAD_CODES = {
    "a code already redeemed": redeemed_elsewhere_first,
    "a code issued to another application": issued_to_another_application,
    "a code bound to another PKCE verifier": bound_to_another_verifier,
}


@pytest.mark.parametrize("case", list(BAD_CODES))
def test_a_code_the_providers_token_endpoint_refuses_signs_nobody_in_and_the_page_says_why(
    case: str, idp: Provider, mallory: Browser
) -> None:
    back = BAD_CODES[case](idp, mallory)

    page, refused = refused_as_the_person_sees_it(mallory, back)

    assert "Example IdP did not accept this sign-in's code" in page
    assert "start again" in page
    # The record names what the provider answered (RFC 6749 §5.2), for whoever looks into it.
    assert "Example IdP did not accept this sign-in's code" in refused.detail
    assert "invalid_grant" in refused.detail
    assert refused.provider is not None and refused.provider.slug == "example"


def test_a_client_secret_the_provider_does_not_accept_is_said_to_be_the_admins_to_fix(
    personas: Any, idp: Provider, sso_settings: Any
) -> None:
    configure(personas.org, idp, secrets={"client_secret": "a-secret-rotated-at-the-provider"})
    idp.set_user("rita", PASSWORD, "rita@acme.test", [])
    who = browser()
    back = idp.login_and_authorize(start(who), "rita", PASSWORD, client=who.idp_http)

    page, refused = refused_as_the_person_sees_it(who, back)

    assert "Example IdP did not recognise this platform" in page
    assert "ask your organisation's admin" in page
    assert "invalid_client" in refused.detail
    assert "a-secret-rotated-at-the-provider" not in page + refused.detail


# --- tokens the token endpoint really issued that must not sign anyone in -------------------------


def test_an_id_token_answering_another_sign_in_nonce_is_refused(idp: Provider, mallory: Browser) -> None:
    """The code was asked for with another nonce than the one this browser's sign-in keeps (a
    code of another sign-in, injected): the token endpoint issues an ID token carrying that nonce."""
    authorization = with_query(start(mallory), nonce="the-nonce-of-another-sign-in")
    back = idp.login_and_authorize(authorization, "mallory", PASSWORD, client=mallory.idp_http)

    page, refused = refused_as_the_person_sees_it(mallory, back)

    assert "its nonce does not match" in page
    assert "its nonce does not match" in refused.detail


def test_an_id_token_signed_with_a_key_the_provider_does_not_publish_is_refused(
    idp: Provider, mallory: Browser
) -> None:
    # The provider publishes another key, and signs with one it leaves out of its key set.
    idp.publish_active_key = False
    try:
        idp.restart(old_key_pems=[generate_key()])
        published = [key["kid"] for key in idp.jwks()["keys"]]
        assert published and key_id(idp.key_pem) not in published
        back = idp.login_and_authorize(start(mallory), "mallory", PASSWORD, client=mallory.idp_http)

        page, refused = refused_as_the_person_sees_it(mallory, back)
    finally:
        idp.publish_active_key = True
        idp.restart(old_key_pems=[])

    assert "signed with a key the provider does not publish" in page
    assert "signed with a key the provider does not publish" in refused.detail
