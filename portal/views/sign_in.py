"""Signing in and out of the portal, and ``signed_in``: the decorator of every page that needs
an account (signed out, it sends to the sign-in page and back)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import reverse_lazy

from fimone.sign_in import SignInForm
from sso.views import SignOut

LOGIN_URL = reverse_lazy("portal:login")

signed_in = login_required(login_url=LOGIN_URL)

login = auth_views.LoginView.as_view(
    template_name="portal/login.html",
    authentication_form=SignInForm,
    redirect_authenticated_user=True,
    next_page=reverse_lazy("portal:home"),
    extra_context={"sso_next": reverse_lazy("portal:home")},
)
# After a session signed in through an identity provider, it also offers the provider's sign-out.
logout = SignOut.as_view(next_page=reverse_lazy("portal:login"))
