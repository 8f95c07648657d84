"""Waking inline waiters the moment a request is decided (docs/design.md §5 "Waking").

A decision publishes on the channel layer group of its request; a run waiting inline listens on
that group and wakes within milliseconds. A slow database poll is only the safety net.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from typing import Any

from channels.layers import get_channel_layer

from agents import executors
from agents.engine.db import db
from approvals.selectors import request_status

log = logging.getLogger(__name__)


def approval_group(request_id: uuid.UUID | str) -> str:
    return f"approval.{uuid.UUID(str(request_id)).hex}"


# Inline waiters of this process: a decision taken in the same process (the embedded server, a
# worker's expiry sweep) wakes them directly, without a round trip through the channel layer.
_local_waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
_local_lock = threading.Lock()


def _wake_local(request_id: str) -> None:
    with _local_lock:
        waiters = list(_local_waiters.get(request_id, ()))
    for loop, event in waiters:
        loop.call_soon_threadsafe(event.set)


def wake(request_id: uuid.UUID | str) -> None:
    """Tell any inline waiter that ``request_id`` left pending. Call after the verdict committed.

    The message is sent from the process's long-lived event loop (the server's, or the embedded
    executor's own), never from a throw-away one: the in-memory layer is bound to its loop, and
    the Redis layer keeps its connections per loop, so a fresh loop per wake-up would reconnect
    every time. Fire and forget: the waiter's safety-net poll covers a lost message.
    """
    _wake_local(str(uuid.UUID(str(request_id))))
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "approval.verdict", "request_id": str(request_id)}
    group = approval_group(request_id)
    try:
        executors.embedded.submit(lambda: layer.group_send(group, message))
    except Exception:  # never fail a decision over a wake-up
        log.warning("could not wake waiters of request %s", request_id, exc_info=True)


async def wait_for_verdict(request_id: uuid.UUID, *, window: float, poll: float) -> str:
    """Wait up to ``window`` seconds for the request to leave pending.

    Returns ``"pending"`` when the window passed, ``"woken"`` when a verdict message arrived (the
    caller reads the row next, so it is not read twice), or the status the safety-net poll found.
    Subscribes first, then reads the status, so a decision that lands in between is not missed.
    """
    if window <= 0:  # no inline wait (the policy's window is 0): one read, nothing to subscribe to
        return await db(request_status, request_id=request_id)
    layer = get_channel_layer()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window
    key = str(request_id)
    woken = asyncio.Event()
    with _local_lock:
        _local_waiters.setdefault(key, set()).add((loop, woken))
    channel = await layer.new_channel() if layer is not None else None
    group = approval_group(request_id)
    if channel is not None:
        await layer.group_add(group, channel)
    listener = asyncio.ensure_future(_listen(layer, channel, woken)) if channel is not None else None
    try:
        while True:
            status = await db(request_status, request_id=request_id)
            remaining = deadline - loop.time()
            if status != "pending" or remaining <= 0:
                return status
            try:
                async with asyncio.timeout(min(remaining, poll)):
                    await woken.wait()
            except TimeoutError:
                continue  # the safety-net poll: read the row again
            return "woken"
    finally:
        with _local_lock:
            waiters = _local_waiters.get(key, set())
            waiters.discard((loop, woken))
            if not waiters:
                _local_waiters.pop(key, None)
        if channel is not None:
            # Unsubscribing costs a round trip the verdict need not wait for.
            _background(_unsubscribe(layer, group, channel, listener))


_tasks: set[asyncio.Task[Any]] = set()


def _background(coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    _tasks.add(task)  # keep a reference until it is done
    task.add_done_callback(_tasks.discard)


async def _unsubscribe(layer: Any, group: str, channel: str, listener: asyncio.Future[Any] | None) -> None:
    if listener is not None:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await listener
    try:
        await layer.group_discard(group, channel)
    except Exception:  # the group entry expires on its own
        log.debug("could not leave %s", group, exc_info=True)


async def _listen(layer: Any, channel: str, woken: asyncio.Event) -> None:
    """Turn the verdict message from another process into the local wake-up event. A layer
    failure only costs the wake-up: the waiter's poll still reads the row."""
    try:
        await layer.receive(channel)
    except Exception:
        log.debug("listening for a verdict on %s failed", channel, exc_info=True)
        return
    woken.set()
