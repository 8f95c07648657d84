"""The test OpenID provider itself (tests/oidc_provider/kit.py): a real django-oauth-toolkit
process whose discovery, keys, code flow with PKCE, claims, issuers, key rotation and token
lifetime are what the single sign-on tests will rely on. None of these tests touch the project's
database: the provider has its own, in its own process."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import pytest

from tests.oidc_provider.kit import Provider, generate_key, key_id, pkce_challenge

pytestmark = pytest.mark.once  # subprocesses and pure code: one stack is enough (pyproject.toml)

PORTAL = "portal"
PORTAL_SECRET = "portal-client-secret"
PORTAL_CALLBACK = "http://127.0.0.1:8000/oidc/callback/"
PORTAL_SIGNED_OUT = "http://127.0.0.1:8000/signed-out/"
OTHER_APP = "other-app"
OTHER_SECRET = "other-app-client-secret"
OTHER_CALLBACK = "http://127.0.0.1:8001/oidc/callback/"
PASSWORD = "correct horse battery staple"


def _set_up(provider: Provider) -> None:
    provider.set_client(PORTAL, PORTAL_SECRET, [PORTAL_CALLBACK], [PORTAL_SIGNED_OUT])
    provider.set_client(OTHER_APP, OTHER_SECRET, [OTHER_CALLBACK])
    provider.set_user("ada", PASSWORD, "ada@example.com", ["staff", "approvers"], "Ada", "Lovelace")


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with Provider(tmp_path_factory.mktemp("oidc_provider")) as running:
        _set_up(running)
        yield running


def _portal_token(provider: Provider, username: str = "ada", **options: Any) -> dict[str, Any]:
    options.setdefault("nonce", secrets.token_urlsafe(8))
    return provider.token_for(PORTAL, PORTAL_SECRET, PORTAL_CALLBACK, username, PASSWORD, **options)


def _verified(
    provider: Provider, id_token: str, *, audience: str = PORTAL, issuer: str | None = None
) -> dict:
    """The ID token's claims once its signature is checked against the provider's JWKS (by the
    ``kid`` in its header), and its audience and issuer are the ones expected."""
    keys = jwt.PyJWKSet.from_dict(provider.jwks())
    key = keys[jwt.get_unverified_header(id_token)["kid"]]
    claims: dict = jwt.decode(
        id_token, key, algorithms=["RS256"], audience=audience, issuer=issuer or provider.issuer
    )
    return claims


def _kids(provider: Provider) -> list[str]:
    return [key["kid"] for key in provider.jwks()["keys"]]


def test_the_discovery_document_names_the_issuer_the_endpoints_and_rs256(provider: Provider) -> None:
    document = provider.discovery()

    assert document["issuer"] == provider.issuer
    assert document["authorization_endpoint"] == provider.authorization_endpoint
    assert document["token_endpoint"] == provider.token_endpoint
    assert document["userinfo_endpoint"] == provider.userinfo_endpoint
    assert document["jwks_uri"] == provider.jwks_uri
    assert document["end_session_endpoint"] == provider.end_session_endpoint
    assert "RS256" in document["id_token_signing_alg_values_supported"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert {"openid", "email", "profile", "groups"} <= set(document["scopes_supported"])
    assert {"email", "groups", "preferred_username"} <= set(document["claims_supported"])


def test_the_jwks_holds_the_active_keys_kid(provider: Provider) -> None:
    (key,) = provider.jwks()["keys"]

    assert key["kid"] == key_id(provider.key_pem)
    assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")
    assert "d" not in key  # the public half only


def test_a_code_flow_with_pkce_yields_an_id_token_signed_by_the_jwks_key_with_the_users_claims(
    provider: Provider,
) -> None:
    tokens = _portal_token(provider, nonce="nonce-of-this-flow")

    claims = _verified(provider, tokens["id_token"])
    assert jwt.get_unverified_header(tokens["id_token"])["kid"] == key_id(provider.key_pem)
    assert claims["aud"] == PORTAL
    assert claims["iss"] == provider.issuer
    assert claims["nonce"] == "nonce-of-this-flow"
    assert claims["email"] == "ada@example.com"
    assert claims["email_verified"] is True
    assert claims["name"] == "Ada Lovelace"
    assert claims["preferred_username"] == "ada"
    assert claims["groups"] == ["approvers", "staff"]


def test_userinfo_carries_the_same_claims_as_the_id_token(provider: Provider) -> None:
    tokens = _portal_token(provider)

    response = httpx.get(
        provider.userinfo_endpoint, headers={"Authorization": f"Bearer {tokens['access_token']}"}
    )

    assert response.status_code == 200
    info = response.json()
    assert info["email"] == "ada@example.com"
    assert info["groups"] == ["approvers", "staff"]
    assert info["sub"] == _verified(provider, tokens["id_token"])["sub"]


def test_changing_a_users_groups_changes_the_next_tokens_groups(provider: Provider) -> None:
    provider.set_user("grace", PASSWORD, "grace@example.com", ["staff"])
    assert _verified(provider, _portal_token(provider, "grace")["id_token"])["groups"] == ["staff"]

    provider.set_user("grace", PASSWORD, "grace@example.com", ["auditors", "admins"])

    assert _verified(provider, _portal_token(provider, "grace")["id_token"])["groups"] == [
        "admins",
        "auditors",
    ]


def test_a_token_of_another_client_has_that_client_as_its_audience(provider: Provider) -> None:
    tokens = provider.token_for(OTHER_APP, OTHER_SECRET, OTHER_CALLBACK, "ada", PASSWORD, nonce="n")

    assert _verified(provider, tokens["id_token"], audience=OTHER_APP)["aud"] == OTHER_APP


def test_a_token_obtained_through_localhost_carries_the_other_issuer_and_the_same_key(
    provider: Provider,
) -> None:
    tokens = _portal_token(provider, issuer_host="localhost")

    claims = _verified(provider, tokens["id_token"], issuer=provider.other_issuer)
    assert claims["iss"] == provider.other_issuer != provider.issuer
    assert provider.discovery(host="localhost")["issuer"] == provider.other_issuer
    with pytest.raises(jwt.InvalidIssuerError):
        _verified(provider, tokens["id_token"], issuer=provider.issuer)


def test_login_and_authorize_returns_a_redirect_to_the_registered_uri_with_code_and_state(
    provider: Provider,
) -> None:
    query = {
        "response_type": "code",
        "client_id": PORTAL,
        "redirect_uri": PORTAL_CALLBACK,
        "scope": "openid email",
        "state": "state-1",
        "nonce": "nonce-1",
        "code_challenge": pkce_challenge(secrets.token_urlsafe(48)),
        "code_challenge_method": "S256",
    }
    with httpx.Client() as browser:
        location = provider.login_and_authorize(
            f"{provider.authorization_endpoint}?{urlencode(query)}", "ada", PASSWORD, client=browser
        )
        # The same client keeps the provider's session: no sign-in form, so no password asked.
        again = provider.login_and_authorize(
            f"{provider.authorization_endpoint}?{urlencode({**query, 'state': 'state-2'})}",
            "ada",
            "not asked again",
            client=browser,
        )

    for url, state in ((location, "state-1"), (again, "state-2")):
        assert url.split("?")[0] == PORTAL_CALLBACK
        params = parse_qs(urlsplit(url).query)
        assert params["state"] == [state]
        assert params["code"][0]


def test_rp_initiated_logout_with_the_users_id_token_redirects_without_a_confirmation(
    provider: Provider,
) -> None:
    with httpx.Client() as browser:
        tokens = _portal_token(provider, client=browser)
        response = browser.get(
            provider.end_session_endpoint,
            params={
                "id_token_hint": tokens["id_token"],
                "post_logout_redirect_uri": PORTAL_SIGNED_OUT,
                "state": "bye",
            },
        )

    assert response.status_code == 302
    assert response.headers["location"] == f"{PORTAL_SIGNED_OUT}?state=bye"


def test_the_control_endpoints_refuse_a_request_without_the_control_token(provider: Provider) -> None:
    body = {"username": "mallory", "password": "x", "email": "m@example.com", "groups": ["admins"]}

    without = httpx.post(provider.url("/control/users/"), json=body)
    wrong = httpx.post(provider.url("/control/users/"), json=body, headers={"X-Control-Token": "guess"})

    assert (without.status_code, wrong.status_code) == (403, 403)


def test_a_key_rotation_publishes_only_the_new_key_or_both_and_signs_with_the_new_one(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with Provider(tmp_path_factory.mktemp("oidc_provider_rotation")) as provider:
        _set_up(provider)
        old, new = provider.key_pem, generate_key()
        before = _portal_token(provider)["id_token"]

        provider.restart(key_pem=new, old_key_pems=[])

        assert _kids(provider) == [key_id(new)]
        after = _portal_token(provider)["id_token"]  # users and clients survived the restart
        assert jwt.get_unverified_header(after)["kid"] == key_id(new)
        assert _verified(provider, after)["preferred_username"] == "ada"
        with pytest.raises(KeyError):
            _verified(provider, before)  # its key is no longer published

        provider.restart(key_pem=new, old_key_pems=[old])

        assert _kids(provider) == [key_id(new), key_id(old)]
        assert _verified(provider, before)["preferred_username"] == "ada"
        assert jwt.get_unverified_header(_portal_token(provider)["id_token"])["kid"] == key_id(new)


def test_a_provider_with_one_second_id_tokens_issues_tokens_whose_exp_is_iat_plus_one(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with Provider(tmp_path_factory.mktemp("oidc_provider_short"), id_token_seconds=1) as provider:
        _set_up(provider)
        id_token = _portal_token(provider)["id_token"]

    claims = jwt.decode(id_token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 1
