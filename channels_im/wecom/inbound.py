"""Verifying, then parsing, a WeCom callback: the URL check (GET) or a template-card click (POST).

In this order: the ``msg_signature`` over (token, timestamp, nonce, Encrypt) in constant time, the
timestamp window, the decryption with the EncodingAESKey and its receive_id (our corp id), then —
for a click — the addressee (corp id, agent id), the event (``template_card_event``), the button
and its card, and the ``msg_signature`` against replays. No XML parser sees a byte that is not
authenticated: the ``Encrypt`` field is cut out of the envelope by a strict pattern, and only the
decrypted plaintext is parsed (with no DTD allowed). Never raises on hostile input.
"""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from approvals.channel_contract import CallbackResult
from channels_im.verification import first_delivery, read_body, replay_key, window_problem
from channels_im.wecom import crypto
from channels_im.wecom.cards import BUTTON_KEY, task_id
from channels_im.wecom.config import WecomConfigError, WecomSettings, wecom_settings

log = logging.getLogger(__name__)

MAX_CALLBACK_BYTES = 64 * 1024
"""A click is about a kilobyte; anything far bigger is not WeCom."""
MAX_PARAM_CHARS = 4096
_ENVELOPE_ENCRYPT = re.compile(rb"<Encrypt>\s*<!\[CDATA\[([A-Za-z0-9+/=]{1,60000})\]\]>\s*</Encrypt>")
_USER_ID = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
DECISIONS = {"approve": True, "reject": False}


@dataclass(frozen=True)
class Parsed:
    """What a callback came to. ``verified_click``: an authenticated, complete click by
    ``external_user_id``, whose refusals are answered to the clicker in a private message."""

    result: CallbackResult
    verified_click: bool = False


def _refusal(reason: str, status: int, **kwargs: Any) -> CallbackResult:
    return CallbackResult.refuse(reason, status=status, **kwargs)


def _param(http_request: HttpRequest, name: str) -> str:
    value = http_request.GET.get(name, "")
    return value if len(value) <= MAX_PARAM_CHARS else ""


def parse_callback(config: Any, http_request: HttpRequest) -> Parsed:
    """Verify, then parse. Refusals: 401 unauthenticated (wrong signature, stale timestamp,
    another corp's message), 400 authenticated but not a complete approval click, 413 oversized,
    403 a channel that cannot verify; 200 a replayed click (it changes nothing)."""
    try:
        parsed = _parse(config, http_request)
    except Exception:  # hostile input must never become a 500 (nor a decision)
        log.exception("WeCom callback parsing failed")
        parsed = Parsed(_refusal("malformed callback", 400))
    if parsed.result.kind == "refusal" and not parsed.verified_click:
        log.info("refused a WeCom callback (%s): %s", parsed.result.http_status, parsed.result.reason)
    return parsed


def _open(conf: WecomSettings, http_request: HttpRequest, encrypt: str) -> bytes | CallbackResult:
    """The authenticated plaintext of ``encrypt``, or the refusal saying why there is none."""
    timestamp = _param(http_request, "timestamp")
    if not crypto.signature_matches(
        msg_signature=_param(http_request, "msg_signature"),
        token=conf.token,
        timestamp=timestamp,
        nonce=_param(http_request, "nonce"),
        encrypt=encrypt,
    ):
        return _refusal("wrong msg_signature: not signed with this channel's Token", 401)
    # The timestamp is covered by the signature, so only now does its age mean anything.
    problem = window_problem(timestamp, what="timestamp parameter")
    if problem is not None:
        return _refusal(problem, 401)
    try:
        return crypto.decrypt(key=conf.aes_key, encrypt=encrypt, receive_id=conf.corp_id)
    except crypto.WrongReceiverError:
        return _refusal("the callback is addressed to another WeCom corp", 401)
    except crypto.UndecryptableError as exc:
        return _refusal(f"undecryptable callback: {exc}", 400)


def _parse(config: Any, http_request: HttpRequest) -> Parsed:
    try:
        conf = wecom_settings(config)
    except WecomConfigError:
        return Parsed(_refusal("this WeCom channel cannot verify callbacks: complete its configuration", 403))
    if http_request.method == "GET":
        return Parsed(_url_check(conf, http_request))
    body = read_body(http_request, max_bytes=MAX_CALLBACK_BYTES)
    if body is None:
        return Parsed(_refusal("the callback body is too large", 413))
    found = _ENVELOPE_ENCRYPT.findall(body)
    if len(found) != 1:
        return Parsed(_refusal("the callback carries no (single) Encrypt field", 401))
    encrypt = found[0].decode("ascii")
    opened = _open(conf, http_request, encrypt)
    if isinstance(opened, CallbackResult):
        return Parsed(opened)
    return _click(conf, opened, msg_signature=_param(http_request, "msg_signature"))


def _url_check(conf: WecomSettings, http_request: HttpRequest) -> CallbackResult:
    """WeCom's URL check: answer the decrypted ``echostr`` (it changes nothing)."""
    echostr = _param(http_request, "echostr")
    if not echostr:
        return _refusal("the URL check carries no echostr", 400)
    opened = _open(conf, http_request, echostr)
    if isinstance(opened, CallbackResult):
        return opened
    try:
        challenge = opened.decode("utf-8")
    except UnicodeDecodeError:
        return _refusal("the echostr is not text", 400)
    if not 0 < len(challenge) <= 500:
        return _refusal("the echostr is empty or too long", 400)
    return CallbackResult(kind="challenge", challenge=challenge)


def _fields(plaintext: bytes) -> dict[str, str] | None:
    """The top-level fields of the decrypted ``<xml>`` message (``None`` if it is not one)."""
    if b"<!" in plaintext.replace(b"<![CDATA[", b""):  # no DTD, no entities, even authenticated
        return None
    try:
        root = ET.fromstring(plaintext)  # noqa: S314  (authenticated plaintext, DTDs refused above)
    except ET.ParseError:
        return None
    if root.tag != "xml":
        return None
    return {child.tag: (child.text or "").strip() for child in root if len(child) == 0}


def _click(conf: WecomSettings, plaintext: bytes, *, msg_signature: str) -> Parsed:
    fields = _fields(plaintext)
    if fields is None:
        return Parsed(_refusal("the decrypted callback is not a WeCom XML message", 400))
    if fields.get("ToUserName") != conf.corp_id:
        return Parsed(_refusal("the callback is addressed to another WeCom corp", 401))
    if fields.get("AgentID") != str(conf.agent_id):
        return Parsed(_refusal("the callback is for another WeCom app (AgentID)", 401))
    if fields.get("MsgType") != "event" or fields.get("Event") != "template_card_event":
        event = f"{fields.get('MsgType', '')}/{fields.get('Event', '')}"[:80]
        return Parsed(_refusal(f"unsupported callback {event!r}: only template_card_event is handled", 400))
    user_id = fields.get("FromUserName", "")
    if not _USER_ID.fullmatch(user_id):
        return Parsed(_refusal("the click carries no valid FromUserName (userid)", 400))
    key = BUTTON_KEY.fullmatch(fields.get("EventKey", ""))
    if key is None:
        return Parsed(_refusal("the click names no approval request: is this an approval card?", 400))
    request_id = key["request_id"]
    if fields.get("TaskId") != task_id(request_id):
        return Parsed(
            _refusal("the button does not belong to this request's card", 400, request_id=request_id)
        )
    # From here on the click is authenticated and complete: it is answered to the clicker.
    clicked = {"request_id": request_id, "external_user_id": user_id}
    try:
        first = first_delivery(replay_key("wecom:callback", conf.corp_id, str(conf.agent_id), msg_signature))
    except Exception:  # the replay check is part of verification: fail closed without it
        log.exception("the replay check of a WeCom click failed")
        refusal = _refusal(
            "FIM One could not record this click; please try again in a moment.", 200, **clicked
        )
        return Parsed(refusal, verified_click=True)
    if not first:
        refusal = _refusal(
            "This click was already received (a replayed callback changes nothing).",
            200,
            replayed=True,
            **clicked,
        )
        return Parsed(refusal, verified_click=True)
    decision = CallbackResult(
        kind="decision",
        approve=DECISIONS[key["decision"]],
        extra={"response_code": fields.get("ResponseCode", "")[:200]},
        **clicked,
    )
    return Parsed(decision, verified_click=True)
