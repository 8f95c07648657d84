"""Delivery attempts: one send or update, its outcome logged on the request."""

from __future__ import annotations

import logging
import random

from django.db import transaction

from approvals.channel_contract import DeliveryError
from approvals.channels import channel_for
from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.services import log_event

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
    """Show the request's current state on its card once (the verdict, or while it is pending the
    quorum's tally); retry on failure while attempts remain. Idempotent: the card is rendered from
    the row as it is now, so a repeated or late attempt shows the latest state, never an older one.

    A pending card is updated only when there is a tally to show and the platform allows updating
    a card more than once. If the verdict lands while a tally update is on its way, the card could
    end on the tally (the verdict's update may have gone first): the row is read again afterwards
    and the card updated once more with the verdict."""
    request = _for_update(request_id)
    if request is None or not request.external_message_id:
        return None
    channel = channel_for(request.channel_config)
    if request.is_pending and not (request.approvals_required > 1 and channel.updates_pending_cards):
        return None
    try:
        channel.update_card(request)
        if request.is_pending:
            settled = _for_update(request_id)
            if settled is not None and not settled.is_pending and settled.external_message_id:
                channel_for(settled.channel_config).update_card(settled)
    except DeliveryError as exc:
        will_retry = exc.retryable and not final
        log.warning("card update for %s failed (attempt %s): %s", request_id, attempt, exc)
        return backoff_seconds(attempt) if will_retry else None
    return None


def _for_update(request_id: str) -> ConfirmationRequest | None:
    return (
        ConfirmationRequest.objects.select_related("channel_config", "responded_by", "agent", "requested_by")
        .filter(pk=request_id)
        .first()
    )
