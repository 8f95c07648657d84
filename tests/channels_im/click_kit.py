"""What the card-click tests share: a run parked on its gated payment, April's signed click, and
what a decision leaves on the record (the Feishu channel where April is linked: conftest.py)."""

from __future__ import annotations

from typing import Any

from approvals.models import (
    ChannelConfig,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from tests.agents.engine_kit import Harness
from tests.approvals.kit import set_policy, suspended_run
from tests.channels_im.feishu_fake import click_event, keys_of, signed_body

Kind = ConfirmationEvent.Kind

APRIL = "ou_april0000000000000000000000001"
"""April's Feishu open_id."""


def park(personas: Any, harness: Harness, **policy: Any) -> ConfirmationRequest:
    set_policy(personas, **policy)
    _, request = suspended_run(personas, harness)
    request.refresh_from_db()
    return request


def written(request: ConfirmationRequest) -> dict[str, Any]:
    """What a decision leaves on the record, minus ids and moments."""
    request.refresh_from_db()
    decided = request.events.filter(kind=Kind.DECIDED).values("actor_id", "actor_external_id", "details")
    votes = ConfirmationVote.objects.filter(request=request).values(
        "user_id", "approve", "reason", "external_id"
    )
    return {
        "request": (
            request.status,
            request.responded_by_id,
            request.responded_by_external_id,
            request.reason,
            request.responded_at is not None,
        ),
        "kinds": list(request.events.order_by("pk").values_list("kind", flat=True)),
        "decided": list(decided),
        "votes": list(votes),
    }


def nothing_written(request: ConfirmationRequest) -> bool:
    request.refresh_from_db()
    return (
        request.status == ConfirmationStatus.PENDING
        and not ConfirmationVote.objects.filter(request=request).exists()
        and not request.events.filter(kind__in=[Kind.DECIDED, Kind.CLICK_REFUSED]).exists()
    )


def post_click(client: Any, channel: ChannelConfig, request: ConfirmationRequest, **fields: Any):
    keys = keys_of(channel)
    event = click_event(
        keys, request_id=str(request.pk), open_id=APRIL, message_id=request.external_message_id, **fields
    )
    data, headers = signed_body(event, encrypt_key=keys.encrypt_key)
    url = f"/im/callback/{channel.callback_key}/"
    return client.post(url, data=data, content_type="application/json", headers=headers)
