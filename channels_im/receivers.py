"""Reactions to the approvals app's signals: a new request's card is delivered, a settled one's
card shows the verdict, and a vote towards a quorum shows its tally on the card (all off the
caller's thread, see :mod:`channels_im.delivery`)."""

from __future__ import annotations

from typing import Any

from channels_im.delivery import enqueue_card_delivery, enqueue_card_update


def deliver_card(sender: Any, *, request_id: Any, channel: str, **kwargs: Any) -> None:
    enqueue_card_delivery(request_id, channel=channel)


def update_card(sender: Any, *, request_id: Any, channel: str, **kwargs: Any) -> None:
    enqueue_card_update(request_id, channel=channel)


def show_tally(sender: Any, *, request_id: Any, channel: str, **kwargs: Any) -> None:
    # The same update as the verdict's: it renders the row as it is now, tally included.
    enqueue_card_update(request_id, channel=channel)
