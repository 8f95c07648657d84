"""WebSocket consumers. Small: authenticate in ``connect``, one handler per event type."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents.events import EPHEMERAL
from agents.selectors import run_event_page_after, run_visible_to
from tenancy.access import RECHECK_SECONDS, access_group

LOST_ACCESS = 4403
"""The close code of a stream whose watcher may no longer watch it (left the organisation, lost
the role, deactivated)."""


def run_group(run_id: int) -> str:
    """The channel-layer group that receives a run's events."""
    return f"run.{run_id}"


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    """Streams one run's events to its owner (``ws/runs/<id>/``).

    ``?after=N`` resumes a stream: the stored events with ``seq > N`` come first, then live ones,
    each exactly once (a reconnecting page passes the last seq it applied). Without it, only live
    events are sent. A malformed ``after`` is refused (close code 4400).

    Access is checked at connect, again whenever the watcher's memberships or account change
    (``access.changed``, :mod:`tenancy.access`), and again with the first event sent after
    :data:`~tenancy.access.RECHECK_SECONDS`: a watcher who lost access is sent nothing more and
    the socket closes with :data:`LOST_ACCESS`."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await self._may_watch(user):
            await self.close(code=4404)
            return
        after = _after_from(self.scope)
        if after is _BAD_AFTER:
            await self.close(code=4400)
            return
        # Subscribe first, then replay: an event committed meanwhile is either in the replay or
        # queued on this channel (consumers handle one message at a time, so it waits until the
        # replay is done) — and then dropped by seq if the replay already sent it. No gap, no double.
        self.group = run_group(self.run_id)
        self.user = user
        self.access_group = access_group(user.pk)
        self.checked_at = time.monotonic()
        await self.channel_layer.group_add(self.access_group, self.channel_name)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        if after is not None:
            await self._replay(after)

    async def _replay(self, after: int) -> None:
        """Send the stored events with ``seq > after``, in seq order, page by page."""
        self.last_sent = after
        while True:
            messages, has_more = await run_event_page_after(run_id=self.run_id, after=self.last_sent)
            for message in messages:
                await self.send_json(message)
                self.last_sent = message["seq"]
            if not has_more:
                return

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.channel_layer.group_discard(self.access_group, self.channel_name)

    async def access_changed(self, message: dict[str, Any]) -> None:
        """The watcher's memberships or account changed: check again now."""
        await self._still_allowed(force=True)

    async def _still_allowed(self, *, force: bool = False) -> bool:
        """Whether the watcher may still watch (checked again when ``force`` or when the last
        check is older than RECHECK_SECONDS); if not, the stream stops for good."""
        if getattr(self, "lost", False):
            return False
        if not force and time.monotonic() - self.checked_at < RECHECK_SECONDS:
            return True
        user = await _reloaded(self.user)
        allowed = user is not None and user.is_active and await self._may_watch(user)
        self.checked_at = time.monotonic()
        if not allowed:
            self.lost = True
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.close(code=LOST_ACCESS)
        return allowed

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """The stream is one-way: what a client sends is ignored, never parsed. (The JSON base
        class would decode every frame, and a frame nested 100,000 levels deep would end the
        connection with a ``RecursionError``.)"""

    async def _may_watch(self, user: Any) -> bool:
        return await run_visible_to(run_id=self.run_id, user=user)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels closes stale database connections before every handler, a hop to a thread per
        message; the stream's events need no database, and a busy server sends thousands a second
        (each event once per watching socket), so they skip it. Everything else (connect, the
        replay) goes through Channels' own dispatch."""
        if message["type"] == "run.events":
            await self.run_events(message)
        elif message["type"] == "run.event":
            await self.run_event(message)
        else:
            await super().dispatch(message)

    async def run_event(self, message: dict[str, Any]) -> None:
        """A persisted RunEvent (or a streamed delta), pushed after its transaction committed."""
        await self._forward(message["event"])

    async def run_events(self, message: dict[str, Any]) -> None:
        """The events one transaction committed, in seq order: sent to the socket one by one."""
        for event in message["events"]:
            await self._forward(event)

    async def _forward(self, event: dict[str, Any]) -> None:
        """Send a live event unless a replay already sent it. A delta carries the seq of the last
        stored event before it, so it is stale only once a later stored event was sent.

        Live events travel over Redis pub/sub, which keeps nothing for a server that missed them
        (a reconnect to Redis): an event whose seq skips past the next one expected means some
        were lost on the way, so the gap is replayed from the database first. Every stored event
        is committed before it is published, so the replay holds at least the missing ones."""
        if not await self._still_allowed():
            return
        last_sent = getattr(self, "last_sent", None)
        is_delta = event.get("type") in EPHEMERAL
        seq = event.get("seq", 0)
        if last_sent is None:
            if not is_delta:
                self.last_sent = seq  # a live-only stream counts from its first stored event
            await self.send_json(event)
            return
        if seq > last_sent + (0 if is_delta else 1):
            await self._replay(last_sent)
            last_sent = self.last_sent
        if seq < last_sent or (seq == last_sent and not is_delta):
            return
        if not is_delta:
            self.last_sent = seq
        await self.send_json(event)


async def _reloaded(user: Any) -> Any:
    """The watcher's account as it is now (``None`` if it was deleted)."""
    from django.contrib.auth import get_user_model

    return await get_user_model().objects.filter(pk=user.pk).afirst()


_BAD_AFTER: Any = object()
MAX_SEQ = 2**31 - 1


def _after_from(scope: dict[str, Any]) -> Any:
    """The ``after`` of the query string: the last seq the client has seen (``None`` when absent:
    live events only), or ``_BAD_AFTER`` if it is not a whole number in range."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
    if not values:
        return None
    raw = values[-1].strip()
    if not raw.isascii() or not raw.isdigit() or int(raw) > MAX_SEQ:
        return _BAD_AFTER
    return int(raw)
