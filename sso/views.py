"""The sign-in through a provider (start, callback) and the sign-out that offers the provider's.

The start and the callback are mozilla-django-oidc's views made per provider: the start keeps, for
its ``state``, which provider it went to; the callback completes only a state this browser started
(the library keeps state, nonce and PKCE verifier per state in the session and forgets each once
used, so a callback replayed is refused). Every refusal is recorded and shown as a page saying
why, never as an error page.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import requests
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from fimone.throttling import client_ip
from sso import selectors, services
from sso.backends import PROVIDER, provider_settings
from sso.discovery import Metadata, ProviderUnavailable, metadata_of
from sso.models import IdentityProvider
from sso.services import SignInRefused

log = logging.getLogger(__name__)

STATES = "sso_states"
"""Session key: ``{state: provider slug}`` of the sign-ins this browser started."""
SIGNED_IN_WITH = "sso_provider"
"""Session key: the slug of the provider the session was signed in with."""


# An error code of an OAuth 2.0 error response (RFC 6749 §5.2): printable ASCII but " and \.
OAUTH_ERROR = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]{1,80}")
# What the common token endpoint refusals mean to the person signing in, and who can fix them.
TOKEN_ERRORS = {
    "invalid_grant": "{name} did not accept this sign-in's code (used already, expired, or issued for "
    "another sign-in or application): start again",
    "invalid_client": "{name} did not recognise this platform (its client ID or secret): ask your "
    "organisation's admin to check the sign-in settings",
}


def _provider_refusal(provider: IdentityProvider, exc: requests.RequestException) -> str:
    """Why the provider did not complete the sign-in, in words, from its answer to the token (or
    profile) request: what its error code means when it is a common one, and the code and its
    description as the provider gave them (RFC 6749 §5.2), so the record says what was answered.
    Never the raw body, which may quote anything."""
    response = exc.response
    if response is None:
        if isinstance(exc, requests.ConnectionError | requests.Timeout):
            return f"{provider.name} could not be reached to complete the sign-in ({type(exc).__name__})"
        return f"{provider.name} sent an answer that could not be read ({type(exc).__name__})"
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(error, str) and OAUTH_ERROR.fullmatch(error)):
        return f"{provider.name} refused to complete the sign-in (it answered {response.status_code})"
    description = body.get("error_description")
    if isinstance(description, str):
        # The provider's own words, kept printable (no NUL the database refuses) and short.
        description = "".join(ch for ch in description if ch.isprintable())[:200].strip()
    answered = f"{error}: {description}" if isinstance(description, str) and description else error
    words = TOKEN_ERRORS.get(error, "{name} refused to complete the sign-in").format(name=provider.name)
    return f"{words} (the provider answered {answered})"


def _refused(
    request: HttpRequest, reason: str, *, provider: IdentityProvider | None, status: int = 403
) -> HttpResponse:
    return render(request, "sso/refused.html", {"reason": reason, "provider": provider}, status=status)


class SignInStart(OIDCAuthenticationRequestView):
    """``/sso/<slug>/start/?next=…``: to the provider's sign-in page."""

    provider: IdentityProvider
    metadata: Metadata

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the library's reads one provider's settings; ours are per request

    def get_settings(self, attr: str, *args: Any) -> Any:  # type: ignore[override]
        return provider_settings(self.provider, self.metadata, attr, *args)

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:  # type: ignore[override]
        provider = selectors.provider_enabled(slug=slug)
        if provider is None:
            return _refused(
                request, "There is no such sign-in (or it was switched off).", provider=None, status=404
            )
        try:
            self.metadata = metadata_of(provider.issuer)
        except ProviderUnavailable as exc:
            log.warning("identity provider %s unavailable: %s", provider.slug, exc)
            services.sign_in_refused(
                provider=provider, reason=f"provider unavailable: {exc}", address=client_ip(request)
            )
            return _refused(
                request,
                f"{provider.name} cannot be reached just now. Try again in a moment.",
                provider=provider,
                status=503,
            )
        self.provider = provider
        self.OIDC_OP_AUTH_ENDPOINT = self.metadata.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = provider.client_id
        response = super().get(request)
        state = parse_qs(urlsplit(response["Location"]).query)["state"][0]
        started = {
            s: p for s, p in request.session.get(STATES, {}).items() if s in request.session["oidc_states"]
        }
        started[state] = provider.slug
        request.session[STATES] = started
        return response


class SignInCallback(OIDCAuthenticationCallbackView):
    """``/sso/callback/``: the provider sends the person back here with a code."""

    provider: IdentityProvider | None = None

    def get_settings(self, attr: str, *args: Any) -> Any:  # type: ignore[override]
        defaults = {
            "LOGIN_REDIRECT_URL": reverse("portal:home"),
            "LOGIN_REDIRECT_URL_FAILURE": reverse("portal:login"),
        }
        if attr in defaults:
            return defaults[attr]
        return super().get_settings(attr, *args)

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        assert self.provider is not None
        self.request.session[SIGNED_IN_WITH] = self.provider.slug
        return response

    def login_failure(self) -> HttpResponse:
        if self.provider is None:
            return _refused(
                self.request,
                "This sign-in was not started in this browser, or it was used already. Start again.",
                provider=None,
                status=400,
            )
        error = self.request.GET.get("error_description") or self.request.GET.get("error")
        reason = f"{self.provider.name} did not sign you in" + (f": {error}" if error else ".")
        services.sign_in_refused(provider=self.provider, reason=reason[:500], address=client_ip(self.request))
        return _refused(self.request, reason, provider=self.provider)

    def get(self, request: HttpRequest) -> HttpResponse:  # type: ignore[override]
        state = request.GET.get("state", "")
        slug = request.session.get(STATES, {}).get(state)
        self.provider = selectors.provider_enabled(slug=slug) if slug else None
        if self.provider is None:
            return self.login_failure()
        setattr(request, PROVIDER, self.provider)
        claims = None
        try:
            return super().get(request)
        except (SignInRefused, ProviderUnavailable, SuspiciousOperation) as exc:
            reason, claims = str(exc), getattr(exc, "claims", None)
        except requests.RequestException as exc:
            # The token or profile request failed: a code used twice, a provider down, a wrong secret.
            log.warning("sign-in through %s failed: %s", self.provider.slug, exc)
            reason = _provider_refusal(self.provider, exc)
        except jwt.PyJWTError as exc:
            reason = f"the provider's token is not valid ({type(exc).__name__})"
        services.sign_in_refused(
            provider=self.provider, reason=reason[:500], claims=claims, address=client_ip(request)
        )
        return _refused(request, f"Sign-in refused: {reason}.", provider=self.provider)


class SignOut(auth_views.LogoutView):
    """Django's sign-out; after a session signed in through a provider that supports it, a page
    that also offers to sign out of the provider (RP-initiated logout)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        slug = request.session.get(SIGNED_IN_WITH)
        id_token = request.session.get("oidc_id_token")
        user = request.user
        response = super().post(request, *args, **kwargs)
        provider = selectors.provider_enabled(slug=slug) if slug else None
        if provider is None:
            return response
        services.sign_out_record(provider=provider, user=user, address=client_ip(request))
        try:
            end_session = metadata_of(provider.issuer).end_session_endpoint
        except ProviderUnavailable:
            end_session = ""
        if not end_session:
            return response
        sign_in = response.get("Location") or reverse("portal:login")
        query = {
            "client_id": provider.client_id,
            "post_logout_redirect_uri": request.build_absolute_uri(sign_in),
        }
        if id_token:
            query["id_token_hint"] = id_token
        return render(
            request,
            "sso/signed_out.html",
            {
                "provider": provider,
                "provider_sign_out": f"{end_session}?{urlencode(query)}",
                "back": sign_in,
            },
        )
