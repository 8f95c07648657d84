"""The portal's own 404 and 500 pages for people's pages, also in development (``DEBUG``), and a
503 instead of a 500 when a shared store (Redis) does not answer.

With ``DEBUG`` off, Django answers errors with ``fimone.urls``' handlers (the portal's pages).
With it on (``make run``), it would show its debug pages instead: the URL list for a 404, a
traceback for a crash. People who try the product in development should meet the pages it ships
with, so for the paths people visit this middleware answers as the handlers would; the admin, the
API, chat-platform callbacks and the other machine endpoints keep Django's answers (the admin's
and the API's error formats are theirs). A crash is still logged with its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from redis.exceptions import RedisError

from portal.views.errors import error_page, page_not_found, server_error

log = logging.getLogger("django.request")

MACHINE_PREFIXES = ("/admin/", "/api/", "/im/", "/ws/", "/static/", "/demo/", "/healthz", "/readyz")
"""Paths whose errors are not people's pages: they keep Django's answers."""
DJANGO_ANSWERS = (PermissionDenied, BadRequest, SuspiciousOperation)
"""Exceptions Django answers with the project's handlers (403, 400) in every mode."""


def for_people(path: str) -> bool:
    return not path.startswith(MACHINE_PREFIXES)


def _unknown(path: str) -> bool:
    """Whether no URL pattern matches ``path`` — nor ``path`` with a slash appended, which
    ``CommonMiddleware`` answers with a redirect."""
    for candidate in (path, path + "/") if not path.endswith("/") else (path,):
        try:
            resolve(candidate)
        except Resolver404:
            continue
        return False
    return True


class PortalErrorPages:
    """Answers unknown paths, ``Http404`` and crashes of people's pages with the portal's pages
    while ``DEBUG`` is on; does nothing otherwise. Sync and async capable (no thread hop)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        if self._answers(request) and _unknown(request.path_info):
            return _not_found(request)
        return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        if self._answers(request) and _unknown(request.path_info):
            return await sync_to_async(_not_found)(request)
        response: Awaitable[HttpResponse] = self.get_response(request)
        return await response

    @staticmethod
    def _answers(request: HttpRequest) -> bool:
        return bool(settings.DEBUG) and for_people(request.path_info)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not self._answers(request) or isinstance(exception, DJANGO_ANSWERS):
            return None
        if isinstance(exception, Http404):
            return _not_found(request)
        log.error("Internal Server Error: %s", request.path, exc_info=exception)
        return server_error(request)


def _not_found(request: HttpRequest) -> HttpResponse:
    return page_not_found(request)


UNAVAILABLE_RETRY_SECONDS = 5
"""What a 503 tells the client to wait (``Retry-After``): Redis restarts in seconds."""


class StoreUnavailable:
    """Answers 503 with ``Retry-After``, never a 500, when a request fails because Redis (the
    request rates, the channel layer, the replay memory) does not answer: JSON ``{"detail": …}``
    for the API and the other machine paths, the portal's error page for people's pages (a
    rate is counted before the action it guards, so a refused start started nothing). Sync and
    async capable; it only acts in ``process_exception``."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, RedisError):
            return None
        log.warning("Service Unavailable (Redis: %s): %s", type(exception).__name__, request.path)
        if for_people(request.path_info) and "application/json" in request.headers.get("Accept", ""):
            # The page's own scripts (a decision, Stop) show ``message`` where they asked.
            message = "A service this needs did not answer. Try again in a few seconds."
            response = JsonResponse({"ok": False, "accepted": False, "message": message}, status=503)
        elif for_people(request.path_info):
            response = error_page(
                request,
                503,
                "Briefly unavailable",
                "A service this page needs did not answer. Try again in a few seconds.",
                # A message being sent is kept in a form that sends it again: nothing typed is lost.
                draft=request.POST.get("message", "") if request.method == "POST" else "",
                retry_url=request.path if request.method == "POST" else "",
            )
        else:
            response = JsonResponse(
                {"detail": "A service this request needs did not answer. Try again in a few seconds."},
                status=503,
            )
        response["Retry-After"] = str(UNAVAILABLE_RETRY_SECONDS)
        return response
