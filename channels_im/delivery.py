"""Choosing a request's channel and delivering its card (DESIGN §6)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from channels_im.base import Channel
from channels_im.models import ChannelConfig

log = logging.getLogger(__name__)


def resolve_channel(*, agent: Any, policy_channel_id: int | None) -> ChannelConfig | None:
    """The agent's approval channel, else the organisation's default, else ``None`` (web inbox).
    Inactive configurations are skipped."""
    if policy_channel_id is not None:
        config = ChannelConfig.objects.filter(pk=policy_channel_id, active=True).first()
        if config is not None:
            return config
    return ChannelConfig.objects.filter(
        organization_id=agent.organization_id, is_default=True, active=True
    ).first()


def channel_for(config: ChannelConfig | None) -> Channel:
    from channels_im.web.transport import WebChannel

    if config is None or config.kind == "web":
        return WebChannel(config)
    from channels_im.providers import provider_class

    return provider_class(config.kind)(config)


def enqueue_card_delivery(request_id: uuid.UUID) -> None:
    from channels_im.tasks import card_deliver

    card_deliver.delay(str(request_id))


def enqueue_card_update(request_id: uuid.UUID) -> None:
    from channels_im.tasks import card_update

    card_update.delay(str(request_id))
