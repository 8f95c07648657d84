"""Verifying, then parsing, a Slack interactivity request (a ``block_actions`` click).

The signature (``X-Slack-Signature`` over the exact body bytes) and the timestamp window are checked
before a byte of the body is parsed; a verified click is then de-duplicated. Protocol notes:
``docs/protocols.md``, section "Slack".
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import uuid
from typing import Any
from urllib.parse import parse_qs

from django.http import HttpRequest

from approvals.channel_contract import CallbackResult
from channels_im.slack.blocks import APPROVE, REJECT
from channels_im.slack.config import signing_secret
from channels_im.verification import (
    CALLBACK_WINDOW_SECONDS,
    first_delivery,
    replay_key,
    same_secret,
    timestamp_skew,
)
from fimone.parsers import loads as json_loads

log = logging.getLogger(__name__)

SIGNATURE_WINDOW_SECONDS = CALLBACK_WINDOW_SECONDS
"""Slack's own replay window: a request signed longer ago (or later) than this is refused."""
REPLAY_CACHE_PREFIX = "channels_im:slack:click"

_USER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Slack user ids are short and alphanumeric (U…, W…); anything else (NUL bytes, kilobytes of text)
must not reach the identity lookup or the audit log."""
_ACTION_TS = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")
_MAX_FORM_FIELDS = 20


def parse_callback(config: Any, http_request: HttpRequest) -> CallbackResult:
    """Verify the signature and timestamp on the raw body, then parse the click. Never raises.
    Refusals: 401 unsigned / stale / future, 400 malformed, 200 replayed."""
    try:
        # Read the raw bytes before anything touches request.POST: they are what was signed.
        body = http_request.body
    except Exception:  # oversized or unreadable body
        return CallbackResult.refuse("unreadable request body")
    try:
        refusal = _verify(config, http_request, body)
        return refusal if refusal is not None else _parse(config, body)
    except Exception:  # never raise on hostile input; the view would refuse it anyway
        log.exception("Slack callback parsing failed")
        return CallbackResult.refuse("malformed callback")


def _verify(config: Any, http_request: HttpRequest, body: bytes) -> CallbackResult | None:
    """The refusal for a request Slack did not sign (``None`` when the signature holds)."""
    secret = signing_secret(config)
    if secret is None:
        return CallbackResult.refuse("this channel has no signing secret configured", status=401)
    timestamp = http_request.headers.get("X-Slack-Request-Timestamp")
    signature = http_request.headers.get("X-Slack-Signature")
    if not timestamp or not signature:
        return CallbackResult.refuse(
            "missing X-Slack-Request-Timestamp or X-Slack-Signature header", status=401
        )
    skew = timestamp_skew(timestamp)
    if skew is None:
        return CallbackResult.refuse("X-Slack-Request-Timestamp is not an integer", status=401)
    if skew < -SIGNATURE_WINDOW_SECONDS:
        return CallbackResult.refuse(
            f"stale request: signed more than {SIGNATURE_WINDOW_SECONDS} s ago", status=401
        )
    if skew > SIGNATURE_WINDOW_SECONDS:
        return CallbackResult.refuse("request timestamp is in the future", status=401)
    # The signature covers the exact bytes received, so it is checked on them, not on a
    # re-encoding of the parsed form.
    base = b"v0:" + timestamp.encode("ascii") + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not same_secret(signature, expected):
        return CallbackResult.refuse("invalid X-Slack-Signature", status=401)
    return None


def _parse(config: Any, body: bytes) -> CallbackResult:
    """A verified body → the click it carries, or a 400 refusal saying what is wrong."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=_MAX_FORM_FIELDS)
        payload = json_loads(form["payload"][0])
    except (ValueError, KeyError):  # InvalidJSON and UnicodeDecodeError are ValueErrors
        return CallbackResult.refuse('expected a form field "payload" holding JSON')
    if not isinstance(payload, dict):
        return CallbackResult.refuse("payload must be a JSON object")
    if payload.get("type") != "block_actions":
        return CallbackResult.refuse(f"unsupported interaction type {str(payload.get('type'))[:40]!r}")
    user = payload.get("user")
    user_id = user.get("id") if isinstance(user, dict) else None
    if not isinstance(user_id, str) or not _USER_ID.fullmatch(user_id):
        return CallbackResult.refuse("payload has no valid user.id")
    actions = payload.get("actions")
    action = actions[0] if isinstance(actions, list) and actions else None
    if not isinstance(action, dict):
        return CallbackResult.refuse("payload has no actions")
    action_id, value, action_ts = action.get("action_id"), action.get("value"), action.get("action_ts")
    if action_id not in (APPROVE, REJECT):
        return CallbackResult.refuse(f"unknown action {str(action_id)[:40]!r}")
    try:
        request_id = str(uuid.UUID(str(value)))
    except ValueError:
        return CallbackResult.refuse("the button carries no approval request id")
    if not isinstance(action_ts, str) or not _ACTION_TS.fullmatch(action_ts):
        return CallbackResult.refuse("the action has no valid action_ts")
    name = user.get("username") or user.get("name")
    decision = CallbackResult(
        kind="decision",
        request_id=request_id,
        approve=action_id == APPROVE,
        external_user_id=user_id,
        # Shown on the link page (escaped) when nobody is linked to this Slack user yet.
        extra={"display_name": name[:200]} if isinstance(name, str) else {},
    )
    return _first_delivery(config, decision, action_ts)


def _first_delivery(config: Any, decision: CallbackResult, action_ts: str) -> CallbackResult:
    """``decision`` the first time this click arrives; a refusal for any copy of it.

    A captured request stays correctly signed, so within the signature window a replay is caught
    here; after it, the timestamp check refuses it.
    """
    key = replay_key(
        REPLAY_CACHE_PREFIX, str(config.pk), decision.external_user_id, action_ts, str(decision.request_id)
    )

    def refused(reason: str) -> CallbackResult:
        # Answered on the card (200) and logged on the request with the clicker's id.
        return CallbackResult.refuse(
            reason, status=200, request_id=decision.request_id, external_user_id=decision.external_user_id
        )

    try:
        first = first_delivery(key)
    except Exception:  # a cache outage must not let replays through: fail closed
        log.exception("could not record a Slack click for replay protection")
        return refused("FIM One could not record this click; please try again.")
    if not first:
        return refused("This click was already received (a replayed request changes nothing).")
    return decision
