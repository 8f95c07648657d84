"""Reactions to the approvals app's signals: a new request's card is delivered, a settled one's
card shows the verdict (both off the caller's thread, see :mod:`channels_im.delivery`)."""

from __future__ import annotations

from typing import Any

from channels_im.delivery import enqueue_card_delivery, enqueue_card_update


def deliver_card(sender: Any, *, request_id: Any, channel: str, **kwargs: Any) -> None:
    enqueue_card_delivery(request_id, channel=channel)


def update_card(sender: Any, *, request_id: Any, channel: str, **kwargs: Any) -> None:
    enqueue_card_update(request_id, channel=channel)
