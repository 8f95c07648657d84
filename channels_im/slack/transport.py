"""Slack: approval cards as Block Kit messages, clicks as signed ``block_actions`` interactions.

Configuration (:class:`~channels_im.models.ChannelConfig`)::

    secrets       = {"bot_token": "xoxb-…", "signing_secret": "…"}
    settings_json = {"channel": "C…", "api_url": "https://slack.com/api/", "timeout": 5}

Outbound calls go through the official ``slack_sdk.WebClient`` (``chat.postMessage``,
``chat.update``); the message reference is ``"<channel id>:<ts>"``. Inbound clicks are verified
(``X-Slack-Signature`` over the raw body, timestamp within 300 s) before a byte of them is parsed,
then de-duplicated. Protocol notes: ``docs/protocols.md``, section "Slack".
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.error import URLError
from urllib.parse import parse_qs, urlsplit

from django.http import HttpRequest, HttpResponse, JsonResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web import SlackResponse

from channels_im import replay
from channels_im.base import CallbackResult, Channel, DeliveryError
from channels_im.cards import card_facts
from channels_im.providers import register_provider
from channels_im.slack.blocks import APPROVE, REJECT, approval_blocks, decided_blocks, escape, fallback_text
from fimone.parsers import loads as json_loads

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"
DEFAULT_TIMEOUT = 5.0
MAX_TIMEOUT = 30.0

SIGNATURE_WINDOW_SECONDS = 300
"""Slack's own replay window: a request signed longer ago (or later) than this is refused."""
REPLAY_MEMORY_SECONDS = 2 * SIGNATURE_WINDOW_SECONDS
"""How long a click is remembered: a request signed up to the window ahead of our clock stays
acceptable until the window has passed behind it, so the key must outlive both halves."""
REPLAY_CACHE_PREFIX = "channels_im:slack:click:"
CARD_METADATA_TYPE = "fimone_approval_card"
"""Message metadata event type of an approval card (its payload holds the request id)."""
HISTORY_LOOKUP_PAGES = 5
"""Pages of 200 messages read when looking for a card whose answer was lost."""

RETRYABLE_API_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
"""``ok: false`` errors that may go away by themselves. Any other error (``invalid_auth``,
``channel_not_found``, ``not_in_channel``, ``invalid_blocks``…) needs a person to fix something."""

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_USER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Slack user ids are short and alphanumeric (U…, W…); anything else (NUL bytes, kilobytes of text)
must not reach the identity lookup or the audit log."""
_ACTION_TS = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")
_MAX_FORM_FIELDS = 20
_MESSAGE_REF = re.compile(r"(?P<channel>[A-Z0-9]+):(?P<ts>[0-9]+\.[0-9]+)")


@dataclass(frozen=True)
class SlackSettings:
    """What an outbound call needs, validated."""

    bot_token: str
    channel: str
    api_url: str
    timeout: float


def _misconfigured(config: Any, problem: str) -> DeliveryError:
    # Retrying cannot fix a configuration: the request stays pending (and expires) until an
    # operator repairs the channel in the admin and sends a test card.
    return DeliveryError(f"Slack channel {config.name!r} is misconfigured: {problem}", retryable=False)


def slack_settings(config: Any) -> SlackSettings:
    """The outbound settings of ``config``; raises ``DeliveryError(retryable=False)`` naming the
    first missing or invalid value (never echoing a secret)."""
    secrets = config.secrets if isinstance(config.secrets, dict) else {}
    options = config.settings_json if isinstance(config.settings_json, dict) else {}
    token = secrets.get("bot_token")
    if not isinstance(token, str) or not token.strip():
        raise _misconfigured(config, 'secrets need "bot_token" (the bot token, xoxb-…)')
    channel = options.get("channel")
    if not isinstance(channel, str) or not channel.strip():
        raise _misconfigured(config, 'settings need "channel" (a channel id such as C0123ABCD)')
    api_url = options.get("api_url") or DEFAULT_API_URL
    if not isinstance(api_url, str):
        raise _misconfigured(config, '"api_url" must be a URL')
    parts = urlsplit(api_url)
    # The bot token travels in a header: plain http is allowed only to this machine (test fakes).
    if not parts.hostname or not (
        parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS)
    ):
        raise _misconfigured(config, '"api_url" must be an https:// URL')
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT:
        raise _misconfigured(config, f'"timeout" must be a number of seconds in (0, {MAX_TIMEOUT:g}]')
    return SlackSettings(
        bot_token=token.strip(),
        channel=channel.strip(),
        api_url=api_url if api_url.endswith("/") else api_url + "/",
        timeout=float(timeout),
    )


def parse_message_ref(ref: str) -> tuple[str, str] | None:
    """``(channel, ts)`` of a reference made by :meth:`SlackChannel.send_interactive_card`
    (``None`` for anything else, e.g. an empty reference or another provider's)."""
    match = _MESSAGE_REF.fullmatch(ref or "")
    return (match["channel"], match["ts"]) if match else None


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return str(value)
    return None


def _api_error(method: str, exc: SlackApiError) -> DeliveryError:
    response: SlackResponse = exc.response
    status = response.status_code
    data = response.data if isinstance(response.data, dict) else {}
    error = str(data.get("error") or f"HTTP {status}")[:200]
    if status == 429 or error == "ratelimited":
        retry_after = _header(response.headers or {}, "Retry-After")
        wait = f", retry after {retry_after} s" if retry_after else ""
        return DeliveryError(f"Slack rate-limited {method} (ratelimited{wait})", retryable=True)
    retryable = status >= 500 or error in RETRYABLE_API_ERRORS
    return DeliveryError(f"Slack {method} failed: {error} (HTTP {status})", retryable=retryable)


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or (
        isinstance(exc, URLError) and isinstance(exc.reason, TimeoutError)
    )


def _card_of(message: Any) -> str | None:
    """The request id an approval card's metadata names (``None`` for any other message)."""
    metadata = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(metadata, dict) or metadata.get("event_type") != CARD_METADATA_TYPE:
        return None
    payload = metadata.get("event_payload")
    request_id = payload.get("request_id") if isinstance(payload, dict) else None
    return request_id if isinstance(request_id, str) else None


@register_provider
class SlackChannel(Channel):
    """A Slack channel that approval cards are posted to by a bot, and whose buttons call back."""

    kind = "slack"

    # --- outbound -------------------------------------------------------------------------------

    def _call(self, method: str, call: Callable[[WebClient], SlackResponse]) -> SlackResponse:
        """Run one Web API call; every failure becomes a :class:`DeliveryError`."""
        options = slack_settings(self.config)
        client = WebClient(
            token=options.bot_token,
            base_url=options.api_url,
            timeout=options.timeout,  # type: ignore[arg-type]  # urllib takes float seconds
            # Retries belong to the delivery task (bounded, with backoff, each attempt logged); the
            # SDK's own retry would silently double how long one attempt may take.
            retry_handlers=[],
        )
        try:
            return call(client)
        except SlackApiError as exc:
            raise _api_error(method, exc) from None
        except (OSError, http.client.HTTPException) as exc:
            if _is_timeout(exc):
                raise DeliveryError(
                    f"Slack did not answer {method} within {options.timeout:g} s",
                    retryable=True,
                    maybe_sent=True,
                ) from None
            reason = exc.reason if isinstance(exc, URLError) else exc
            # Refused or unresolvable: nothing was sent. Dropped mid-answer: it may have been.
            maybe_sent = not isinstance(exc, URLError)
            raise DeliveryError(
                f"could not reach Slack for {method}: {reason}", retryable=True, maybe_sent=maybe_sent
            ) from None
        except SlackClientError as exc:
            raise DeliveryError(f"Slack {method} could not be sent: {exc}", retryable=False) from None

    @staticmethod
    def _message_ref(method: str, response: SlackResponse) -> str:
        ref = f"{response.get('channel')}:{response.get('ts')}"
        if parse_message_ref(ref) is None:
            # Without them the card could never be updated: better to say so now.
            raise DeliveryError(f"Slack {method} answered ok without a channel id and ts", retryable=False)
        return ref

    def send_interactive_card(self, request: Any, *, maybe_posted: bool = False) -> str:
        """Post the approval card; returns ``"<channel id>:<ts>"``.

        A request whose card was already posted (its reference is stored) is not posted again.
        Slack has no idempotency key: the card carries the request id in its message metadata,
        and after a lost answer (``maybe_posted``) the channel's history is searched for it first.
        """
        if parse_message_ref(request.external_message_id) is not None:
            return str(request.external_message_id)
        channel = slack_settings(self.config).channel
        if maybe_posted:
            found = self._posted_card(request, channel)
            if found is not None:
                return found
        facts = card_facts(request)
        response = self._call(
            "chat.postMessage",
            lambda client: client.chat_postMessage(
                channel=channel,
                text=fallback_text(facts),
                blocks=approval_blocks(facts),
                metadata={"event_type": CARD_METADATA_TYPE, "event_payload": {"request_id": str(request.pk)}},
                unfurl_links=False,
                unfurl_media=False,
            ),
        )
        return self._message_ref("chat.postMessage", response)

    def _posted_card(self, request: Any, channel: str) -> str | None:
        """The reference of the request's card if an earlier attempt posted it, from the channel's
        history since the request was opened (needs the ``channels:history`` scope, or
        ``groups:history`` for a private channel), read page by page up to
        :data:`HISTORY_LOOKUP_PAGES`. ``None`` when it is not there or the history cannot be read:
        the card is then posted (a possible duplicate beats no card at all)."""
        oldest = f"{request.created_at.timestamp() - 60:.6f}"
        wanted = str(request.pk)
        cursor: str | None = None
        for _page in range(HISTORY_LOOKUP_PAGES):
            try:
                response = self._call(
                    "conversations.history",
                    lambda client, cursor=cursor: client.conversations_history(
                        channel=channel, oldest=oldest, include_all_metadata=True, limit=200, cursor=cursor
                    ),
                )
            except DeliveryError as exc:
                log.warning("could not look for the posted card of request %s: %s", request.pk, exc)
                return None
            for message in response.get("messages") or []:
                if _card_of(message) == wanted:
                    ref = f"{channel}:{message.get('ts')}"
                    if parse_message_ref(ref) is not None:
                        log.info("request %s: found the card a lost answer had posted", wanted)
                        return ref
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not response.get("has_more") or not cursor:
                return None
        log.warning("request %s: its card was not found in the channel's recent history", wanted)
        return None
        wanted = str(request.pk)
        for message in response.get("messages") or []:
            metadata = message.get("metadata") if isinstance(message, dict) else None
            if not isinstance(metadata, dict) or metadata.get("event_type") != CARD_METADATA_TYPE:
                continue
            payload = metadata.get("event_payload")
            if isinstance(payload, dict) and payload.get("request_id") == wanted:
                ref = f"{channel}:{message.get('ts')}"
                if parse_message_ref(ref) is not None:
                    log.info("request %s: found its card posted by an attempt whose answer was lost", wanted)
                    return ref
        return None

    def update_card(self, request: Any) -> None:
        """Replace the card's buttons with the outcome line (who decided, when)."""
        ref = parse_message_ref(request.external_message_id)
        if ref is None:
            raise DeliveryError("the request has no Slack message to update", retryable=False)
        channel, ts = ref
        facts = card_facts(request)
        self._call(
            "chat.update",
            lambda client: client.chat_update(
                channel=channel, ts=ts, text=fallback_text(facts), blocks=decided_blocks(facts)
            ),
        )

    def check_config(self) -> None:
        try:
            slack_settings(self.config)
        except DeliveryError as exc:
            raise ValueError(str(exc)) from None
        if not self._signing_secret():
            raise ValueError('secrets need "signing_secret" (from the app\'s Basic Information page)')

    def send_test_card(self) -> str:
        """Post a message with no buttons, proving the token, channel and URL work."""
        channel = slack_settings(self.config).channel
        text = f"FIM One test message: approval cards of {self.config.name!r} will be posted here."
        response = self._call(
            "chat.postMessage",
            lambda client: client.chat_postMessage(
                channel=channel,
                text=escape(text),
                blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": escape(text)}}],
            ),
        )
        return self._message_ref("chat.postMessage", response)

    # --- inbound --------------------------------------------------------------------------------

    def _signing_secret(self) -> str | None:
        secrets = self.config.secrets if isinstance(self.config.secrets, dict) else {}
        secret = secrets.get("signing_secret")
        return secret if isinstance(secret, str) and secret else None

    def _verify(self, http_request: HttpRequest, body: bytes) -> CallbackResult | None:
        """The refusal for a request Slack did not sign (``None`` when the signature holds)."""
        secret = self._signing_secret()
        if secret is None:
            return CallbackResult.refuse("this channel has no signing secret configured", status=401)
        timestamp = http_request.headers.get("X-Slack-Request-Timestamp")
        signature = http_request.headers.get("X-Slack-Signature")
        if not timestamp or not signature:
            return CallbackResult.refuse(
                "missing X-Slack-Request-Timestamp or X-Slack-Signature header", status=401
            )
        if not _TIMESTAMP.fullmatch(timestamp):
            return CallbackResult.refuse("X-Slack-Request-Timestamp is not an integer", status=401)
        age = time.time() - int(timestamp)
        if age > SIGNATURE_WINDOW_SECONDS:
            return CallbackResult.refuse(
                f"stale request: signed more than {SIGNATURE_WINDOW_SECONDS} s ago", status=401
            )
        if age < -SIGNATURE_WINDOW_SECONDS:
            return CallbackResult.refuse("request timestamp is in the future", status=401)
        # The signature covers the exact bytes received, so it is checked on them, not on a
        # re-encoding of the parsed form.
        base = b"v0:" + timestamp.encode("ascii") + b":" + body
        expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            return CallbackResult.refuse("invalid X-Slack-Signature", status=401)
        return None

    def _parse(self, body: bytes) -> CallbackResult:
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
        return self._first_delivery(decision, action_ts)

    def _first_delivery(self, decision: CallbackResult, action_ts: str) -> CallbackResult:
        """``decision`` the first time this click arrives; a refusal for any copy of it.

        A captured request stays correctly signed, so within the signature window a replay is
        caught here; after it, the timestamp check refuses it. The window spans both ways (a
        timestamp up to 300 s ahead is accepted), so the key lives for both halves of it.
        """
        click = f"{self.config.pk}\x00{decision.external_user_id}\x00{action_ts}\x00{decision.request_id}"
        key = REPLAY_CACHE_PREFIX + hashlib.sha256(click.encode()).hexdigest()

        def refused(reason: str) -> CallbackResult:
            # Answered on the card (200) and logged on the request with the clicker's id.
            return CallbackResult.refuse(
                reason, status=200, request_id=decision.request_id, external_user_id=decision.external_user_id
            )

        try:
            first = replay.first_time(key, REPLAY_MEMORY_SECONDS)
        except Exception:  # a cache outage must not let replays through: fail closed
            log.exception("could not record a Slack click for replay protection")
            return refused("FIM One could not record this click; please try again.")
        if not first:
            return refused("This click was already received (a replayed request changes nothing).")
        return decision

    def parse_callback(self, http_request: HttpRequest) -> CallbackResult:
        """Verify the signature and timestamp on the raw body, then parse the click (see module
        docstring). Refusals: 401 unsigned / stale / future, 400 malformed, 200 replayed."""
        try:
            # Read the raw bytes before anything touches request.POST: they are what was signed.
            body = http_request.body
        except Exception:  # oversized or unreadable body
            return CallbackResult.refuse("unreadable request body")
        try:
            refusal = self._verify(http_request, body)
            return refusal if refusal is not None else self._parse(body)
        except Exception:  # never raise on hostile input; the view would refuse it anyway
            log.exception("Slack callback parsing failed")
            return CallbackResult.refuse("malformed callback")

    def callback_response(self, result: CallbackResult, outcome: Any | None) -> HttpResponse:
        """Slack shows an error unless it gets a 200 within 3 s, so every verified click is
        answered 200: the decided card (``replace_original``) for the accepted decision, an
        ephemeral note only the clicker sees for anything else. A request that could not be
        verified (no ``request_id`` attached) gets its 4xx status and a short JSON error."""
        if outcome is not None and outcome.accepted and outcome.request is not None:
            facts = card_facts(outcome.request)
            return JsonResponse(
                {"replace_original": True, "text": fallback_text(facts), "blocks": decided_blocks(facts)}
            )
        if outcome is not None:
            return self._ephemeral(outcome.message)
        if result.kind == "refusal" and result.request_id:
            return self._ephemeral(result.reason)
        return super().callback_response(result, outcome)

    @staticmethod
    def _ephemeral(message: str) -> JsonResponse:
        return JsonResponse(
            {"response_type": "ephemeral", "replace_original": False, "text": escape(message)}
        )
