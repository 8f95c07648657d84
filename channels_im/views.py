"""Inbound callbacks: one URL per channel configuration, ``/im/callback/<callback_key>/``; and
the page where a clicker links their IM account to their own (``/im/link/<token>/``).

The provider verifies the request (signature, token, timestamp window, replay) before it parses
anything; only then is the clicker mapped to a user of ours and the decision handed to the
approvals service, which checks that the request belongs to this channel and that the user may
decide it. Nothing here ever answers 500: a failure is a clear 4xx and a log line.
"""

from __future__ import annotations

import logging
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.selectors import request_for_decision
from approvals.services import DecisionOutcome, confirmation_decide, confirmation_decide_click, log_event
from channels_im.base import CallbackResult
from channels_im.delivery import channel_for
from channels_im.identities import (
    LINK_OFFER_TTL,
    LinkRefused,
    identity_for_click,
    im_identity_link,
    link_offer_check,
    link_offer_make,
)
from channels_im.models import ChannelConfig, ImIdentity
from channels_im.selectors import channel_config_for_callback

log = logging.getLogger(__name__)


def _request_of_channel(result: CallbackResult, config: ChannelConfig) -> ConfirmationRequest | None:
    """The clicked request, if it belongs to the channel's organisation (loaded once, with what
    the decision and the answer's card need)."""
    try:
        request_id = uuid.UUID(str(result.request_id))
    except ValueError:
        return None
    request = request_for_decision(request_id=request_id)
    return request if request is not None and request.organization_id == config.organization_id else None


def _quick_decision(
    result: CallbackResult, config: ChannelConfig, identity: ImIdentity | None
) -> DecisionOutcome | None:
    """The click decided the quick way (approvals.decision_sql), or ``None`` when it is not a
    click that way takes: the full path below then answers it (and logs any refusal)."""
    if identity is None:
        return None
    try:
        request_id = uuid.UUID(str(result.request_id))
    except ValueError:
        return None
    return confirmation_decide_click(
        request_id=request_id,
        organization_id=config.organization_id,
        user=identity.user,
        approve=bool(result.approve),
        reason=result.reason,
        via_channel_id=config.pk,
        external_id=result.external_user_id,
    )


def _storable(external_id: str) -> bool:
    return isinstance(external_id, str) and len(external_id) <= 200 and "\x00" not in external_id


@csrf_exempt  # verified by the provider's signature instead; the platform holds no CSRF token
@require_http_methods(["GET", "POST"])
def im_callback(http_request: HttpRequest, callback_key: str) -> HttpResponse:
    config = channel_config_for_callback(callback_key)
    if config is None:
        return JsonResponse({"error": "unknown channel"}, status=404)
    channel = channel_for(config)
    if http_request.method not in channel.callback_methods:  # only WeCom's URL check is a GET
        return HttpResponseNotAllowed(sorted(channel.callback_methods))
    try:
        result = channel.parse_callback(http_request)
    except Exception:  # a provider bug must not become a 500 or a decision
        log.exception("callback parsing failed for channel %s", config.pk)
        result = CallbackResult.refuse("malformed callback")
    if result.kind == "challenge":
        return channel.callback_response(result, None)
    if not _storable(result.external_user_id):  # whatever a provider let through, never a 500
        result = CallbackResult.refuse("malformed user id")
    identity = None
    if result.kind == "decision":
        identity = identity_for_click(config=config, external_id=result.external_user_id)
        outcome = _quick_decision(result, config, identity)
        if outcome is not None:
            return channel.callback_response(result, outcome)
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
            display_name=str(result.extra.get("display_name") or ""),
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


LINK_TEMPLATE = "channels_im/link.html"


@login_required(login_url=reverse_lazy("approvals:login"))
@require_http_methods(["GET", "POST"])
def link_identity(http_request: HttpRequest, token: str) -> HttpResponse:
    """Link the IM account a one-time link was made for to the signed-in user (GET asks, POST
    confirms). Refusals are pages with their 4xx status and a plain message."""
    user = http_request.user
    context = {"user_label": user.get_full_name() or user.get_username()}
    try:
        if http_request.method == "POST":
            identity = im_identity_link(token=token, user=user)
            messages.success(
                http_request,
                f"Your {identity.get_provider_display()} account is now linked in "
                f"{identity.organization.name}: your clicks on approval cards count as yours.",
            )
            return redirect("approvals:inbox")
        offer = link_offer_check(token=token, user=user)
    except LinkRefused as refused:
        return render(
            http_request, LINK_TEMPLATE, {**context, "problem": refused.message}, status=refused.status
        )
    return render(http_request, LINK_TEMPLATE, {**context, "offer": offer})
