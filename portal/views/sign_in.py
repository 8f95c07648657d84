"""Signing in and out of the portal, and ``signed_in``: the decorator of every page that needs
an account (signed out, it sends to the sign-in page and back)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import reverse_lazy

LOGIN_URL = reverse_lazy("portal:login")

signed_in = login_required(login_url=LOGIN_URL)

login = auth_views.LoginView.as_view(
    template_name="portal/login.html", redirect_authenticated_user=True, next_page=reverse_lazy("portal:home")
)
logout = auth_views.LogoutView.as_view(next_page=reverse_lazy("portal:login"))
