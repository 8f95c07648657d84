"""The friendly error pages: the handlers of ``fimone.urls`` (400, 403, 404, 500) and
:func:`error_page`, which the portal's views answer with when they refuse (a 429 that keeps the
user's draft, for one)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template import loader
from django.urls import reverse


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(request, 400, "That request could not be understood", "Go back and try again.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(
        request, 403, "You may not do that", "Your account does not allow this. Ask an administrator."
    )


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(request, 404, "Page not found", "This page does not exist, or it is not yours to see.")


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 page renders from a template that needs no database and no context processor:
    whatever broke the request may break them too."""
    template = loader.get_template("portal/500.html")
    return HttpResponse(template.render({}), status=500)


def error_page(
    request: HttpRequest, status: int, title: str, detail: str, *, draft: str = "", retry_url: str = ""
) -> HttpResponse:
    """A friendly error page. ``draft``/``retry_url``: a message the user typed and where to send it
    again, shown in a form so that nothing they wrote is lost."""
    context = {"status": status, "title": title, "detail": detail, "draft": draft, "retry_url": retry_url}
    if not getattr(getattr(request, "user", None), "is_authenticated", False):
        # A signed-out visitor has no agents to go back to: offer to sign in instead.
        context["login_url"] = reverse("portal:login")
    return render(request, "portal/error.html", context, status=status)
