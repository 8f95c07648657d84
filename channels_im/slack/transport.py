"""Slack: approval cards as Block Kit messages, clicks as signed ``block_actions`` interactions.

Outbound calls go through the official ``slack_sdk.WebClient`` (``chat.postMessage``,
``chat.update``); the message reference is ``"<channel id>:<ts>"``. The provider is split by
concern: :mod:`~channels_im.slack.config` validates the configuration, :mod:`~channels_im.slack.inbound`
verifies and parses clicks, :mod:`~channels_im.slack.blocks` builds the cards; this module talks
to the Web API and ties them into the :class:`~approvals.channel_contract.Channel` contract.
"""

from __future__ import annotations

import http.client
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.error import URLError

from django.http import HttpRequest, HttpResponse, JsonResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web import SlackResponse

from approvals.channel_contract import CallbackResult, Channel, DeliveryError
from approvals.channels import register_provider
from channels_im.cards import card_facts
from channels_im.slack import inbound
from channels_im.slack.blocks import approval_blocks, decided_blocks, escape, fallback_text
from channels_im.slack.config import DEFAULT_API_URL, parse_message_ref, signing_secret, slack_settings
from channels_im.slack.inbound import SIGNATURE_WINDOW_SECONDS

__all__ = ["SIGNATURE_WINDOW_SECONDS", "SlackChannel", "parse_message_ref", "slack_settings"]

log = logging.getLogger(__name__)

CARD_METADATA_TYPE = "fimone_approval_card"
"""Message metadata event type of an approval card (its payload holds the request id)."""
HISTORY_LOOKUP_PAGES = 5
"""Pages of 200 messages read when looking for a card whose answer was lost."""

RETRYABLE_API_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
"""``ok: false`` errors that may go away by themselves. Any other error (``invalid_auth``,
``channel_not_found``, ``not_in_channel``, ``invalid_blocks``…) needs a person to fix something."""


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
    secrets_address_setting = ("api_url", DEFAULT_API_URL)

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

    def update_card(self, request: Any) -> None:
        """Replace the card's buttons with the outcome line (who decided, when); while the
        request is pending, re-post the card with its buttons and the quorum's tally."""
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
        if signing_secret(self.config) is None:
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

    def parse_callback(self, http_request: HttpRequest) -> CallbackResult:
        """Verify, then parse, a click (:func:`channels_im.slack.inbound.parse_callback`)."""
        return inbound.parse_callback(self.config, http_request)

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
