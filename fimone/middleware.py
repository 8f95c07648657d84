"""Django's stock middleware, run on the event loop when they have no I/O to do.

Under ASGI, Django's ``MiddlewareMixin`` sends every ``process_request`` and ``process_response``
to a worker thread (``sync_to_async``), in case it blocks: with the seven middleware of a usual
stack that is thirteen thread hand-offs per request, most of the server's time on a small
machine. None of these hooks does I/O except the ones that save a session or stored messages;
the subclasses below call the hooks in place and hand off to a thread only when such a write may
happen. Under WSGI and in the test client (sync mode) nothing changes.

``settings.MIDDLEWARE`` names Django's stock classes, so Django's deployment checks (security,
clickjacking, CSRF, and the HSTS / SSL checks they gate) see the middleware really in use; the
ASGI handler (:class:`InPlaceASGIHandler`) loads the in-place subclass of each stock class it
finds there (:data:`IN_PLACE`). A stock class removed from ``MIDDLEWARE`` is gone from both.
"""

from __future__ import annotations

import threading
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Messages
from django.contrib.sessions.middleware import SessionMiddleware as _Session
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware as _XFrameOptions
from django.middleware.common import CommonMiddleware as _Common
from django.middleware.csrf import CsrfViewMiddleware as _Csrf
from django.middleware.security import SecurityMiddleware as _Security


class InPlaceInAsync:
    """Mixin for a ``MiddlewareMixin`` whose ``process_request`` does no I/O and whose
    ``process_response`` does none unless :meth:`response_needs_thread` says so."""

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)  # type: ignore[attr-defined]
        if hasattr(self, "process_response"):
            if self.response_needs_thread(request, response):
                # The same per-request thread the view's ORM calls ran in (thread_sensitive).
                process_response = sync_to_async(self.process_response, thread_sensitive=True)
                response = await process_response(request, response)
            else:
                response = self.process_response(request, response)
        return response


class SecurityMiddleware(InPlaceInAsync, _Security):
    pass


class CommonMiddleware(InPlaceInAsync, _Common):
    pass


class XFrameOptionsMiddleware(InPlaceInAsync, _XFrameOptions):
    pass


class AuthenticationMiddleware(InPlaceInAsync, _Authentication):
    """Sets lazy ``request.user`` / ``request.auser``: the user is loaded on first use."""


class SessionMiddleware(InPlaceInAsync, _Session):
    """The session is loaded lazily; it is written only if it was used (or on every request when
    ``SESSION_SAVE_EVERY_REQUEST``), and then the response goes through a thread."""

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session: Any = getattr(request, "session", None)
        return session is not None and (session.accessed or settings.SESSION_SAVE_EVERY_REQUEST)


class MessageMiddleware(InPlaceInAsync, _Messages):
    """Stored messages are read or written (possibly in the session) only if the request used
    them or added one."""

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage: Any = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class CsrfViewMiddleware(InPlaceInAsync, _Csrf):
    """Reads and sets the CSRF cookie; a secret kept in the session means I/O, so then every hook
    goes through a thread as Django does it."""

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if iscoroutinefunction(self) and not settings.CSRF_USE_SESSIONS:
            # The handler sends a sync process_view through a thread; an async one it awaits.
            self.process_view = self._process_view_in_place  # type: ignore[method-assign]

    async def _process_view_in_place(
        self, request: HttpRequest, callback: Any, callback_args: Any, callback_kwargs: Any
    ) -> HttpResponseBase | None:
        return _Csrf.process_view(self, request, callback, callback_args, callback_kwargs)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if settings.CSRF_USE_SESSIONS:
            return await _Csrf.__acall__(self, request)
        return await super().__acall__(request)


IN_PLACE: dict[str, str] = {
    "django.middleware.security.SecurityMiddleware": "fimone.middleware.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware": "fimone.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware": "fimone.middleware.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware": "fimone.middleware.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware": "fimone.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware": "fimone.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware": "fimone.middleware.XFrameOptionsMiddleware",
}
"""Stock middleware (as ``settings.MIDDLEWARE`` names them) → the subclass an ASGI handler runs."""

_loading = threading.Lock()


def in_place(middleware: list[str]) -> list[str]:
    """``middleware`` with each stock class that has an in-place subclass replaced by it, in order."""
    return [IN_PLACE.get(path, path) for path in middleware]


class LoadsInPlaceMiddleware:
    """Handler mixin: builds the middleware chain from ``settings.MIDDLEWARE`` with each stock class
    swapped for its in-place subclass.

    Django's ``load_middleware`` reads the list from settings, so the swapped list stands in for it
    while the chain is built (once per handler, at start-up), under a lock, and the configured list
    is put back whatever happens.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        with _loading:
            configured = settings.MIDDLEWARE
            settings.MIDDLEWARE = in_place(list(configured))
            try:
                super().load_middleware(is_async)  # type: ignore[misc]
            finally:
                settings.MIDDLEWARE = configured


class InPlaceASGIHandler(LoadsInPlaceMiddleware, ASGIHandler):
    """Django's ASGI handler, running the in-place middleware (``fimone.asgi`` serves it)."""
