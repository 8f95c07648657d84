"""The Feishu / Lark channel: cards out through ``lark-oapi``, verified clicks in.

The provider is split by concern: :mod:`~channels_im.feishu.config` validates the configuration,
:mod:`~channels_im.feishu.client` talks to the Open API, :mod:`~channels_im.feishu.inbound` (with
:mod:`~channels_im.feishu.crypto`) verifies and parses callbacks, :mod:`~channels_im.feishu.cards`
builds the cards. This module ties them into the :class:`~approvals.channel_contract.Channel` contract.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from approvals.channel_contract import CallbackResult, Channel, DeliveryError
from approvals.channels import register_provider
from channels_im.cards import card_facts
from channels_im.feishu import inbound
from channels_im.feishu.cards import card_json, connection_check_card, request_card
from channels_im.feishu.client import call, sdk_client
from channels_im.feishu.config import DEFAULT_DOMAIN, FeishuConfigError, FeishuSettings, feishu_settings

if TYPE_CHECKING:
    from approvals.services import DecisionOutcome

__all__ = ["FeishuChannel", "feishu_settings", "sdk_client"]

log = logging.getLogger(__name__)

#: Feishu de-duplicates sends by ``uuid`` (at most 50 characters) for an hour.
UUID_MAX_CHARS = 50


@register_provider
class FeishuChannel(Channel):
    """Approval cards in a Feishu group chat (one bot app, one chat per configuration)."""

    kind = "feishu"
    secrets_address_setting = ("domain", DEFAULT_DOMAIN)

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
        response = call(conf, operation, lambda: client.im.v1.message.create(message))
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
        """PATCH the request's message with its card as it is now: settled, the outcome line (who,
        when) and no buttons; still pending, the buttons and the quorum's tally. Raises
        :class:`DeliveryError`."""
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
        call(conf, "card update", lambda: client.im.v1.message.patch(patch))

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
        """Verify, then parse, a Feishu callback (:func:`channels_im.feishu.inbound.parse_callback`).
        Never raises."""
        parsed = inbound.parse_callback(self.config, http_request)
        self._verified_click = parsed.verified_click
        return parsed.result

    async def parse_callback_async(self, http_request: HttpRequest) -> CallbackResult:
        """:meth:`parse_callback` on the event loop (the replay check awaits Redis)."""
        parsed = await inbound.parse_callback_async(self.config, http_request)
        self._verified_click = parsed.verified_click
        return parsed.result

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
