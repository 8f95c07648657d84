"""URLs of the test provider: DOT under ``o/`` (so the issuer is ``http://<host>:<port>/o``), the
sign-in page, and the tests' control endpoints."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.utils.html import escape

from tests.oidc_provider import control


def home(request: HttpRequest) -> HttpResponse:
    """Where a sign-in without ``next`` and a logout without a redirect URI end up."""
    who = (
        f"Signed in as {escape(request.user.get_username())}"
        if request.user.is_authenticated
        else "Signed out"
    )
    return HttpResponse(f"<!DOCTYPE html><title>Example Identity Provider</title><p>{who}</p>")


urlpatterns = [
    path("", home, name="home"),
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
