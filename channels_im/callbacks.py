"""Answering inbound callbacks in a thread, as Django runs synchronous views: verify, parse, map
the clicker to a user of ours and hand the decision to the approvals service, which checks that
the request belongs to this channel and that the user may decide it. A click counts against
its user's ``DECISION_RATE``, as the inbox's and the API's decisions do: past it the click decides
nothing, is logged on its request and the clicker is told. The event loop's lane
(:mod:`channels_im.quick`) hands here every callback it does not answer itself, with what it
already did. Nothing here ever answers 500: a failure is a clear 4xx and a log line.
"""

from __future__ import annotations

import logging
import uuid
from typing import Literal

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse

from approvals.apis import DecisionThrottle
from approvals.channel_contract import CallbackResult, Channel
from approvals.channels import channel_for
from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest
from approvals.selectors import request_for_decision
from approvals.services import (
    DecisionOutcome,
    clean_text,
    confirmation_decide,
    log_event,
)
from channels_im.identities import LINK_OFFER_TTL, identity_for_click, link_offer_make
from channels_im.models import ImIdentity
from channels_im.selectors import channel_config_for_callback
from fimone.throttling import Refusal

log = logging.getLogger(__name__)

UNCOUNTED = "uncounted"
"""A click not yet counted against its user's decision rate (:func:`answer_parsed`)."""


def decision_rate_refusal(identity: ImIdentity) -> Refusal | None:
    """Count a click of ``identity``'s user against their ``DECISION_RATE`` (the counter the inbox
    and the API share); why it is refused past the rate, else ``None``. A counter that cannot be
    reached does not refuse the click (logged): the click was verified and its replay key spent
    already, so the store answered a moment ago."""
    try:
        return DecisionThrottle().refusal_for_user(identity.user_id)
    except Exception:
        log.exception("the decision rate of user %s could not be counted", identity.user_id)
        return None


def _over_the_rate(
    config: ChannelConfig, channel: Channel, result: CallbackResult, identity: ImIdentity, refused: Refusal
) -> HttpResponse:
    """A click past its user's decision rate: nothing decided, the refusal logged on the clicked
    request (if it is one of the channel's organisation), the clicker told in the channel's own
    way (a toast, an ephemeral or a private message)."""
    request = _request_of_channel(result, config)
    message = f"{refused.message} Try again in {refused.wait} s."
    if request is not None:
        log_event(
            request_id=request.pk,
            organization_id=request.organization_id,
            kind=ConfirmationEvent.Kind.CLICK_REFUSED,
            actor=identity.user,
            external_id=result.external_user_id,
            reason=refused.message,
            wanted="approved" if result.approve else "rejected",
            via=config.pk,
        )
    return channel.callback_response(result, DecisionOutcome(False, "refused", message, request))


def _request_of_channel(result: CallbackResult, config: ChannelConfig) -> ConfirmationRequest | None:
    """The clicked request, if it belongs to the channel's organisation (loaded once, with what
    the decision and the answer's card need)."""
    request_id = clicked_id(result)
    if request_id is None:
        return None
    request = request_for_decision(request_id=request_id)
    return request if request is not None and request.organization_id == config.organization_id else None


def clicked_id(result: CallbackResult) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(result.request_id))
    except ValueError:
        return None


def storable(external_id: str) -> bool:
    """Whether a provider's user id can be stored and looked up as it is."""
    return isinstance(external_id, str) and len(external_id) <= 200 and "\x00" not in external_id


def im_callback_in_thread(http_request: HttpRequest, callback_key: str) -> HttpResponse:
    config = channel_config_for_callback(callback_key)
    if config is None:
        return unknown_channel()
    return answer_for_channel(http_request, config)


def unknown_channel() -> HttpResponse:
    return JsonResponse({"error": "unknown channel"}, status=404)


def answer_for_channel(http_request: HttpRequest, config: ChannelConfig) -> HttpResponse:
    """Verify, parse and answer a callback to ``config``'s URL."""
    channel = channel_for(config)
    if http_request.method not in channel.callback_methods:  # only WeCom's URL check is a GET
        return HttpResponseNotAllowed(sorted(channel.callback_methods))
    try:
        result = channel.parse_callback(http_request)
    except Exception:  # a provider bug must not become a 500 or a decision
        log.exception("callback parsing failed for channel %s", config.pk)
        result = CallbackResult.refuse("malformed callback")
    return answer_parsed(config, channel, result)


def answer_parsed(
    config: ChannelConfig,
    channel: Channel,
    result: CallbackResult,
    *,
    identity: ImIdentity | Literal["unread"] | None = "unread",
    decision_rate: Refusal | Literal["uncounted"] | None = UNCOUNTED,
) -> HttpResponse:
    """Answer a callback ``channel`` parsed: a challenge, a refusal (logged on its request when
    it names one), or a click, counted against its user's decision rate and decided by the
    clicker's identity. ``identity`` and ``decision_rate`` (the click's count: a refusal,
    ``None`` within the rate) say what the caller already did (the event loop's lane, which
    tried the common click's two statements first)."""
    if result.kind == "challenge":
        return channel.callback_response(result, None)
    if not storable(result.external_user_id):  # whatever a provider let through, never a 500
        result = CallbackResult.refuse("malformed user id")
    if result.kind == "decision":
        if identity == "unread":
            identity = identity_for_click(config=config, external_id=result.external_user_id)
        if identity is not None and decision_rate == UNCOUNTED:
            decision_rate = decision_rate_refusal(identity)
        if identity is not None and isinstance(decision_rate, Refusal):
            return _over_the_rate(config, channel, result, identity, decision_rate)
    else:
        identity = None
    request = _request_of_channel(result, config) if result.request_id else None
    if result.kind == "refusal":
        if request is not None:
            log_event(
                request_id=request.pk,
                kind=ConfirmationEvent.Kind.CLICK_REFUSED,
                external_id=result.external_user_id,
                reason=result.reason,
                via=config.pk,
            )
        return channel.callback_response(result, None)
    if request is None:
        refusal = CallbackResult.refuse("no such approval request", status=404)
        return channel.callback_response(refusal, None)
    if identity is None:
        log_event(
            request_id=request.pk,
            kind=ConfirmationEvent.Kind.CLICK_REFUSED,
            external_id=result.external_user_id,
            reason="the clicker is not mapped to a user",
            via=config.pk,
        )
        # Answered to the clicker only (Slack ephemeral, Feishu toast, WeCom private message): the
        # URL is theirs to open.
        url = link_offer_make(
            config=config,
            external_id=result.external_user_id,
            display_name=clean_text(str(result.extra.get("display_name") or ""), limit=200),
        )
        minutes = int(LINK_OFFER_TTL.total_seconds() // 60)
        refusal = CallbackResult.refuse(
            f"Your {config.get_kind_display()} account is not linked to FIM One in "
            f"{config.organization.name}. To link it to your account, open {url} (signed in) "
            f"within {minutes} minutes, then click again.",
            status=403,
            request_id=str(request.pk),
        )
        return channel.callback_response(refusal, None)
    outcome = confirmation_decide(
        request_id=request.pk,
        user=identity.user,
        approve=bool(result.approve),
        reason=result.reason,
        via_channel_id=config.pk,
        external_id=result.external_user_id,
        loaded=request,
    )
    return channel.callback_response(result, outcome)
