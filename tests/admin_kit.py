"""Helpers shared by the admin tests of every app."""

from __future__ import annotations

import html
from typing import Any

from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse


def api_logged_in(user: Any) -> Any:
    """A REST client signed in as ``user`` (a session, as the web pages' scripts use)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(user)
    return client


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def url(model: type, view: str, *args: Any) -> str:
    """The admin URL of ``view`` (changelist, add, change, …) for ``model``."""
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def grant(user: Any, *codenames: str, app_label: str | tuple[str, ...]) -> None:
    """Give ``user`` the permissions ``codenames`` on the models of ``app_label`` (or of any of
    several apps: an admin page may show models of two)."""
    labels = (app_label,) if isinstance(app_label, str) else app_label
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=labels, codename__in=codenames)
    )


def page_text(response: Any) -> str:
    return html.unescape(response.content.decode())
