"""An ``AsyncClient`` whose handler runs the middleware as the ASGI application does: each stock
class swapped for its in-place subclass (fimone/middleware.py)."""

from __future__ import annotations

from typing import Any

from django.test import AsyncClient
from django.test.client import AsyncClientHandler

from fimone.middleware import LoadsInPlaceMiddleware


class InPlaceAsyncClientHandler(LoadsInPlaceMiddleware, AsyncClientHandler):
    pass


class InPlaceAsyncClient(AsyncClient):
    def __init__(self, enforce_csrf_checks: bool = False, **kwargs: Any) -> None:
        super().__init__(enforce_csrf_checks, **kwargs)
        self.handler = InPlaceAsyncClientHandler(enforce_csrf_checks)
