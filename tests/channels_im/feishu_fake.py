"""A fake Feishu for tests: the open platform's HTTP API on 127.0.0.1, and the signed, encrypted
callbacks Feishu posts when someone clicks a card button.

The server speaks the wire format of ``docs/protocols.md`` (tenant token, message create and
patch), records every request, and can be told to misbehave: HTTP 500s, rate limits, refusals
with a non-zero ``code``, or hanging past the client's timeout.

The callback side encrypts with PyCryptodome (the SDK's own dependency), not with the
``cryptography`` package our provider uses, so a fixture and our decryption never share code.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from Crypto.Cipher import AES

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
MESSAGES_PATH = "/open-apis/im/v1/messages"
CARD_MAX_BYTES = 30 * 1024

RATE_LIMITED = b'{"code": 99991400, "msg": "request trigger frequency limit"}'
#: Fault modes for :meth:`FakeFeishu.fail_next` / :attr:`FakeFeishu.always`.
FAULTS = {
    "500": (500, "text/html", b"<html><body>500 Internal Server Error</body></html>"),
    "503-json": (503, "application/json", b'{"code": 1500, "msg": "internal error"}'),
    "429": (429, "application/json", RATE_LIMITED),
    "400-rate-limited": (400, "application/json", RATE_LIMITED),  # older APIs answer 400
    "busy": (400, "application/json", b'{"code": 11232, "msg": "system busy, frequency limited"}'),
    "bot-not-in-chat": (400, "application/json", b'{"code": 230002, "msg": "Bot is not in the chat"}'),
    "no-permission": (400, "application/json", b'{"code": 99991672, "msg": "Access denied"}'),
}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    fault: str | None = None

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def card(self) -> dict[str, Any]:
        """The card a message create / patch carried."""
        return json.loads(self.json["content"])


@dataclass
class Message:
    message_id: str
    chat_id: str
    uuid: str
    card: dict[str, Any]
    patches: list[dict[str, Any]] = field(default_factory=list)


class FakeFeishu:
    """The Feishu open platform for one app, on an ephemeral loopback port.

    Use as a context manager, or :meth:`start` / :meth:`stop`. ``url`` is the ``domain`` to
    configure. Faults apply to the IM endpoints (message create and patch); ``token_code``
    makes the token endpoint refuse the credentials.
    """

    def __init__(
        self, *, app_id: str | None = None, app_secret: str | None = None, hang_seconds: float = 1.5
    ):
        self.app_id = app_id or f"cli_{uuid.uuid4().hex[:16]}"  # unique: the SDK caches tokens per app id
        self.app_secret = app_secret or secrets.token_urlsafe(16)
        self.hang_seconds = hang_seconds
        self.keys = AppKeys.generate(self.app_id)
        self.requests: list[Recorded] = []
        self.messages: dict[str, Message] = {}
        self.always: str | None = None
        self.token_code = 0
        self._faults: deque[str] = deque()
        self._tokens: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- control ----------------------------------------------------------------------------------

    def start(self) -> FakeFeishu:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        # A short poll interval: shutdown() waits for one, and every test stops a server.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-feishu", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeFeishu:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail_next(self, *modes: str) -> None:
        """Answer the next IM calls with these faults, in order (``hang`` or a :data:`FAULTS` key)."""
        for mode in modes:
            assert mode == "hang" or mode in FAULTS, mode
        with self._lock:
            self._faults.extend(modes)

    def revoke_tokens(self) -> None:
        """Invalidate every tenant token issued so far, as Feishu does when an app secret is reset."""
        with self._lock:
            self._tokens.clear()

    # --- what happened ----------------------------------------------------------------------------

    def _matching(self, method: str, prefix: str, *, ok: bool) -> list[Recorded]:
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == method and r.path.startswith(prefix) and (not ok or r.fault is None)
            ]

    @property
    def token_requests(self) -> list[Recorded]:
        return self._matching("POST", TOKEN_PATH, ok=False)

    @property
    def creates(self) -> list[Recorded]:
        """Message creates answered normally."""
        return self._matching("POST", MESSAGES_PATH, ok=True)

    @property
    def patches(self) -> list[Recorded]:
        """Message patches answered normally."""
        return self._matching("PATCH", MESSAGES_PATH + "/", ok=True)

    @property
    def im_calls(self) -> list[Recorded]:
        """Every IM call, faulted or not."""
        return self._matching("POST", MESSAGES_PATH, ok=False) + self._matching(
            "PATCH", MESSAGES_PATH, ok=False
        )

    # --- the API ----------------------------------------------------------------------------------

    def _next_fault(self) -> str | None:
        with self._lock:
            return self._faults.popleft() if self._faults else self.always

    def handle(self, recorded: Recorded) -> tuple[int, dict[str, Any]] | None:
        """The answer to one request (``None``: hang up without one)."""
        if recorded.method == "POST" and recorded.path == TOKEN_PATH:
            return self._token(recorded)
        if not recorded.path.startswith(MESSAGES_PATH):
            return 404, {"code": 404, "msg": "not found"}
        fault = recorded.fault = self._next_fault()
        if fault == "hang":
            self._stopping.wait(self.hang_seconds)
            return None
        if fault is not None:
            return FAULTS[fault][0], {}  # the body is written raw by the handler
        bearer = recorded.headers.get("Authorization", "").removeprefix("Bearer ")
        with self._lock:
            authorised = bearer in self._tokens
        if not authorised:
            return 400, {"code": 99991663, "msg": "Invalid access token for authorization."}
        if recorded.method == "POST" and recorded.path == MESSAGES_PATH:
            return self._create(recorded)
        if recorded.method == "PATCH":
            return self._patch(recorded, recorded.path.removeprefix(MESSAGES_PATH + "/"))
        return 404, {"code": 404, "msg": "not found"}

    def _token(self, recorded: Recorded) -> tuple[int, dict[str, Any]]:
        body = recorded.json or {}
        if self.token_code:
            return 200, {"code": self.token_code, "msg": "app secret invalid"}
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return 200, {"code": 10014, "msg": "app secret invalid"}
        token = f"t-{uuid.uuid4().hex}"
        with self._lock:
            self._tokens.add(token)
        return 200, {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200}

    def _create(self, recorded: Recorded) -> tuple[int, dict[str, Any]]:
        body = recorded.json or {}
        if recorded.query.get("receive_id_type") != "chat_id" or not str(
            body.get("receive_id", "")
        ).startswith("oc_"):
            return 400, {"code": 230001, "msg": "invalid receive_id"}
        if (
            body.get("msg_type") != "interactive"
            or len(str(body.get("content", "")).encode()) > CARD_MAX_BYTES
        ):
            return 400, {"code": 230025, "msg": "The message content is invalid or too long."}
        with self._lock:
            for message in self.messages.values():  # Feishu de-duplicates by uuid
                if body.get("uuid") and message.uuid == body["uuid"]:
                    return 200, {"code": 0, "msg": "success", "data": {"message_id": message.message_id}}
            message_id = f"om_{next(self._ids):04d}{uuid.uuid4().hex[:12]}"
            self.messages[message_id] = Message(
                message_id, body["receive_id"], str(body.get("uuid", "")), json.loads(body["content"])
            )
        data = {"message_id": message_id, "chat_id": body["receive_id"], "msg_type": "interactive"}
        return 200, {"code": 0, "msg": "success", "data": data}

    def _patch(self, recorded: Recorded, message_id: str) -> tuple[int, dict[str, Any]]:
        card = json.loads((recorded.json or {}).get("content", "null"))
        with self._lock:
            message = self.messages.get(message_id)
            if message is None:
                return 400, {"code": 230011, "msg": "The message was withdrawn or does not exist."}
            if not message.card.get("config", {}).get("update_multi"):
                return 400, {"code": 230099, "msg": "update_multi must be true to update a shared card"}
            message.patches.append(card)
            message.card = card
        return 200, {"code": 0, "msg": "success", "data": {}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _serve(self) -> None:
        fake: FakeFeishu = self.server.fake  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        parts = urlsplit(self.path)
        recorded = Recorded(
            method=self.command,
            path=parts.path,
            query={k: v[-1] for k, v in parse_qs(parts.query).items()},
            headers=dict(self.headers.items()),
            body=self.rfile.read(length) if length else b"",
        )
        with fake._lock:
            fake.requests.append(recorded)
        answer = fake.handle(recorded)
        if answer is None:
            self.close_connection = True
            return
        status, payload = answer
        if recorded.fault is not None:
            _, content_type, raw = FAULTS[recorded.fault]
        else:
            content_type, raw = "application/json; charset=utf-8", json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("X-Tt-Logid", f"fake-{uuid.uuid4().hex[:8]}")
        self.end_headers()
        self.wfile.write(raw)

    do_POST = do_PATCH = do_GET = _serve


# --- the callback side -------------------------------------------------------------------------


@dataclass(frozen=True)
class AppKeys:
    """What the Feishu developer console shows for an app's event subscription."""

    app_id: str
    verification_token: str
    encrypt_key: str

    @classmethod
    def generate(cls, app_id: str | None = None) -> AppKeys:
        return cls(
            app_id=app_id or f"cli_{uuid.uuid4().hex[:16]}",
            verification_token=secrets.token_urlsafe(24),
            encrypt_key=secrets.token_urlsafe(24),
        )


def encrypt(encrypt_key: str, plaintext: bytes) -> str:
    """Feishu's encryption: base64(iv + AES-256-CBC(sha256(key), iv, PKCS#7(plaintext)))."""
    iv = os.urandom(16)
    pad = 16 - len(plaintext) % 16
    cipher = AES.new(hashlib.sha256(encrypt_key.encode()).digest(), AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(plaintext + bytes([pad]) * pad)).decode()


def sign(*, encrypt_key: str, timestamp: str, nonce: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def click_event(
    keys: AppKeys,
    *,
    request_id: str,
    decision: str,
    open_id: str,
    event_id: str | None = None,
    form_value: dict[str, Any] | None = None,
    message_id: str = "om_unknown",
    token: str | None = None,
) -> dict[str, Any]:
    """A ``card.action.trigger`` (schema 2.0) callback for a click on one of our buttons."""
    action: dict[str, Any] = {
        "value": {"request_id": request_id, "decision": decision},
        "tag": "button",
        "name": decision,
    }
    if form_value is not None:
        action["form_value"] = form_value
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id or uuid.uuid4().hex,
            "token": keys.verification_token if token is None else token,
            "create_time": str(int(time.time() * 1000)),
            "event_type": "card.action.trigger",
            "tenant_key": "tenant-acme",
            "app_id": keys.app_id,
        },
        "event": {
            "operator": {"tenant_key": "tenant-acme", "open_id": open_id, "union_id": f"on_{open_id[3:]}"},
            "token": f"c-{uuid.uuid4().hex}",  # the card-update token, not the verification token
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": "oc_approvals"},
        },
    }


def url_check(
    keys: AppKeys, *, challenge: str = "challenge-1234", token: str | None = None
) -> dict[str, Any]:
    return {
        "challenge": challenge,
        "token": keys.verification_token if token is None else token,
        "type": "url_verification",
    }


def signed_body(
    payload: dict[str, Any] | bytes,
    *,
    encrypt_key: str,
    encrypted: bool = True,
    timestamp: int | None = None,
    nonce: str | None = None,
    signed: bool = True,
) -> tuple[bytes, dict[str, str]]:
    """The exact body and headers Feishu would post for ``payload``."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    body = json.dumps({"encrypt": encrypt(encrypt_key, raw)}).encode() if encrypted else raw
    if not signed:
        return body, {}
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    nonce = nonce or secrets.token_hex(8)
    headers = {
        "X-Lark-Request-Timestamp": stamp,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": sign(encrypt_key=encrypt_key, timestamp=stamp, nonce=nonce, body=body),
    }
    return body, headers


def configure_channel(
    organization: Any,
    *,
    fake: FakeFeishu | None = None,
    keys: AppKeys | None = None,
    name: str = "Feishu approvals",
    is_default: bool = True,
    **settings: Any,
) -> Any:
    """A Feishu ``ChannelConfig`` of ``organization`` for this app, posting to ``fake`` (if given).
    Tests of a hanging Feishu pass ``timeout=0.5`` so each hang costs little; others keep the
    default, so a busy test machine cannot turn a slow answer into a failed delivery."""
    from approvals.models import ChannelConfig

    keys = keys or (fake.keys if fake is not None else AppKeys.generate())
    options = {"chat_id": "oc_approvals", **settings}
    if fake is not None:
        options.setdefault("domain", fake.url)
    return ChannelConfig.objects.create(
        organization=organization,
        kind="feishu",
        name=name,
        is_default=is_default,
        secrets={
            "app_id": keys.app_id,
            "app_secret": fake.app_secret if fake is not None else "app-secret",
            "verification_token": keys.verification_token,
            "encrypt_key": keys.encrypt_key,
        },
        settings_json=options,
    )


# --- reading cards -------------------------------------------------------------------------------


def card_elements(card: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every element of a card JSON 2.0, nested ones (columns) included."""
    stack = list(card["body"]["elements"])
    while stack:
        element = stack.pop(0)
        yield element
        stack.extend(element.get("elements", []))
        stack.extend(element.get("columns", []))


def card_buttons(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in card_elements(card) if e["tag"] == "button"]


def card_texts(card: dict[str, Any]) -> list[str]:
    """The plain-text lines of a card (its ``div`` elements)."""
    return [e["text"]["content"] for e in card_elements(card) if e["tag"] == "div"]


def card_markdown(card: dict[str, Any]) -> list[str]:
    return [e["content"] for e in card_elements(card) if e["tag"] == "markdown"]


def keys_of(config: Any) -> AppKeys:
    """The app keys a Feishu channel configuration holds."""
    secrets = config.secrets
    return AppKeys(secrets["app_id"], secrets["verification_token"], secrets["encrypt_key"])
