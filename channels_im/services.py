"""Delivery attempts: one send or update, its outcome logged on the request."""

from __future__ import annotations

import logging
import random

from django.db import transaction

from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.services import log_event
from channels_im.base import DeliveryError
from channels_im.delivery import channel_for

log = logging.getLogger(__name__)


def backoff_seconds(attempt: int) -> float:
    """2, 4, 8, 16, 32 s (± 20 %): bounded exponential backoff between attempts."""
    return min(2.0**attempt, 60.0) * random.uniform(0.8, 1.2)


def card_deliver_attempt(*, request_id: str, attempt: int, final: bool) -> float | None:
    """Send the request's card once. Returns seconds to wait before retrying, or ``None`` when
    done (sent, no longer pending, or given up: the request then stays pending until it expires)."""
    request = (
        ConfirmationRequest.objects.select_related("channel_config", "agent", "requested_by")
        .filter(pk=request_id)
        .first()
    )
    if request is None or not request.is_pending:
        return None
    channel = channel_for(request.channel_config)
    # Only after a lost answer may the card exist already (one query, on retries only).
    maybe_posted = (
        attempt > 1
        and request.events.filter(
            kind=ConfirmationEvent.Kind.DELIVERY_FAILED, details__maybe_sent=True
        ).exists()
    )
    try:
        ref = channel.send_interactive_card(request, maybe_posted=maybe_posted)
    except DeliveryError as exc:
        will_retry = exc.retryable and not final
        details = {"maybe_sent": True} if exc.maybe_sent else {}
        log_event(
            request_id=request.pk,
            kind=ConfirmationEvent.Kind.DELIVERY_FAILED,
            attempt=attempt,
            error=str(exc)[:500],
            will_retry=will_retry,
            **details,
        )
        return backoff_seconds(attempt) if will_retry else None
    with transaction.atomic():
        ConfirmationRequest.objects.filter(pk=request.pk).update(external_message_id=ref[:200])
        log_event(
            request_id=request.pk, kind=ConfirmationEvent.Kind.DELIVERED, attempt=attempt, message_id=ref
        )
    return None


def card_update_attempt(*, request_id: str, attempt: int, final: bool) -> float | None:
    """Show the verdict on the card once; retry on failure while attempts remain."""
    request = (
        ConfirmationRequest.objects.select_related("channel_config", "responded_by", "agent", "requested_by")
        .filter(pk=request_id)
        .first()
    )
    if request is None or request.is_pending or not request.external_message_id:
        return None
    try:
        channel_for(request.channel_config).update_card(request)
    except DeliveryError as exc:
        will_retry = exc.retryable and not final
        log.warning("card update for %s failed (attempt %s): %s", request_id, attempt, exc)
        return backoff_seconds(attempt) if will_retry else None
    return None
