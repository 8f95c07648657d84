"""WeCom (企业微信): approval cards as template-card app messages, verified clicks in.

Split by concern like the other providers: :mod:`~channels_im.wecom.config` validates the
configuration, :mod:`~channels_im.wecom.client` talks to the server API (access token, calls),
:mod:`~channels_im.wecom.inbound` (with :mod:`~channels_im.wecom.crypto`) verifies and parses
callbacks, :mod:`~channels_im.wecom.cards` builds the cards. This module ties them into the
:class:`~approvals.channel_contract.Channel` contract.

The card is sent with ``message/send`` (``msgtype: template_card``, ``button_interaction``) and
WeCom's duplicate check, so a retry after a lost answer does not post a second card. Its answer
carries a ``response_code`` (valid 72 hours, single use): the message reference stored is
``"<msgid>|<response_code>"``, and :meth:`WecomChannel.update_card` spends the code on
``update_template_card`` to grey the buttons out under the outcome for every recipient.
Anything a clicker alone should read (a refusal, the one-time link to link their account, "already
decided") is sent to them as a private app message.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from approvals.channel_contract import CallbackResult, Channel, DeliveryError
from approvals.channels import register_provider
from channels_im.cards import card_facts
from channels_im.wecom import client, inbound
from channels_im.wecom.cards import connection_check_card, request_card, settled_card
from channels_im.wecom.config import DEFAULT_API_BASE, WecomConfigError, WecomSettings, wecom_settings

if TYPE_CHECKING:
    from approvals.services import DecisionOutcome

log = logging.getLogger(__name__)

SEND_PATH = "/cgi-bin/message/send"
UPDATE_PATH = "/cgi-bin/message/update_template_card"
DUPLICATE_CHECK_SECONDS = 4 * 3600
"""WeCom's longest duplicate-check interval: an identical message within it is not sent again."""
NOTICE_TIMEOUT_SECONDS = 2.0
"""A private notice is sent while WeCom waits for the callback's answer (5 s): keep it short."""
_MESSAGE_REF = re.compile(r"(?P<msgid>[^|\s]{1,120})\|(?P<response_code>[^|\s]{1,78})")


def parse_message_ref(ref: str) -> tuple[str, str] | None:
    """``(msgid, response_code)`` of a reference made by :meth:`WecomChannel.send_interactive_card`."""
    match = _MESSAGE_REF.fullmatch(ref or "")
    return (match["msgid"], match["response_code"]) if match else None


def _recipients(conf: WecomSettings) -> dict[str, str]:
    return {name: value for name in ("touser", "toparty", "totag") if (value := getattr(conf, name))}


@register_provider
class WecomChannel(Channel):
    """Approval cards sent by one WeCom self-built app to configured members, departments or tags."""

    kind = "wecom"
    secrets_address_setting = ("api_base", DEFAULT_API_BASE)
    callback_methods = frozenset({"GET", "POST"})

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        # Set by parse_callback once a click is authenticated and complete (one instance per
        # callback, so it never leaks between requests).
        self._verified_click = False
        self._clicker = ""

    # --- outbound ---------------------------------------------------------------------------------

    def _settings(self) -> WecomSettings:
        try:
            return wecom_settings(self.config)
        except WecomConfigError as exc:
            raise DeliveryError(str(exc), retryable=False) from None

    def _send_card(self, conf: WecomSettings, card: dict[str, Any], *, operation: str) -> dict[str, Any]:
        body = {
            **_recipients(conf),
            "msgtype": "template_card",
            "agentid": conf.agent_id,
            "template_card": card,
            "enable_duplicate_check": 1,
            "duplicate_check_interval": DUPLICATE_CHECK_SECONDS,
        }
        return client.post(conf, SEND_PATH, body, operation=operation)

    def send_interactive_card(self, request: Any, *, maybe_posted: bool = False) -> str:
        """Send the request's card; return ``"<msgid>|<response_code>"``. A request whose card was
        already sent (its reference is stored) is not sent again; a retry after a lost answer
        sends the identical message, which WeCom's duplicate check swallows."""
        if parse_message_ref(request.external_message_id) is not None:
            return str(request.external_message_id)
        conf = self._settings()
        answer = self._send_card(conf, request_card(card_facts(request)), operation="card delivery")
        ref = f"{answer.get('msgid')}|{answer.get('response_code')}"
        if parse_message_ref(ref) is None:
            # Without them the card could never be updated: better to say so now.
            raise DeliveryError("WeCom sent the card but returned no msgid / response_code", retryable=False)
        invalid = answer.get("invaliduser")
        if invalid:
            log.warning(
                "WeCom card of %s: recipients WeCom does not know: %s", request.pk, str(invalid)[:200]
            )
        return ref

    #: The card's ``response_code`` can be spent once: it is kept for the verdict, so a quorum's
    #: tally is not shown on WeCom cards (the voter is told it in a private message).
    updates_pending_cards = False

    def update_card(self, request: Any) -> None:
        """Grey the card's buttons out under the outcome line, for every recipient."""
        ref = parse_message_ref(request.external_message_id)
        if ref is None:
            raise DeliveryError("the request has no WeCom card to update", retryable=False)
        conf = self._settings()
        body = {
            "atall": 1,
            "agentid": conf.agent_id,
            "response_code": ref[1],
            "template_card": settled_card(card_facts(request)),
        }
        client.post(conf, UPDATE_PATH, body, operation="card update")

    def check_config(self) -> None:
        wecom_settings(self.config)

    def send_test_card(self) -> str:
        """Send a card without buttons proving the app may message its recipients."""
        conf = self._settings()
        card = connection_check_card(self.config.name, link=settings.SITE_URL + "/")
        answer = self._send_card(conf, card, operation="test card")
        return str(answer.get("msgid") or "")

    def _tell(self, user_id: str, text: str) -> None:
        """A private app message to one member: what only the clicker should read. Best effort
        (the callback is answered anyway); never raises."""
        try:
            conf = self._settings()
            conf = dataclasses.replace(conf, timeout=min(conf.timeout, NOTICE_TIMEOUT_SECONDS))
            body = {"touser": user_id, "msgtype": "text", "agentid": conf.agent_id, "text": {"content": text}}
            client.post(conf, SEND_PATH, body, operation="private notice")
        except DeliveryError as exc:
            log.warning("could not send a private WeCom notice: %s", exc)

    # --- inbound ----------------------------------------------------------------------------------

    def parse_callback(self, http_request: HttpRequest) -> CallbackResult:
        """Verify, then parse, a WeCom callback (:func:`channels_im.wecom.inbound.parse_callback`)."""
        parsed = inbound.parse_callback(self.config, http_request)
        self._verified_click = parsed.verified_click
        self._clicker = parsed.result.external_user_id if parsed.verified_click else ""
        return parsed.result

    def callback_response(self, result: CallbackResult, outcome: DecisionOutcome | None) -> HttpResponse:
        """The URL check gets the decrypted echostr as plain text; an unverified request its 4xx
        and a short JSON error. A verified click is answered 200 with an empty body (WeCom's
        "nothing to reply"); the card itself is updated by :meth:`update_card`, and what only the
        clicker should read goes to them in a private message."""
        if result.kind == "challenge":
            return HttpResponse(result.challenge, content_type="text/plain; charset=utf-8")
        if not self._verified_click:
            status = result.http_status if 400 <= result.http_status < 500 else 400
            return JsonResponse({"error": result.reason or "refused"}, status=status)
        if outcome is None:
            if not result.extra.get("replayed"):
                self._tell(self._clicker, result.reason)
        elif not outcome.accepted:
            self._tell(self._clicker, outcome.message)
        return HttpResponse(b"", content_type="text/plain; charset=utf-8")
