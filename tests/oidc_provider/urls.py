"""URLs of the test provider: DOT under ``o/`` (so the issuer is ``http://<host>:<port>/o``), the
sign-in page, and the tests' control endpoints."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.utils.html import escape
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.utils import jwk_from_pem
from oauth2_provider.views import JwksInfoView

from tests.oidc_provider import control


def home(request: HttpRequest) -> HttpResponse:
    """Where a sign-in without ``next`` and a logout without a redirect URI end up."""
    who = (
        f"Signed in as {escape(request.user.get_username())}"
        if request.user.is_authenticated
        else "Signed out"
    )
    return HttpResponse(f"<!DOCTYPE html><title>Example Identity Provider</title><p>{who}</p>")


class PublishedKeys(JwksInfoView):
    """DOT's key set, less the active key when ``OIDC_PROVIDER_PUBLISH_ACTIVE_KEY`` is off: that
    key still signs every ID token, so the provider vouches with a key nobody can check."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        if settings.OIDC_PROVIDER_PUBLISH_ACTIVE_KEY:
            return response
        active = jwk_from_pem(oauth2_settings.OIDC_RSA_PRIVATE_KEY).thumbprint()
        keys = [key for key in json.loads(response.content)["keys"] if key["kid"] != active]
        return JsonResponse({"keys": keys})


urlpatterns = [
    path("", home, name="home"),
    # Before DOT's own: the same address (the discovery document names it), answered above.
    path("o/.well-known/jwks.json", PublishedKeys.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="registration/login.html"),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("control/ping", control.ping, name="control-ping"),
    path("control/users/", control.users, name="control-users"),
    path("control/clients/", control.clients, name="control-clients"),
]
