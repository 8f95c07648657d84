"""The Feishu / Lark channel: cards out through ``lark-oapi``, verified clicks in.

Configuration (:class:`channels_im.models.ChannelConfig`, kind ``feishu``)::

    secrets       = {"app_id", "app_secret", "verification_token", "encrypt_key"}
    settings_json = {"chat_id": "oc_…", "domain": "https://open.feishu.cn", "timeout": 5}

``domain`` is optional (``https://open.larksuite.com`` for Lark; tests point it at a local fake),
so is ``timeout`` (seconds per HTTP call, so a hanging Feishu becomes a :class:`DeliveryError`
rather than a stuck worker). All four secrets are required: without the Encrypt Key a callback
carries no signature and no timestamp, so it could be neither authenticated beyond a static token
nor bounded in time (DESIGN §1.7), and such a channel refuses every click.

Outbound, the SDK is imported lazily: importing it takes seconds, and a callback must be answered
within three (the callback path needs nothing from it). Inbound, :meth:`FeishuChannel.parse_callback`
checks, in this order, the signature over the exact body bytes, the timestamp window, the
decryption, the verification token, and the ``event_id`` against replays, before it reads a single
field of the click.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from django.http import HttpRequest, HttpResponse, JsonResponse

from channels_im import replay
from channels_im.base import CallbackResult, Channel, DeliveryError
from channels_im.cards import card_facts
from channels_im.feishu import crypto
from channels_im.feishu.cards import card_json, connection_check_card, request_card
from channels_im.providers import register_provider
from fimone.parsers import loads as json_loads

if TYPE_CHECKING:
    from lark_oapi import Client
    from lark_oapi.core.model import BaseResponse

    from approvals.services import DecisionOutcome

log = logging.getLogger(__name__)

R = TypeVar("R", bound="BaseResponse")

DEFAULT_DOMAIN = "https://open.feishu.cn"
DEFAULT_TIMEOUT_SECONDS = 5.0
MAX_TIMEOUT_SECONDS = 30.0
#: Callbacks signed further than this from now are refused; event ids are remembered as long.
CALLBACK_WINDOW_SECONDS = 300
#: A click is a few hundred bytes; anything far bigger is not Feishu.
MAX_CALLBACK_BYTES = 64 * 1024
#: Feishu de-duplicates sends by ``uuid`` (at most 50 characters) for an hour.
UUID_MAX_CHARS = 50
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DECISIONS = {"approve": True, "reject": False}

#: Feishu answers these when a retry may help: internal errors (1500, 1503), the rate limit of its
#: frequency-control guide (99991400, with HTTP 429 — or HTTP 400 from older APIs), its rate
#: limit under system pressure (11232) and the per-chat send limit (230020).
RETRYABLE_CODES = frozenset({1500, 1503, 11232, 99991400, 230020})
#: The tenant token was refused (invalid / expired): forget it so the next attempt fetches a new one.
INVALID_TOKEN_CODES = frozenset({99991663, 99991677})

SECRET_FIELDS = ("app_id", "app_secret", "verification_token", "encrypt_key")


class FeishuConfigError(ValueError):
    """The channel configuration is incomplete or invalid; the message says what to fix."""


@dataclass(frozen=True)
class FeishuSettings:
    app_id: str
    app_secret: str
    verification_token: str
    encrypt_key: str
    chat_id: str
    domain: str
    timeout: float


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _domain(value: Any) -> str:
    domain = _text(value).rstrip("/") or DEFAULT_DOMAIN
    parts = urllib.parse.urlsplit(domain)
    # The app secret and tenant token travel to this origin: https only, except to this machine.
    secure = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)
    if not secure or not parts.hostname or "@" in parts.netloc or parts.path or parts.query or parts.fragment:
        raise FeishuConfigError(
            f"settings_json.domain must be an https origin such as {DEFAULT_DOMAIN} (got {domain!r})"
        )
    return domain


def _timeout(value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise FeishuConfigError(
            f"settings_json.timeout must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:g}], "
            f"got {value!r}"
        )
    return float(value)


def feishu_settings(config: Any) -> FeishuSettings:
    """The validated settings of a Feishu :class:`ChannelConfig`. Raises :class:`FeishuConfigError`
    naming every missing or invalid field."""
    if config is None:
        raise FeishuConfigError("a Feishu channel needs a channel configuration")
    secrets = config.secrets if isinstance(config.secrets, dict) else {}
    options = config.settings_json if isinstance(config.settings_json, dict) else {}
    missing = [f"secrets.{name}" for name in SECRET_FIELDS if not _text(secrets.get(name))]
    if not _text(options.get("chat_id")):
        missing.append("settings_json.chat_id")
    if missing:
        raise FeishuConfigError(f"the Feishu channel {config.name!r} is incomplete: set {', '.join(missing)}")
    chat_id = _text(options["chat_id"])
    if not chat_id.startswith("oc_"):
        raise FeishuConfigError(
            f"settings_json.chat_id must be a Feishu group chat id (oc_…), got {chat_id!r}"
        )
    return FeishuSettings(
        app_id=_text(secrets["app_id"]),
        app_secret=_text(secrets["app_secret"]),
        verification_token=_text(secrets["verification_token"]),
        encrypt_key=_text(secrets["encrypt_key"]),
        chat_id=chat_id,
        domain=_domain(options.get("domain")),
        timeout=_timeout(options.get("timeout")),
    )


# --- the SDK client ------------------------------------------------------------------------------

_clients: dict[tuple[str, str, str, float], Client] = {}
_clients_lock = threading.Lock()


def sdk_client(conf: FeishuSettings) -> Client:
    """The ``lark_oapi.Client`` for this app, built once per process per (app_id, app_secret,
    domain, timeout) and shared by every channel instance and thread.

    The SDK fetches the tenant token on first use and caches it until ten minutes before it
    expires (in a process-global cache keyed by app id); reusing one client per app keeps every
    send on that cached token instead of one token request per call.
    """
    # The secret is part of the key so that rotating it builds a new client; keep only its hash.
    key = (conf.app_id, hashlib.sha256(conf.app_secret.encode()).hexdigest(), conf.domain, conf.timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import lark_oapi

            client = (
                lark_oapi.Client.builder()
                .app_id(conf.app_id)
                .app_secret(conf.app_secret)
                .domain(conf.domain)
                .timeout(conf.timeout)
                .build()
            )
            _clients[key] = client
        return client


def _forget_tenant_token(app_id: str) -> None:
    from lark_oapi.core.token import TokenManager

    # The SDK has no eviction call; an empty, already expired entry makes it fetch a new token.
    TokenManager.cache.set(f"self_tenant_token:{app_id}", "", 0)


def _call(conf: FeishuSettings, operation: str, send: Callable[[], R]) -> R:
    """Run one SDK call and turn every way it can fail into a :class:`DeliveryError`.

    Retryable: timeouts, connection errors, HTTP 5xx / 429, non-JSON answers (a gateway error
    page), rate-limit and internal-error codes, a refused tenant token. Not retryable: refused
    credentials, permissions, a bot outside the chat, invalid content — what only an operator
    can fix.
    """
    import requests
    from lark_oapi.core.exception import ObtainAccessTokenException

    try:
        response = send()
    except requests.Timeout:
        raise DeliveryError(
            f"Feishu did not answer the {operation} within {conf.timeout:g} s", retryable=True
        ) from None
    except requests.RequestException as exc:
        raise DeliveryError(
            f"could not reach Feishu at {conf.domain} for the {operation}: {type(exc).__name__}: "
            f"{str(exc)[:200]}",
            retryable=True,
        ) from None
    except ObtainAccessTokenException as exc:
        raise DeliveryError(
            f"Feishu refused the app credentials (code {exc.code}: {exc.msg}): check app_id and app_secret",
            retryable=exc.code in RETRYABLE_CODES,
        ) from None
    except ValueError:  # the SDK parses every answer as JSON
        raise DeliveryError(
            f"Feishu answered the {operation} with something that is not JSON (a gateway error?)",
            retryable=True,
        ) from None
    except Exception as exc:  # a failure of the SDK itself must still end as a logged attempt
        log.exception("the Feishu SDK failed during the %s", operation)
        raise DeliveryError(
            f"the Feishu {operation} failed: {type(exc).__name__}: {str(exc)[:200]}", retryable=True
        ) from None
    if response.success():
        return response
    status = response.raw.status_code if response.raw is not None else None
    if response.code in INVALID_TOKEN_CODES:
        _forget_tenant_token(conf.app_id)
    retryable = (
        status is None
        or status >= 500
        or status == 429
        or response.code in RETRYABLE_CODES
        or response.code in INVALID_TOKEN_CODES
    )
    raise DeliveryError(
        f"Feishu refused the {operation}: code {response.code}: {response.msg} "
        f"(HTTP {status}, log id {response.get_log_id()})",
        retryable=retryable,
    )


# --- callbacks -----------------------------------------------------------------------------------


def _same_secret(claimed: Any, expected: str) -> bool:
    if not isinstance(claimed, str) or not claimed or not expected:
        return False
    return hmac.compare_digest(claimed.encode("utf-8", "replace"), expected.encode("utf-8", "replace"))


def _timestamp_problem(timestamp: str) -> str | None:
    """Why the signed timestamp is outside the window (``None`` when it is inside)."""
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        return "missing or malformed X-Lark-Request-Timestamp"
    skew = int(timestamp) - time.time()
    if skew < -CALLBACK_WINDOW_SECONDS:
        return f"stale callback: signed {int(-skew)} s ago, outside the {CALLBACK_WINDOW_SECONDS} s window"
    if skew > CALLBACK_WINDOW_SECONDS:
        return (
            f"stale callback: its timestamp is {int(skew)} s in the future, "
            f"outside the {CALLBACK_WINDOW_SECONDS} s window (check the clock)"
        )
    return None


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        value = json_loads(data)
    except ValueError:  # InvalidJSON: not JSON, or nested deeper than any callback is
        raise ValueError("not JSON") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _open_envelope(body: bytes, encrypt_key: str) -> dict[str, Any]:
    """The callback payload: the body itself, or the decryption of its ``encrypt`` field.
    Raises :class:`crypto.UndecryptableError` or ``ValueError``."""
    envelope = _json_object(body)
    if "encrypt" not in envelope:
        return envelope
    ciphertext = envelope["encrypt"]
    if not isinstance(ciphertext, str):
        raise crypto.UndecryptableError("the encrypt field is not a string")
    plaintext = crypto.decrypt(encrypt_key=encrypt_key, ciphertext=ciphertext)
    try:
        return _json_object(plaintext)
    except ValueError:
        raise crypto.UndecryptableError("the decrypted body is not a JSON object") from None


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _short_text(value: Any, limit: int = 200) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit


def _request_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def _event_key(app_id: str, event_id: str) -> str:
    # Hashed: event ids are the sender's text, and cache keys must stay short and plain.
    digest = hashlib.sha256(f"{app_id}\0{event_id}".encode("utf-8", "replace")).hexdigest()
    return f"feishu:event:{digest}"


def _refusal(
    reason: str, status: int, *, request_id: str | None = None, open_id: str = "", **extra: Any
) -> CallbackResult:
    return CallbackResult(
        kind="refusal",
        http_status=status,
        request_id=request_id,
        external_user_id=open_id,
        reason=reason,
        extra=extra,
    )


def _challenge(payload: dict[str, Any], token: str) -> CallbackResult:
    if not _same_secret(payload.get("token"), token):
        return _refusal("wrong verification token", 401)
    challenge = payload.get("challenge")
    if not _short_text(challenge, 500):
        return _refusal("the URL check carries no challenge", 400)
    return CallbackResult(kind="challenge", challenge=challenge)


@register_provider
class FeishuChannel(Channel):
    """Approval cards in a Feishu group chat (one bot app, one chat per configuration)."""

    kind = "feishu"

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        # Set by parse_callback once a click is authenticated and complete: from then on every
        # answer is HTTP 200 with a toast (Feishu shows a generic error for anything else), even
        # when the view refuses the click (unmapped user, unknown request). The view builds one
        # instance per callback, so this never leaks between requests.
        self._verified_click = False

    # --- outbound ---------------------------------------------------------------------------------

    def _settings(self) -> FeishuSettings:
        try:
            return feishu_settings(self.config)
        except FeishuConfigError as exc:
            raise DeliveryError(str(exc), retryable=False) from None

    def _post_card(
        self, conf: FeishuSettings, card: dict[str, Any], *, dedupe_id: str, operation: str
    ) -> str:
        from lark_oapi.api.im.v1 import CreateMessageRequest, CreateMessageRequestBody

        body = (
            CreateMessageRequestBody.builder()
            .receive_id(conf.chat_id)
            .msg_type("interactive")
            .content(card_json(card))
            .uuid(dedupe_id[:UUID_MAX_CHARS])
            .build()
        )
        message = CreateMessageRequest.builder().receive_id_type("chat_id").request_body(body).build()
        client = sdk_client(conf)
        response = _call(conf, operation, lambda: client.im.v1.message.create(message))
        message_id = getattr(response.data, "message_id", None)
        if not isinstance(message_id, str) or not message_id:
            raise DeliveryError(f"Feishu accepted the {operation} but returned no message id", retryable=True)
        return message_id

    def send_interactive_card(self, request: Any, *, maybe_posted: bool = False) -> str:
        """Post the request's card to the chat; return Feishu's ``message_id`` (``om_…``).

        The request id is the message ``uuid``, so a retry after a lost answer returns the same
        message instead of posting a second card (``maybe_posted`` needs nothing more here).
        Raises :class:`DeliveryError`.
        """
        conf = self._settings()
        card = request_card(card_facts(request))
        return self._post_card(conf, card, dedupe_id=str(request.pk), operation="card delivery")

    def update_card(self, request: Any) -> None:
        """PATCH the request's message with its settled card: the outcome line (who, when) and no
        buttons. Raises :class:`DeliveryError`."""
        if not request.external_message_id:
            return
        from lark_oapi.api.im.v1 import PatchMessageRequest, PatchMessageRequestBody

        conf = self._settings()
        content = card_json(request_card(card_facts(request)))
        patch = (
            PatchMessageRequest.builder()
            .message_id(request.external_message_id)
            .request_body(PatchMessageRequestBody.builder().content(content).build())
            .build()
        )
        client = sdk_client(conf)
        _call(conf, "card update", lambda: client.im.v1.message.patch(patch))

    def check_config(self) -> None:
        feishu_settings(self.config)

    def send_test_card(self) -> str:
        """Post a card without buttons proving the app may post to the chat."""
        conf = self._settings()
        return self._post_card(
            conf, connection_check_card(), dedupe_id=f"fimone-test-{uuid.uuid4().hex}", operation="test card"
        )

    # --- inbound ----------------------------------------------------------------------------------

    def parse_callback(self, http_request: HttpRequest) -> CallbackResult:
        """Verify, then parse, a Feishu callback: a click, a URL check, or a refusal. Never raises.

        Refusals: 401 for anything unauthenticated (no / wrong signature, stale timestamp, wrong
        verification token), 400 for an authenticated body that cannot be decrypted or is not a
        complete approval click, 413 for an oversized body. A replayed ``event_id`` is refused with
        200 and an "already handled" toast, and changes nothing.
        """
        try:
            result = self._parse(http_request)
        except Exception:  # hostile input must never become a 500 (nor a decision)
            log.exception("Feishu callback parsing failed")
            result = _refusal("malformed callback", 400)
        if result.kind == "refusal" and not self._verified_click:
            log.info("refused a Feishu callback (%s): %s", result.http_status, result.reason)
        return result

    def _parse(self, http_request: HttpRequest) -> CallbackResult:
        secrets = getattr(self.config, "secrets", None)
        secrets = secrets if isinstance(secrets, dict) else {}
        token, encrypt_key = _text(secrets.get("verification_token")), _text(secrets.get("encrypt_key"))
        if not token or not encrypt_key:
            return _refusal(
                "this Feishu channel cannot verify callbacks: set its verification_token and encrypt_key", 403
            )
        try:
            body = http_request.body
        except Exception:  # RequestDataTooBig: over Django's upload limit
            return _refusal("the callback body is too large", 413)
        if len(body) > MAX_CALLBACK_BYTES:
            return _refusal("the callback body is too large", 413)
        headers = http_request.headers
        signature = headers.get("X-Lark-Signature", "")
        if not signature:
            return self._unsigned(body, token=token, encrypt_key=encrypt_key)
        if not crypto.signature_matches(
            signature=signature,
            timestamp=headers.get("X-Lark-Request-Timestamp", ""),
            nonce=headers.get("X-Lark-Request-Nonce", ""),
            encrypt_key=encrypt_key,
            body=body,
        ):
            return _refusal("wrong signature: the body is not signed with this channel's Encrypt Key", 401)
        # The timestamp is covered by the signature, so only now does its age mean anything.
        problem = _timestamp_problem(headers.get("X-Lark-Request-Timestamp", ""))
        if problem is not None:
            return _refusal(problem, 401)
        try:
            payload = _open_envelope(body, encrypt_key)
        except crypto.UndecryptableError as exc:
            return _refusal(f"undecryptable callback: {exc}", 400)
        except ValueError:
            return _refusal("the callback body is not a JSON object", 400)
        if payload.get("type") == "url_verification":
            return _challenge(payload, token)
        return self._click(payload, token=token, app_id=_text(secrets.get("app_id")))

    def _unsigned(self, body: bytes, *, token: str, encrypt_key: str) -> CallbackResult:
        """Only Feishu's URL check may arrive unsigned (it changes nothing). Every other outcome
        is the same refusal, so that unsigned ciphertexts reveal nothing about their padding."""
        refusal = _refusal("unsigned callback: X-Lark-Signature is required", 401)
        try:
            payload = _open_envelope(body, encrypt_key)
        except ValueError:
            return refusal
        if payload.get("type") != "url_verification":
            return refusal
        result = _challenge(payload, token)
        return result if result.kind == "challenge" else refusal

    def _click(self, payload: dict[str, Any], *, token: str, app_id: str) -> CallbackResult:
        header = payload.get("header")
        if payload.get("schema") != "2.0" or not isinstance(header, dict):
            return _refusal("not a schema 2.0 callback: subscribe to card.action.trigger", 400)
        if not _same_secret(header.get("token"), token):
            return _refusal("wrong verification token", 401)
        if header.get("app_id") not in (None, "", app_id):
            return _refusal("the callback is for another Feishu app", 401)
        if header.get("event_type") != "card.action.trigger":
            return _refusal(f"unsupported event type {str(header.get('event_type'))[:80]!r}", 400)
        event_id = header.get("event_id")
        if not _short_text(event_id):
            return _refusal("the callback carries no event_id", 400)
        open_id = _dig(payload, "event", "operator", "open_id")
        if not _short_text(open_id):
            return _refusal("the click carries no operator open_id", 400)
        value = _dig(payload, "event", "action", "value")
        request_id = _request_id(_dig(value, "request_id"))
        if request_id is None:
            return _refusal("the click names no approval request: is this an approval card?", 400)
        decision = _dig(value, "decision")
        if not isinstance(decision, str) or decision not in DECISIONS:  # may be any JSON value
            return _refusal(
                f"unknown decision {str(decision)[:40]!r}: expected approve or reject",
                400,
                request_id=request_id,
                open_id=open_id,
            )
        reason = _dig(payload, "event", "action", "form_value", "reason")
        reason = reason.strip()[:2000] if isinstance(reason, str) else ""
        # From here on the click is authenticated and complete: answer it with a toast.
        self._verified_click = True
        # Remembered for twice the window: a timestamp may be up to the window in the future.
        try:
            first = replay.first_time(_event_key(app_id, event_id), 2 * CALLBACK_WINDOW_SECONDS)
        except Exception:  # the replay check is part of verification: fail closed without it
            log.exception("the replay check of a Feishu click failed")
            return _refusal(
                "could not check this click against replays: the cache is unavailable",
                200,
                request_id=request_id,
                open_id=open_id,
                message="FIM One could not record this click. Please try again in a moment.",
            )
        if not first:
            return _refusal(
                "replayed callback: this event_id was already handled",
                200,
                request_id=request_id,
                open_id=open_id,
                toast="info",
                message="This click was already handled.",
            )
        return CallbackResult(
            kind="decision",
            request_id=request_id,
            approve=DECISIONS[decision],
            external_user_id=open_id,
            reason=reason,
            extra={"event_id": event_id},
        )

    # --- answers ----------------------------------------------------------------------------------

    def callback_response(self, result: CallbackResult, outcome: DecisionOutcome | None) -> HttpResponse:
        """Challenges get ``{"challenge": …}``; unverified requests a JSON error with their 4xx.
        An authenticated click always gets HTTP 200 (within Feishu's 3 s) with a toast: success
        plus the settled card when the decision was taken, info when the request was already
        settled (with its final card) or the click replayed, error when the clicker may not
        decide it."""
        if result.kind == "challenge":
            return JsonResponse({"challenge": result.challenge})
        if not self._verified_click:
            status = result.http_status if 400 <= result.http_status < 500 else 400
            return JsonResponse({"error": result.reason or "refused"}, status=status)
        if outcome is None:
            return _toast(result.extra.get("toast", "error"), result.extra.get("message") or result.reason)
        if outcome.accepted:
            return _toast("success", outcome.message, card=self._settled_card(outcome))
        if outcome.status in ("refused", "not_found"):
            return _toast("error", outcome.message)
        return _toast("info", outcome.message, card=self._settled_card(outcome))

    def _settled_card(self, outcome: DecisionOutcome) -> dict[str, Any] | None:
        request = outcome.request
        if request is None or request.is_pending:
            return None
        try:
            return request_card(card_facts(request))
        except Exception:  # the toast alone still answers the click; the PATCH follows anyway
            log.exception("could not build the settled card of %s", request.pk)
            return None


def _toast(kind: str, content: str, *, card: dict[str, Any] | None = None) -> JsonResponse:
    answer: dict[str, Any] = {"toast": {"type": kind, "content": content}}
    if card is not None:
        answer["card"] = {"type": "raw", "data": card}
    return JsonResponse(answer)
