"""Shared by the tool tests: a real local HTTP service that records what it receives (``service``),
an HTTP connector pointing at it (``connector``), ``http_tool`` to build an action's tool, and
``call`` to run any tool as a worker would."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agents.models import Connector, ConnectorAction
from agents.tools.base import Tool
from agents.tools.http import MAX_TEXT_CHARS, HttpActionTool
from tests.personas import Personas, make_action, make_http_connector

# --- a real HTTP service ----------------------------------------------------------------------------


@dataclass
class SeenRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


# route (under /api/) → status, content type, body; anything else answers 200 {"ok": true}.
ROUTES: dict[str, tuple[int, str, bytes]] = {
    "text": (200, "text/plain; charset=utf-8", b"plain words"),
    "long-text": (200, "text/html", b"x" * (MAX_TEXT_CHARS + 5_000)),
    "broken": (500, "text/plain", b"Internal error:\n   the ledger is locked\n"),
    "missing": (404, "application/json", b'{"error": "not_found"}'),
    "empty": (204, "text/plain", b""),
}


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.seen: list[SeenRequest] = []
        self.release = threading.Event()  # set at teardown so a "slow" handler stops waiting

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (the timeout test) is expected: no traceback on stderr."""


class RecordingHandler(BaseHTTPRequestHandler):
    server: RecordingServer
    protocol_version = "HTTP/1.1"

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        split = urlsplit(self.path)
        self.server.seen.append(
            SeenRequest(
                method=self.command,
                path=split.path,
                query=parse_qs(split.query),
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
            )
        )
        route = split.path.removeprefix("/api/")
        if route == "slow":
            self.server.release.wait(10)
        status, content_type, payload = ROUTES.get(route, (200, "application/json", b'{"ok": true}'))
        if route == "echo-auth":  # a careless service quoting the credentials it refused
            quoted = (
                f"rejected {self.headers.get('Authorization')} and token {self.headers.get('X-Demo-Token')}"
            )
            status, content_type, payload = 401, "text/plain", quoted.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads ``server.seen`` instead."""


@pytest.fixture
def service() -> Iterator[RecordingServer]:
    server = RecordingServer()
    # A short poll so shutdown() at teardown returns at once instead of after the default 0.5 s.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


SECRET_HEADERS = {"Authorization": "Bearer s3cret-value", "X-Demo-Token": "t0ken"}


def http_tool(connector: Connector, name: str, *, method: str = "GET", path: str = "", **fields: Any) -> Tool:
    """Build the tool the way the toolbox does: from rows read back (secrets decrypted)."""
    action = make_action(connector, name, method=method, path=path, **fields)
    return HttpActionTool(action=ConnectorAction.objects.select_related("connector").get(pk=action.pk))


def call(tool: Tool, args: dict[str, Any]) -> Any:
    """Run a tool in a fresh event loop, as a run's worker would (the test itself stays sync so
    it may use the ORM to build the tool)."""
    return asyncio.run(tool.run(args))


@pytest.fixture
def connector(personas: Personas, service: RecordingServer) -> Connector:
    return make_http_connector(
        personas.org, service.base_url, secrets={"headers": SECRET_HEADERS}, timeout_seconds=2.0
    )
