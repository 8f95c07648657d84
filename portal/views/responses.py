"""How the portal's views answer: a page with what the layout needs, JSON for the page's own
script, and the words and ``Retry-After`` header of a refusal past a rate."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from fimone.throttling import Refusal


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """Render with what the layout needs: the server's clock (countdowns count from it)."""
    return render(request, template, {"server_now": timezone.now(), **context}, status=status)


def wants_json(request: HttpRequest) -> bool:
    """Whether the page's script asked (``Accept: application/json``), rather than a form post."""
    return "application/json" in request.headers.get("Accept", "")


def json_not_found(message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=404)


def retry_after(response: HttpResponse, refused: Refusal) -> HttpResponse:
    """``response`` with the ``Retry-After`` header of a refusal past a rate."""
    response["Retry-After"] = str(refused.wait)
    return response


def wait_text(refused: Refusal) -> str:
    """How long to wait, as the end of a sentence: ``try again in 3 seconds``."""
    return f"try again in {refused.wait} second{'' if refused.wait == 1 else 's'}"


def as_sentence(text: str) -> str:
    """A service's refusal ("this conversation is archived; …") as a sentence for a flash message."""
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "." if text else text
