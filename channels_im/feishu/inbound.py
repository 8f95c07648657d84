"""Verifying, then parsing, a Feishu callback (``card.action.trigger`` 2.0 or the URL check).

:func:`parse_callback` checks, in this order, the signature over the exact body bytes, the
timestamp window, the decryption, the verification token, and the ``event_id`` against replays,
before it reads a single field of the click. It never raises on hostile input.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from approvals.channel_contract import CallbackResult
from channels_im.feishu import crypto
from channels_im.verification import (
    dig,
    first_delivery,
    first_delivery_async,
    json_object,
    read_body,
    replay_key,
    same_secret,
    text,
    window_problem,
)

log = logging.getLogger(__name__)

#: A click is a few hundred bytes; anything far bigger is not Feishu.
MAX_CALLBACK_BYTES = 64 * 1024
DECISIONS = {"approve": True, "reject": False}


@dataclass(frozen=True)
class Parsed:
    """What a callback came to. ``verified_click``: it is an authenticated, complete click, so
    every answer to it is HTTP 200 with a toast (Feishu shows a generic error for anything else),
    even when the view refuses the click."""

    result: CallbackResult
    verified_click: bool = False


def _refusal(
    reason: str, status: int, *, request_id: str | None = None, open_id: str = "", **extra: Any
) -> CallbackResult:
    return CallbackResult.refuse(
        reason, status=status, request_id=request_id, external_user_id=open_id, **extra
    )


def _short_text(value: Any, limit: int = 200) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit


def _request_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def _open_envelope(body: bytes, encrypt_key: str) -> dict[str, Any]:
    """The callback payload: the body itself, or the decryption of its ``encrypt`` field.
    Raises :class:`crypto.UndecryptableError` or ``ValueError``."""
    envelope = json_object(body)
    if "encrypt" not in envelope:
        return envelope
    ciphertext = envelope["encrypt"]
    if not isinstance(ciphertext, str):
        raise crypto.UndecryptableError("the encrypt field is not a string")
    plaintext = crypto.decrypt(encrypt_key=encrypt_key, ciphertext=ciphertext)
    try:
        return json_object(plaintext)
    except ValueError:
        raise crypto.UndecryptableError("the decrypted body is not a JSON object") from None


def _challenge(payload: dict[str, Any], token: str) -> CallbackResult:
    if not same_secret(payload.get("token"), token):
        return _refusal("wrong verification token", 401)
    challenge = payload.get("challenge")
    if not _short_text(challenge, 500):
        return _refusal("the URL check carries no challenge", 400)
    return CallbackResult(kind="challenge", challenge=challenge)


@dataclass(frozen=True)
class _Unreplayed:
    """A verified, complete click whose ``event_id`` is still to be checked against replays."""

    key: str
    click: CallbackResult

    def checked(self, first: bool | None) -> Parsed:
        """The click, if this is its first delivery (``first``); ``None``: the check failed."""
        request_id, open_id = self.click.request_id, self.click.external_user_id
        if first is None:  # the replay check is part of verification: fail closed without it
            refusal = _refusal(
                "could not check this click against replays: the cache is unavailable",
                200,
                request_id=request_id,
                open_id=open_id,
                message="FIM One could not record this click. Please try again in a moment.",
            )
            return Parsed(refusal, verified_click=True)
        if not first:
            refusal = _refusal(
                "replayed callback: this event_id was already handled",
                200,
                request_id=request_id,
                open_id=open_id,
                toast="info",
                message="This click was already handled.",
            )
            return Parsed(refusal, verified_click=True)
        return Parsed(self.click, verified_click=True)


def parse_callback(config: Any, http_request: HttpRequest) -> Parsed:
    """Verify, then parse, a Feishu callback: a click, a URL check, or a refusal. Never raises.

    Refusals: 401 for anything unauthenticated (no / wrong signature, stale timestamp, wrong
    verification token), 400 for an authenticated body that cannot be decrypted or is not a
    complete approval click, 413 for an oversized body. A replayed ``event_id`` is refused with
    200 and an "already handled" toast, and changes nothing.
    """
    step = _verified(config, http_request)
    if isinstance(step, _Unreplayed):
        try:
            first: bool | None = first_delivery(step.key)
        except Exception:
            log.exception("the replay check of a Feishu click failed")
            first = None
        step = step.checked(first)
    return _logged(step)


async def parse_callback_async(config: Any, http_request: HttpRequest) -> Parsed:
    """:func:`parse_callback` on the event loop: the replay check asks Redis without blocking it
    (the rest is computation on a body already read)."""
    step = _verified(config, http_request)
    if isinstance(step, _Unreplayed):
        try:
            first: bool | None = await first_delivery_async(step.key)
        except Exception:
            log.exception("the replay check of a Feishu click failed")
            first = None
        step = step.checked(first)
    return _logged(step)


def _verified(config: Any, http_request: HttpRequest) -> Parsed | _Unreplayed:
    try:
        return _parse(config, http_request)
    except Exception:  # hostile input must never become a 500 (nor a decision)
        log.exception("Feishu callback parsing failed")
        return Parsed(_refusal("malformed callback", 400))


def _logged(parsed: Parsed) -> Parsed:
    if parsed.result.kind == "refusal" and not parsed.verified_click:
        log.info("refused a Feishu callback (%s): %s", parsed.result.http_status, parsed.result.reason)
    return parsed


def _parse(config: Any, http_request: HttpRequest) -> Parsed | _Unreplayed:
    secrets = getattr(config, "secrets", None)
    secrets = secrets if isinstance(secrets, dict) else {}
    token, encrypt_key = text(secrets.get("verification_token")), text(secrets.get("encrypt_key"))
    if not token or not encrypt_key:
        return Parsed(
            _refusal(
                "this Feishu channel cannot verify callbacks: set its verification_token and encrypt_key", 403
            )
        )
    body = read_body(http_request, max_bytes=MAX_CALLBACK_BYTES)
    if body is None:
        return Parsed(_refusal("the callback body is too large", 413))
    headers = http_request.headers
    signature = headers.get("X-Lark-Signature", "")
    if not signature:
        return Parsed(_unsigned(body, token=token, encrypt_key=encrypt_key))
    timestamp = headers.get("X-Lark-Request-Timestamp", "")
    if not crypto.signature_matches(
        signature=signature,
        timestamp=timestamp,
        nonce=headers.get("X-Lark-Request-Nonce", ""),
        encrypt_key=encrypt_key,
        body=body,
    ):
        return Parsed(
            _refusal("wrong signature: the body is not signed with this channel's Encrypt Key", 401)
        )
    # The timestamp is covered by the signature, so only now does its age mean anything.
    problem = window_problem(timestamp, what="X-Lark-Request-Timestamp")
    if problem is not None:
        return Parsed(_refusal(problem, 401))
    try:
        payload = _open_envelope(body, encrypt_key)
    except crypto.UndecryptableError as exc:
        return Parsed(_refusal(f"undecryptable callback: {exc}", 400))
    except ValueError:
        return Parsed(_refusal("the callback body is not a JSON object", 400))
    if payload.get("type") == "url_verification":
        return Parsed(_challenge(payload, token))
    return _click(payload, token=token, app_id=text(secrets.get("app_id")))


def _unsigned(body: bytes, *, token: str, encrypt_key: str) -> CallbackResult:
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


def _click(payload: dict[str, Any], *, token: str, app_id: str) -> Parsed | _Unreplayed:
    header = payload.get("header")
    if payload.get("schema") != "2.0" or not isinstance(header, dict):
        return Parsed(_refusal("not a schema 2.0 callback: subscribe to card.action.trigger", 400))
    if not same_secret(header.get("token"), token):
        return Parsed(_refusal("wrong verification token", 401))
    if header.get("app_id") not in (None, "", app_id):
        return Parsed(_refusal("the callback is for another Feishu app", 401))
    if header.get("event_type") != "card.action.trigger":
        return Parsed(_refusal(f"unsupported event type {str(header.get('event_type'))[:80]!r}", 400))
    event_id = header.get("event_id")
    if not _short_text(event_id):
        return Parsed(_refusal("the callback carries no event_id", 400))
    open_id = dig(payload, "event", "operator", "open_id")
    if not _short_text(open_id):
        return Parsed(_refusal("the click carries no operator open_id", 400))
    value = dig(payload, "event", "action", "value")
    request_id = _request_id(dig(value, "request_id"))
    if request_id is None:
        return Parsed(_refusal("the click names no approval request: is this an approval card?", 400))
    decision = dig(value, "decision")
    if not isinstance(decision, str) or decision not in DECISIONS:  # may be any JSON value
        return Parsed(
            _refusal(
                f"unknown decision {str(decision)[:40]!r}: expected approve or reject",
                400,
                request_id=request_id,
                open_id=open_id,
            )
        )
    reason = dig(payload, "event", "action", "form_value", "reason")
    reason = reason.strip()[:2000] if isinstance(reason, str) else ""
    # From here on the click is authenticated and complete: it is answered with a toast.
    decision_result = CallbackResult(
        kind="decision",
        request_id=request_id,
        approve=DECISIONS[decision],
        external_user_id=open_id,
        reason=reason,
        extra={"event_id": event_id},
    )
    return _Unreplayed(replay_key("feishu:event", app_id, event_id), decision_result)
