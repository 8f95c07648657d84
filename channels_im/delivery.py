"""Choosing a request's channel and delivering its card (docs/design.md §6).

The dispatcher of the app: it hands each delivery to the Celery tasks (:mod:`channels_im.tasks`),
or in embedded mode runs the same attempts (:mod:`channels_im.services`) on a small background
pool. Which channel class serves a configuration is the providers' registry's to say
(:func:`approvals.channels.channel_for`)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from approvals.models import ChannelConfig
from channels_im.services import card_deliver_attempt, card_update_attempt
from channels_im.tasks import MAX_RETRIES, card_deliver, card_update

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


def enqueue_card_delivery(request_id: uuid.UUID, *, channel: str) -> None:
    """Send the request's card, off the caller's thread. Call after commit."""
    _dispatch(card_deliver, card_deliver_attempt, request_id, channel)


def enqueue_card_update(request_id: uuid.UUID, *, channel: str) -> None:
    """Show the request's state (its verdict, or a quorum's tally) on its card, off the caller's
    thread. Call after commit. The web inbox reads the row itself: there is nothing to update."""
    if channel == "web":
        return
    _dispatch(card_update, card_update_attempt, request_id, channel)


def _dispatch(task: Any, attempt: Callable[..., float | None], request_id: uuid.UUID, channel: str) -> None:
    """Celery in production. In embedded mode a platform call runs on a small background pool, so a
    slow IM platform never holds the engine's database thread or a callback's 3-second answer;
    the web inbox needs no call at all and is handled in place."""
    if settings.CHANNEL_DELIVERY == "background" and channel != "web":
        _background().submit(_attempt_with_backoff, attempt, str(request_id))
    else:
        task.delay(str(request_id))


def _attempt_with_backoff(attempt: Callable[..., float | None], request_id: str) -> None:
    """The embedded stand-in for the Celery task's retries: same attempts, same backoff."""
    try:
        for number in range(1, MAX_RETRIES + 2):
            retry_in = attempt(request_id=request_id, attempt=number, final=number > MAX_RETRIES)
            if retry_in is None:
                return
            time.sleep(retry_in)
    except Exception:
        log.exception("background delivery of %s failed", request_id)
    finally:
        close_old_connections()


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _background() -> ThreadPoolExecutor:
    global _pool  # one pool per process, created on first use
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fimone-delivery")
        return _pool
