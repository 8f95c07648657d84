"""WebSocket consumers of the approvals side: the run stream as approvers and auditors watch it,
and the live inbox. Small: authenticate in ``connect``, one handler per message type."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents.consumers import RunStreamConsumer
from approvals import selectors
from approvals.live import inbox_group


class RunWatchConsumer(RunStreamConsumer):
    """``ws/runs/<id>/``: the run stream (resume, dedup) for everyone who may read the run — its
    owner, and the approvers, requester, auditors and admins of a request it opened
    (:func:`approvals.selectors.runs_visible_to`). Anyone else is closed with 4404."""

    async def _may_watch(self, user: Any) -> bool:
        return await database_sync_to_async(selectors.run_visible_to)(run_id=self.run_id, user=user)


class InboxConsumer(AsyncJsonWebsocketConsumer):
    """``ws/inbox/``: tells a signed-in user's page that a request entered or left their inbox
    (``{"request_id": …, "change": "opened" | "voted" | "settled"}``); the page then re-reads its inbox over
    HTTP. Signed-out sockets are closed with 4401. One-way: frames from the client are ignored."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.group = inbox_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Ignored, never parsed (see ``RunStreamConsumer.receive``)."""

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"request_id": message["request_id"], "change": message["change"]})
