"""ASGI entry point: HTTP through Django (static files from ``STATIC_ROOT`` before it), WebSocket
through Channels behind session auth and an allowed-hosts origin check."""

from __future__ import annotations

import asyncio
import contextvars
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fimone.settings")
django.setup(set_prefix=False)  # must run before importing anything that uses models

from fimone.middleware import InPlaceASGIHandler  # noqa: E402

# Django's ASGI handler, with the stock middleware run in place (fimone/middleware.py).
django_asgi_app = InPlaceASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from agents.executors import embedded  # noqa: E402
from approvals.sweeper import sweep_forever  # noqa: E402
from fimone.routing import websocket_urlpatterns  # noqa: E402
from fimone.static import StaticFiles  # noqa: E402
from mcp_gateway.server import GatewayApp  # noqa: E402


class McpFirst:
    """``/mcp/…`` to the MCP gateway (its own protocol and token auth), the rest to ``app``."""

    def __init__(self, app: object) -> None:
        self.app = app
        self.gateway = GatewayApp()

    async def __call__(self, scope: dict, receive: object, send: object) -> None:
        if scope.get("path", "").startswith("/mcp/"):
            await self.gateway(scope, receive, send)
        else:
            await self.app(scope, receive, send)  # type: ignore[operator]


class BindServerLoop:
    """Lets embedded runs execute as tasks on the server's own event loop (so they share it with
    the WebSocket consumers that stream them)."""

    def __init__(self, app: ProtocolTypeRouter) -> None:
        self.app = app
        self.bound = False

    async def __call__(self, scope: dict, receive: object, send: object) -> None:
        if not self.bound:
            self.bound = True
            embedded.bind_loop(asyncio.get_running_loop())
            if settings.RUN_EXECUTOR == "embedded":
                # The embedded stand-in for Celery beat; kept referenced so it is not collected.
                self.sweeper = asyncio.get_running_loop().create_task(
                    sweep_forever(settings.APPROVAL_SWEEP_SECONDS), context=contextvars.Context()
                )
        await self.app(scope, receive, send)


application = BindServerLoop(
    ProtocolTypeRouter(
        {
            "http": McpFirst(
                StaticFiles(
                    django_asgi_app,
                    root=settings.STATIC_ROOT,
                    url=settings.STATIC_URL,
                    refresh=settings.DEBUG,
                )
            ),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)

from fimone.gc_tuning import tune_for_server  # noqa: E402

tune_for_server(settings.GC_THRESHOLD)
