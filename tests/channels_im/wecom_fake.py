"""A fake WeCom for tests: the server API on 127.0.0.1, and callbacks encrypted the way WeCom does.

:class:`FakeWecom` serves ``GET /cgi-bin/gettoken``, ``POST /cgi-bin/message/send`` (template cards
and text) and ``POST /cgi-bin/message/update_template_card``. Like WeCom it checks the corp id and
secret, the access token (which it can expire: :meth:`FakeWecom.expire_tokens`), the agent id, the
card's limits and a unique ``task_id``; it swallows an identical message sent again within the
duplicate-check interval (answering the first send's ids), and takes each ``response_code`` once.
It records every call, and can be told to fail the next calls: HTTP 500, a hang past the client's
timeout, a call carried out whose answer is lost, or an ``errcode``.

Callbacks are built by ``wechatpy``'s ``WeChatCrypto`` (:func:`signed_callback`), an independent
implementation of WeCom's scheme: our provider and the fixtures never share crypto code.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode

import xmltodict
from wechatpy.enterprise.crypto import WeChatCrypto

from approvals.models import ChannelConfig
from channels_im.wecom import client as wecom_client

CORP_ID = "ww0fimone0test0corp"
AGENT_ID = 1000002
SECRET = "fake-wecom-app-secret-3d9a"
TOKEN = "FimOneCallbackToken2026"
ENCODING_AES_KEY = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
RECIPIENTS = "april|adam"

HTTP_500 = "http_500"
HANG = "hang"
LOST = "lost"
"""The call is carried out (a card is stored), then the answer never comes: a lost answer."""


def errcode(code: int, message: str = "failed") -> tuple[str, int, str]:
    """A failure answered like WeCom does: HTTP 200 with a non-zero ``errcode``."""
    return ("errcode", code, message)


@dataclass(frozen=True)
class Recorded:
    path: str
    query: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeWecom:
    """The WeCom server API at :attr:`api_base`. Use as a context manager (it serves from a thread)."""

    corp_id: str = CORP_ID
    secret: str = SECRET
    agent_id: int = AGENT_ID
    hang_seconds: float = 3.0
    requests: list[Recorded] = field(default_factory=list)
    cards: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Sent template cards by task_id (updated in place by update_template_card)."""
    notices: list[dict[str, Any]] = field(default_factory=list)
    """Text messages sent (private notices), as sent."""

    def __post_init__(self) -> None:
        self._failures: deque[tuple[Any, tuple[str, ...]]] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._tokens: set[str] = set()
        self._sent: dict[str, dict[str, Any]] = {}  # duplicate check: body JSON → the answer
        self._codes: dict[str, str] = {}  # response_code → task_id, until used
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeWecom:
        # A new WeCom knows none of the tokens the app cached for an earlier fake, which may have
        # had this same port (the cache is keyed by address): forget them, or a reused port makes
        # the app's first call here answer "access_token expired" and send twice.
        with wecom_client._tokens_lock:
            wecom_client._tokens.clear()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def channel_config(self, organization: Any, **fields: Any) -> ChannelConfig:
        """A WeCom :class:`ChannelConfig` of ``organization`` pointing at this fake (timeout 0.5 s)."""
        fields.setdefault("name", "Approvals on WeCom")
        fields.setdefault(
            "secrets", {"secret": self.secret, "token": TOKEN, "encoding_aes_key": ENCODING_AES_KEY}
        )
        fields.setdefault(
            "settings_json",
            {
                "corp_id": self.corp_id,
                "agent_id": self.agent_id,
                "touser": RECIPIENTS,
                "api_base": self.api_base,
                "timeout": 0.5,
            },
        )
        return ChannelConfig.objects.create(organization=organization, kind="wecom", **fields)

    def fail_next(self, *failures: Any, paths: tuple[str, ...] = ("/cgi-bin/message/send",)) -> None:
        with self._lock:
            self._failures.extend((failure, paths) for failure in failures)

    def expire_tokens(self) -> None:
        """Every access token handed out so far is now expired (errcode 42001)."""
        with self._lock:
            self._tokens.clear()

    def calls(self, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # --- what the fake does with one call --------------------------------------------------------

    def _next_failure(self, path: str) -> Any:
        with self._lock:
            if not self._failures or path not in self._failures[0][1]:
                return None
            return self._failures.popleft()[0]

    def _answer(self, call: Recorded) -> dict[str, Any]:
        if call.path == "/cgi-bin/gettoken":
            if call.query.get("corpid") != self.corp_id:
                return {"errcode": 40013, "errmsg": "invalid corpid"}
            if call.query.get("corpsecret") != self.secret:
                return {"errcode": 40001, "errmsg": "invalid credential"}
            token = secrets.token_urlsafe(24)
            with self._lock:
                self._tokens.add(token)
            return {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}
        with self._lock:
            known = call.query.get("access_token") in self._tokens
        if not known:
            return {"errcode": 42001, "errmsg": "access_token expired"}
        if call.body.get("agentid") != self.agent_id:
            return {"errcode": 301002, "errmsg": "not allow operate another agent"}
        if call.path == "/cgi-bin/message/send":
            return self._send(call.body)
        if call.path == "/cgi-bin/message/update_template_card":
            return self._update(call.body)
        return {"errcode": 404, "errmsg": "unknown api"}

    def _send(self, body: dict[str, Any]) -> dict[str, Any]:
        if not any(body.get(name) for name in ("touser", "toparty", "totag")):
            return {"errcode": 40035, "errmsg": "invalid parameter: no receiver"}
        fingerprint = json.dumps(body, sort_keys=True)
        with self._lock:
            if body.get("enable_duplicate_check") and fingerprint in self._sent:
                return self._sent[fingerprint]
        if body.get("msgtype") == "text":
            with self._lock:
                self.notices.append(body)
            return {"errcode": 0, "errmsg": "ok", "msgid": uuid.uuid4().hex}
        if body.get("msgtype") != "template_card":
            return {"errcode": 40008, "errmsg": "invalid message type"}
        card = body.get("template_card") or {}
        problem = card_problem(card)
        if problem:
            return {"errcode": 40058, "errmsg": f"invalid template_card: {problem}"}
        answer = {"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": uuid.uuid4().hex}
        task_id = card.get("task_id")
        with self._lock:
            if card["card_type"] == "button_interaction":
                if task_id in self.cards:
                    return {"errcode": 40124, "errmsg": "task_id already exists"}
                self.cards[task_id] = {"card": card, "recipients": body.get("touser"), "updates": []}
                answer["response_code"] = secrets.token_urlsafe(32)
                self._codes[answer["response_code"]] = task_id
            if body.get("enable_duplicate_check"):
                self._sent[fingerprint] = answer
        return answer

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        code = body.get("response_code")
        with self._lock:
            task_id = self._codes.pop(code, None) if isinstance(code, str) else None
            if task_id is None:
                return {"errcode": 40120, "errmsg": "invalid response_code (unknown or already used)"}
            card = body.get("template_card")
            if not isinstance(card, dict) or card.get("task_id") != task_id:
                return {"errcode": 40058, "errmsg": "invalid template_card"}
            self.cards[task_id]["card"] = card
            self.cards[task_id]["updates"].append(body)
        return {"errcode": 0, "errmsg": "ok", "invaliduser": []}


LIMITS = {("main_title", "title"): 36, ("main_title", "desc"): 44, ("sub_title_text",): 112}


def card_problem(card: dict[str, Any]) -> str | None:
    """Why WeCom would refuse this template card (its documented limits), else ``None``."""
    if card.get("card_type") not in ("button_interaction", "text_notice"):
        return "card_type"
    for path, limit in LIMITS.items():
        value: Any = card
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str) or len(value) > limit:
            return ".".join(path)
    for item in card.get("horizontal_content_list", []):
        if len(item.get("keyname", "")) > 5 or len(item.get("value", "")) > 30:
            return "horizontal_content_list"
    if card["card_type"] == "text_notice":
        return None if isinstance(card.get("card_action"), dict) else "card_action"
    task_id = card.get("task_id")
    if not isinstance(task_id, str) or not 0 < len(task_id) <= 128:
        return "task_id"
    buttons = card.get("button_list")
    if not isinstance(buttons, list) or not 0 < len(buttons) <= 6:
        return "button_list"
    if any(len(b.get("text", "")) > 10 or not 0 < len(b.get("key", "")) <= 1024 for b in buttons):
        return "button_list"
    return None


def _handler_for(fake: FakeWecom) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._handle(b"")

        def do_POST(self) -> None:
            self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def _handle(self, raw: bytes) -> None:
            path, _, query = self.path.partition("?")
            body = json.loads(raw) if raw else {}
            call = Recorded(path, {k: v[-1] for k, v in parse_qs(query).items()}, body)
            with fake._lock:
                fake.requests.append(call)
            failure = fake._next_failure(path)
            if failure == LOST:
                fake._answer(call)
                fake._release.wait(fake.hang_seconds)
                return
            if failure == HANG:
                fake._release.wait(fake.hang_seconds)
                return
            if failure == HTTP_500:
                self._send(500, b"<html>Internal Server Error</html>", "text/html")
            elif isinstance(failure, tuple):
                answer = {"errcode": failure[1], "errmsg": failure[2]}
                self._send(200, json.dumps(answer).encode(), "application/json")
            else:
                self._send(200, json.dumps(fake._answer(call)).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", f"{content_type}; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


# --- callbacks, as WeCom sends them --------------------------------------------------------------


def click_xml(
    *,
    request_id: str,
    user_id: str,
    decision: str = "approve",
    corp_id: str = CORP_ID,
    agent_id: int | str = AGENT_ID,
    task_id: str | None = None,
    event: str = "template_card_event",
) -> str:
    """The plaintext of a ``template_card_event``: a click on one of the card's buttons."""
    task_id = task_id if task_id is not None else "fimone-" + request_id.replace("-", "")
    return (
        f"<xml><ToUserName><![CDATA[{corp_id}]]></ToUserName>"
        f"<FromUserName><![CDATA[{user_id}]]></FromUserName>"
        f"<CreateTime>{int(time.time())}</CreateTime>"
        "<MsgType><![CDATA[event]]></MsgType>"
        f"<Event><![CDATA[{event}]]></Event>"
        f"<EventKey><![CDATA[{decision}:{request_id}]]></EventKey>"
        f"<TaskId><![CDATA[{task_id}]]></TaskId>"
        "<CardType><![CDATA[button_interaction]]></CardType>"
        f"<ResponseCode><![CDATA[{secrets.token_urlsafe(32)}]]></ResponseCode>"
        f"<AgentID>{agent_id}</AgentID></xml>"
    )


def signed_callback(
    plaintext: str,
    *,
    token: str = TOKEN,
    encoding_aes_key: str = ENCODING_AES_KEY,
    corp_id: str = CORP_ID,
    timestamp: int | str | None = None,
    nonce: str | None = None,
) -> tuple[str, bytes]:
    """``(query string, body)`` of a callback carrying ``plaintext``, encrypted and signed by
    wechatpy for ``corp_id``: what WeCom posts to the callback URL."""
    timestamp = str(int(time.time()) if timestamp is None else timestamp)
    nonce = nonce or str(secrets.randbelow(10**10))
    sealed = xmltodict.parse(
        WeChatCrypto(token, encoding_aes_key, corp_id).encrypt_message(plaintext, nonce, timestamp)
    )["xml"]
    query = urlencode({"msg_signature": sealed["MsgSignature"], "timestamp": timestamp, "nonce": nonce})
    body = (
        f"<xml><ToUserName><![CDATA[{corp_id}]]></ToUserName>"
        f"<Encrypt><![CDATA[{sealed['Encrypt']}]]></Encrypt>"
        f"<AgentID><![CDATA[{AGENT_ID}]]></AgentID></xml>"
    ).encode()
    return query, body


def url_check(
    echo: str, *, token: str = TOKEN, encoding_aes_key: str = ENCODING_AES_KEY, corp_id: str = CORP_ID
) -> str:
    """The query string of WeCom's URL check (a GET) whose ``echostr`` decrypts to ``echo``."""
    timestamp, nonce = str(int(time.time())), str(secrets.randbelow(10**10))
    sealed = xmltodict.parse(
        WeChatCrypto(token, encoding_aes_key, corp_id).encrypt_message(echo, nonce, timestamp)
    )["xml"]
    return urlencode(
        {
            "msg_signature": sealed["MsgSignature"],
            "timestamp": timestamp,
            "nonce": nonce,
            "echostr": sealed["Encrypt"],
        }
    )
