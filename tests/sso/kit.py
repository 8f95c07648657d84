"""What the single sign-on tests share: a real OpenID provider (tests/oidc_provider, its own
process), the organisation's configuration of it, and a sign-in driven the way a browser would
(the relying party in the Django test client, the provider over HTTP)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from django.test import Client

from sso.models import IdentityProvider
from tests.oidc_provider.kit import Provider

CLIENT_ID = "fim-one"
CLIENT_SECRET = "client-secret-for-tests"
REDIRECT_URI = "http://testserver/sso/callback/"
PASSWORD = "idp-pass-123"


def configure(org: Any, idp: Provider | Any, **fields: Any) -> IdentityProvider:
    values = {
        "name": "Example IdP",
        "slug": "example",
        "issuer": idp.issuer,
        "client_id": CLIENT_ID,
        "secrets": {"client_secret": CLIENT_SECRET},
        "scopes": "openid email profile groups",
        "group_roles": "fim-approvers = approver\nfim-admins = admin\nfim-operators = operator",
        **fields,
    }
    return IdentityProvider.objects.create(organization=org, **values)


@dataclass
class Browser:
    """A person's browser: the platform's cookies (a Django test client) and the provider's."""

    client: Client
    idp_http: httpx.Client

    def close(self) -> None:
        self.idp_http.close()


def browser() -> Browser:
    return Browser(Client(), httpx.Client(timeout=30))


def start(who: Browser, slug: str = "example", next_url: str = "") -> str:
    """Press "Sign in with …": the provider's authorization URL the platform sends to."""
    response = who.client.get(f"/sso/{slug}/start/" + (f"?next={next_url}" if next_url else ""))
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def callback_of(url: str) -> str:
    parts = urlsplit(url)
    assert parts.path == "/sso/callback/", url
    return f"{parts.path}?{parts.query}"


def sign_in(idp: Provider, who: Browser, username: str, *, slug: str = "example", next_url: str = "") -> Any:
    """The whole round trip; returns the platform's answer to the provider's redirect back."""
    back = idp.login_and_authorize(start(who, slug, next_url), username, PASSWORD, client=who.idp_http)
    return who.client.get(callback_of(back))


def nonce_of(authorization_url: str) -> str:
    return parse_qs(urlsplit(authorization_url).query)["nonce"][0]
