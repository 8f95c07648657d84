"""Waking inline waiters the moment a request is decided (DESIGN §5 "Waking").

A decision publishes on the channel layer group of its request; a run waiting inline listens on
that group and wakes within milliseconds. A slow database poll is only the safety net.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from agents.engine.db import db

log = logging.getLogger(__name__)


def approval_group(request_id: uuid.UUID | str) -> str:
    return f"approval.{uuid.UUID(str(request_id)).hex}"


def wake(request_id: uuid.UUID | str) -> None:
    """Tell any inline waiter that ``request_id`` left pending. Call after the verdict committed."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "approval.verdict", "request_id": str(request_id)}
    group = approval_group(request_id)
    try:
        if settings.EMBEDDED:
            # The in-memory layer is not thread-safe: deliver on the loop where runs wait.
            from agents.executors import embedded

            embedded.submit(lambda: layer.group_send(group, message))
        else:
            async_to_sync(layer.group_send)(group, message)
    except Exception:  # the poll will still notice; never fail a decision over a wake-up
        log.warning("could not wake waiters of request %s", request_id, exc_info=True)


async def wait_for_verdict(request_id: uuid.UUID, *, window: float, poll: float) -> str:
    """Wait up to ``window`` seconds for the request to leave pending; return its status then.

    Subscribes first, then reads the status, so a decision that lands in between is not missed.
    """
    from approvals.selectors import request_status

    layer = get_channel_layer()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window
    channel = await layer.new_channel() if layer is not None else None
    group = approval_group(request_id)
    if channel is not None:
        await layer.group_add(group, channel)
    try:
        while True:
            status = await db(request_status, request_id=request_id)
            remaining = deadline - loop.time()
            if status != "pending" or remaining <= 0:
                return status
            wait = min(remaining, poll)
            if channel is None:
                await asyncio.sleep(wait)
                continue
            try:
                async with asyncio.timeout(wait):
                    await layer.receive(channel)
            except TimeoutError:
                pass  # the safety-net poll: read the row again
    finally:
        if channel is not None:
            await layer.group_discard(group, channel)
