"""WebSocket consumers. Small: authenticate in ``connect``, one handler per event type."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer


def run_group(run_id: int) -> str:
    """The channel-layer group that receives a run's events."""
    return f"run.{run_id}"


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    """Streams one run's events to its owner (``ws/runs/<id>/``)."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await self._may_watch(user):
            await self.close(code=4404)
            return
        self.group = run_group(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """The stream is one-way: what a client sends is ignored, never parsed. (The JSON base
        class would decode every frame, and a frame nested 100,000 levels deep would end the
        connection with a ``RecursionError``.)"""

    async def _may_watch(self, user: Any) -> bool:
        from agents.selectors import run_visible_to

        return await run_visible_to(run_id=self.run_id, user=user)

    async def run_event(self, message: dict[str, Any]) -> None:
        """A persisted RunEvent (or a streamed delta), pushed after its transaction committed."""
        await self.send_json(message["event"])

    async def run_events(self, message: dict[str, Any]) -> None:
        """The events one transaction committed, in seq order: sent to the socket one by one."""
        for event in message["events"]:
            await self.send_json(event)
