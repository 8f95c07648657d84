"""The live inbox: who is told, after commit, that a request entered or left their inbox.

Each approver has a channel-layer group of their own (:func:`inbox_group`); ``approvals.consumers.
InboxConsumer`` subscribes a signed-in user's socket to theirs. A change pushes only the request's
id and what happened to it: the page then asks the server for its inbox (the same authorised
reads as the inbox page), so nothing about a request travels to a socket that could not read it.
"""

from __future__ import annotations

import logging
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from approvals.models import ConfirmationApprover, ConfirmationRequest
from tenancy.models import Membership

log = logging.getLogger(__name__)

OPENED = "opened"
SETTLED = "settled"
VOTED = "voted"  # a vote was counted and the request still waits for more


def inbox_group(user_id: int) -> str:
    """The channel-layer group of ``user_id``'s inbox sockets."""
    return f"inbox.{int(user_id)}"


def inbox_recipients(*, request_id: uuid.UUID | str) -> list[int]:
    """The ids of the request's approvers (its snapshot) who still belong to its organisation:
    those whose inbox may show it. Nobody of another organisation is ever among them."""
    organization_id = (
        ConfirmationRequest.objects.filter(pk=request_id).values_list("organization_id", flat=True).first()
    )
    if organization_id is None:
        return []
    members = Membership.objects.filter(organization_id=organization_id).values("user_id")
    return sorted(
        ConfirmationApprover.objects.filter(request_id=request_id, user_id__in=members)
        .values_list("user_id", flat=True)
        .distinct()
    )


def inbox_changed(*, request_id: uuid.UUID | str, change: str) -> None:
    """Tell the inboxes of ``request_id``'s approvers that it was ``change`` (opened, voted on or settled).
    Call after the change committed (``transaction.on_commit``). Fire and forget: a lost message
    costs a stale inbox until the next change or reload, never a wrong decision (deciding re-reads
    the row)."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "inbox.changed", "request_id": str(request_id), "change": change}
    try:
        for user_id in inbox_recipients(request_id=request_id):
            async_to_sync(layer.group_send)(inbox_group(user_id), message)
    except Exception:  # never fail a decision over a page refresh
        log.warning("could not tell the inboxes about request %s", request_id, exc_info=True)
