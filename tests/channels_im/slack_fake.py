"""A fake Slack for tests: the Web API on 127.0.0.1, and clicks signed the way Slack signs them.

:class:`FakeSlack` serves ``chat.postMessage`` and ``chat.update`` (JSON or form bodies, as
``slack_sdk`` sends them) and ``conversations.history`` (a GET), keeps the posted messages with
their metadata, records every request, and can be told to fail the next posts and updates: HTTP
500, a hang past the client's timeout, a post taken but whose answer is lost, an ``ok: false``
error, or ``ratelimited`` (HTTP 429 with ``Retry-After``). Like Slack it checks the bot token, the channel
and Block Kit's size limits. :func:`click_body` and :func:`signed_headers` build an interactivity
request; the signature comes from ``slack_sdk``'s own ``SignatureVerifier``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from slack_sdk.signature import SignatureVerifier

from approvals.models import ChannelConfig

BOT_TOKEN = "xoxb-fake-bot-token"
SIGNING_SECRET = "fake-signing-secret-8f2b"
CHANNEL = "C0APPROVALS"

HTTP_500 = "http_500"
HANG = "hang"
LOST = "lost"
"""The call is carried out (a post is stored), then the answer never comes: a lost answer."""
FAILING_METHODS = ("chat.postMessage", "chat.update")
"""The calls :meth:`FakeSlack.fail_next` applies to, unless told otherwise."""


def api_error(code: str) -> tuple[str, str]:
    """A failure answered like Slack does: HTTP 200 with ``{"ok": false, "error": code}``."""
    return ("error", code)


def ratelimited(retry_after: int = 1) -> tuple[str, int]:
    """HTTP 429 with ``Retry-After`` and ``{"ok": false, "error": "ratelimited"}``."""
    return ("ratelimited", retry_after)


@dataclass(frozen=True)
class Recorded:
    """One request the fake received, with its body decoded (form values as strings, ``blocks``
    parsed from JSON in either encoding)."""

    method: str
    headers: dict[str, str]
    content_type: str
    body: dict[str, Any]


@dataclass
class FakeSlack:
    """The Slack Web API at :attr:`api_url`. Use as a context manager (it serves from a thread)."""

    token: str = BOT_TOKEN
    channels: tuple[str, ...] = (CHANNEL,)
    hang_seconds: float = 5.0
    requests: list[Recorded] = field(default_factory=list)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._failures: deque[Any] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval: stopping the fake waits for at most one poll.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()  # let hung handlers finish
        self._server.shutdown()
        self._server.server_close()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/"

    def fail_next(self, *failures: Any, methods: tuple[str, ...] = FAILING_METHODS) -> None:
        """Answer the next calls of ``methods`` with these failures, in order (then normally)."""
        with self._lock:
            self._failures.extend((failure, methods) for failure in failures)

    def channel_config(self, organization: Any, **fields: Any) -> ChannelConfig:
        """A Slack :class:`ChannelConfig` of ``organization`` pointing at this fake (timeout 0.5 s)."""
        fields.setdefault("name", "Approvals on Slack")
        fields.setdefault("secrets", {"bot_token": self.token, "signing_secret": SIGNING_SECRET})
        settings = {"channel": self.channels[0], "api_url": self.api_url, "timeout": 0.5}
        fields.setdefault("settings_json", settings)
        return ChannelConfig.objects.create(organization=organization, kind="slack", **fields)

    def calls(self, method: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == method]

    # --- what the fake does with one call ------------------------------------------------------

    def _record(self, method: str, headers: dict[str, str], raw: bytes) -> Recorded:
        content_type = headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type == "application/json":
            body = json.loads(raw or b"{}")
        else:
            body = {key: values[-1] for key, values in parse_qs(raw.decode()).items()}
            if isinstance(body.get("blocks"), str):
                body["blocks"] = json.loads(body["blocks"])
        recorded = Recorded(method, headers, content_type, body)
        with self._lock:
            self.requests.append(recorded)
        return recorded

    def _next_failure(self, method: str) -> Any:
        with self._lock:
            if not self._failures or method not in self._failures[0][1]:
                return None
            return self._failures.popleft()[0]

    def _answer(self, call: Recorded) -> dict[str, Any]:
        authorization = call.headers.get("Authorization", "")
        if not authorization:
            return {"ok": False, "error": "not_authed"}
        if authorization != f"Bearer {self.token}":
            return {"ok": False, "error": "invalid_auth"}
        if call.method == "chat.postMessage":
            return self._post_message(call.body)
        if call.method == "chat.update":
            return self._update(call.body)
        if call.method == "conversations.history":
            return self._history(call.body)
        return {"ok": False, "error": "unknown_method"}

    def _post_message(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = body.get("channel")
        if channel not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        problem = _message_problem(body)
        if problem:
            return {"ok": False, "error": problem}
        with self._lock:
            n = len(self.messages) + 1
            ts = f"{int(time.time())}.{n:06d}"  # like Slack: seconds now, unique per message
            message = {"text": body.get("text", ""), "blocks": body.get("blocks", []), "ts": ts}
            metadata = body.get("metadata")
            if metadata:
                message["metadata"] = json.loads(metadata) if isinstance(metadata, str) else metadata
            self.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        key = (body.get("channel"), body.get("ts"))
        problem = _message_problem(body)
        if problem:
            return {"ok": False, "error": problem}
        with self._lock:
            if key not in self.messages:
                return {"ok": False, "error": "message_not_found"}
            message = self.messages[key]
            message.update(text=body.get("text", ""), blocks=body.get("blocks", []))
        return {"ok": True, "channel": key[0], "ts": key[1], "text": message["text"], "message": message}

    def _history(self, query: dict[str, Any]) -> dict[str, Any]:
        """Newest first, after ``oldest``; metadata only with ``include_all_metadata``."""
        channel = query.get("channel")
        if channel not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        oldest = float(query.get("oldest") or 0)
        with_metadata = str(query.get("include_all_metadata")).lower() in ("1", "true")
        with self._lock:
            found = [
                {k: v for k, v in message.items() if with_metadata or k != "metadata"}
                for (where, ts), message in self.messages.items()
                if where == channel and float(ts) > oldest
            ]
        found.sort(key=lambda message: float(message["ts"]), reverse=True)
        start, limit = int(query.get("cursor") or 0), int(query.get("limit") or 100)
        page, more = found[start : start + limit], len(found) > start + limit
        answer: dict[str, Any] = {"ok": True, "messages": page, "has_more": more}
        if more:  # Slack's cursors are opaque; the fake's is the next offset
            answer["response_metadata"] = {"next_cursor": str(start + limit)}
        return answer


def _message_problem(body: dict[str, Any]) -> str | None:
    """The error Slack answers for a message it would refuse (Block Kit limits), else ``None``."""
    blocks = body.get("blocks")
    if not body.get("text") and not blocks:
        return "no_text"
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "invalid_blocks"
    for block in blocks:
        kind = block.get("type")
        text = (block.get("text") or {}).get("text", "")
        if (kind == "header" and len(text) > 150) or (kind == "section" and len(text) > 3000):
            return "invalid_blocks"
        if any(len(f.get("text", "")) > 2000 for f in block.get("fields", [])):
            return "invalid_blocks"
        if kind == "actions" and any(len(e.get("value", "")) > 2000 for e in block.get("elements", [])):
            return "invalid_blocks"
    return None


def _handler_for(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            call = fake._record(path.removeprefix("/api/"), dict(self.headers.items()), b"")
            call.body.update({key: values[-1] for key, values in parse_qs(query).items()})
            failure = fake._next_failure(call.method)
            if isinstance(failure, tuple) and failure[0] == "error":
                self._send(200, json.dumps({"ok": False, "error": failure[1]}).encode(), "application/json")
            else:
                self._send(200, json.dumps(fake._answer(call)).encode(), "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            method = self.path.split("?")[0].removeprefix("/api/")
            call = fake._record(method, dict(self.headers.items()), raw)
            failure = fake._next_failure(method)
            if failure == LOST:
                fake._answer(call)
                fake._release.wait(fake.hang_seconds)
                return
            if failure == HANG:
                # Answer nothing until the client has long given up (or the fake stops).
                fake._release.wait(fake.hang_seconds)
                return
            if failure == HTTP_500:
                self._send(500, b"<html><body>Internal Server Error</body></html>", "text/html")
            elif isinstance(failure, tuple) and failure[0] == "ratelimited":
                body = json.dumps({"ok": False, "error": "ratelimited"}).encode()
                self._send(429, body, "application/json", {"Retry-After": str(failure[1])})
            elif isinstance(failure, tuple) and failure[0] == "error":
                self._send(200, json.dumps({"ok": False, "error": failure[1]}).encode(), "application/json")
            else:
                self._send(200, json.dumps(fake._answer(call)).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None):
            try:
                self.send_response(status)
                self.send_header("Content-Type", f"{content_type}; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up first
                pass

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler


# --- clicks, as Slack sends them -----------------------------------------------------------------


def click_payload(
    *,
    request_id: str,
    user_id: str,
    action_id: str = "approve",
    action_ts: str | None = None,
    channel: str = CHANNEL,
    message_ts: str = "1700000001.000001",
) -> dict[str, Any]:
    """A ``block_actions`` payload for a click on one of the card's buttons."""
    action_ts = action_ts or f"{time.time():.6f}"
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_id.lower(), "team_id": "T0FIMONE"},
        "api_app_id": "A0FIMONE",
        "team": {"id": "T0FIMONE", "domain": "fimone"},
        "channel": {"id": channel, "name": "approvals"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
        "trigger_id": f"{uuid.uuid4().int}",
        "response_url": f"https://hooks.slack.com/actions/T0FIMONE/{uuid.uuid4().hex}",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "fimone_approval",
                "value": request_id,
                "action_ts": action_ts,
            }
        ],
    }


def click_body(**payload: Any) -> bytes:
    """The form-encoded body Slack posts for a click (see :func:`click_payload` for arguments)."""
    return urlencode({"payload": json.dumps(click_payload(**payload))}, quote_via=quote).encode()


def signed_headers(
    body: bytes, *, secret: str = SIGNING_SECRET, timestamp: int | str | None = None
) -> dict[str, str]:
    """``X-Slack-Request-Timestamp`` and ``X-Slack-Signature`` for ``body``, signed by slack_sdk."""
    timestamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": str(signature)}
