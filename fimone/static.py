"""Static files from the web processes: ``STATIC_URL`` is served from ``STATIC_ROOT`` (what
``manage.py collectstatic`` gathered, as ``make prod`` runs it) by WhiteNoise, so a deployment of
Daphne servers needs no separate file server for the portal's scripts and styles.

WhiteNoise speaks WSGI; asgiref's adapter runs it in a thread for static requests only. Every other
request goes on to the application untouched, with no middleware added and no thread (a card
click's cost does not change). The development server (``make run``) serves static files itself
before a request reaches this.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from asgiref.wsgi import WsgiToAsgi
from whitenoise import WhiteNoise

log = logging.getLogger(__name__)


def _not_found(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """What WhiteNoise answers for a static path it has no file for."""
    start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
    return [b"Not Found\n"]


class StaticFiles:
    """An ASGI application that answers HTTP requests under ``url`` with the files below ``root``
    and hands every other request to ``app``. ``refresh``: look files up on every request (a
    development machine, where they change); otherwise they are indexed once at start-up."""

    def __init__(self, app: Any, *, root: Path, url: str, refresh: bool = False) -> None:
        self.app = app
        self.prefix = "/" + url.strip("/") + "/"
        files = WhiteNoise(_not_found, autorefresh=refresh, allow_all_origins=False)
        if root.is_dir():
            files.add_files(str(root), prefix=self.prefix)
        elif not refresh:
            log.warning(
                "no static files at %s: the portal's scripts and styles will not load "
                "(run python manage.py collectstatic --no-input)",
                root,
            )
        self.files = WsgiToAsgi(files)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            await self.files(scope, receive, send)
        else:
            await self.app(scope, receive, send)
