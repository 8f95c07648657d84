"""Inbound callbacks: one URL per channel configuration, ``/im/callback/<callback_key>/``.

The provider verifies the request (signature, token, timestamp window, replay) before it parses
anything; only then is the clicker mapped to a user of ours and the decision handed to the
approvals service, which checks that the request belongs to this channel and that the user may
decide it. Nothing here ever answers 500: a failure is a clear 4xx and a log line.
"""

from __future__ import annotations

import logging
import uuid

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.selectors import request_for_decision
from approvals.services import confirmation_decide, log_event
from channels_im.base import CallbackResult
from channels_im.delivery import channel_for
from channels_im.models import ChannelConfig, ImIdentity

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


def _storable(external_id: str) -> bool:
    return isinstance(external_id, str) and len(external_id) <= 200 and "\x00" not in external_id


@csrf_exempt  # verified by the provider's signature instead; the platform holds no CSRF token
@require_POST
def im_callback(http_request: HttpRequest, callback_key: str) -> HttpResponse:
    config = ChannelConfig.objects.filter(callback_key=callback_key, active=True).first()
    if config is None:
        return JsonResponse({"error": "unknown channel"}, status=404)
    channel = channel_for(config)
    try:
        result = channel.parse_callback(http_request)
    except Exception:  # a provider bug must not become a 500 or a decision
        log.exception("callback parsing failed for channel %s", config.pk)
        result = CallbackResult.refuse("malformed callback")
    if result.kind == "challenge":
        return channel.callback_response(result, None)
    if not _storable(result.external_user_id):  # whatever a provider let through, never a 500
        result = CallbackResult.refuse("malformed user id")
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
    identity = (
        ImIdentity.objects.select_related("user")
        .filter(provider=config.kind, external_id=result.external_user_id)
        .first()
    )
    if identity is None:
        log_event(
            request_id=request.pk,
            kind=ConfirmationEvent.Kind.CLICK_REFUSED,
            external_id=result.external_user_id,
            reason="the clicker is not mapped to a user",
            via=config.pk,
        )
        refusal = CallbackResult.refuse(
            "Your account is not linked to FIM One: ask an administrator to map your IM identity.",
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
