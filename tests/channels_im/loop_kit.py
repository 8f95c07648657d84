"""What the tests of card clicks answered on the server's event loop share: production's world
(Celery with a broker, on a queue of the test's own), the lane's hand-offs to the thread path as
recorded, and the outbox and broker they read (the fixtures: conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import redis
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings

from approvals.decision_sql import facts_from_row, facts_sql
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide_click_async
from fimone import adb
from fimone.models import OutboxMessage
from tests.agents.engine_kit import Harness
from tests.channels_im.click_kit import APRIL, park


class Handoffs:
    """The thread path's work the lane handed over (``sync_to_async`` calls), recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, function: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
        name = getattr(getattr(function, "func", function), "__name__", repr(function))
        handed = sync_to_async(function, **kwargs)

        async def call(*args: Any) -> Any:
            self.calls.append(name)
            return await handed(*args)

        return call


class Production:
    """Celery with a broker, as deployed, on a queue of this test's own (emptied after): from
    :meth:`on`, once the test's world is set up (its cards delivered in process)."""

    def __init__(self, settings: Any) -> None:
        from fimone.celery import app

        self.app, self.settings = app, settings
        self.queue = f"loop-test-{uuid.uuid4().hex[:8]}"
        self.previous = app.conf.task_default_queue, app.conf.task_always_eager
        settings.RUN_EXECUTOR = settings.CHANNEL_DELIVERY = "celery"
        settings.QUICK_CLICKS = True

    def on(self) -> None:
        self.app.conf.task_default_queue, self.app.conf.task_always_eager = self.queue, False

    def off(self) -> None:
        self.app.conf.task_default_queue, self.app.conf.task_always_eager = self.previous
        client = redis.Redis.from_url(settings.REDIS_URL)
        for key in client.scan_iter(match=f"{self.queue}*"):
            client.delete(key)
        client.close()


db = sync_to_async


async def parked_with(
    production: Production, personas: Any, harness: Harness, **policy: Any
) -> ConfirmationRequest:
    request = await db(park)(personas, harness, **policy)
    production.on()
    return request


def broker_messages(queue: str) -> int:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return client.llen(queue)
    finally:
        client.close()


def the_outbox() -> list[tuple[str, list[Any]]]:
    return list(OutboxMessage.objects.order_by("pk").values_list("task", "args"))


async def click_on(
    connection: Any,
    request: ConfirmationRequest,
    user: Any,
    channel: Any,
    *,
    approve: bool = True,
    reason: str = "",
    organization_id: int | None = None,
    between: Callable[[], Any] | None = None,
) -> Any:
    """A click of ``user`` on ``request``'s card in ``channel`` decided the event loop's way
    (``confirmation_decide_click_async``) on ``connection``, from the facts the loop reads
    (``approvals.decision_sql.facts_sql``) for ``organization_id`` (the channel's by default);
    ``between`` runs after the read and before the write. Call in production mode."""
    row = await adb.fetchone(
        connection,
        facts_sql(user="%(user)s"),
        {"request": request.pk, "organization": organization_id or channel.organization_id, "user": user.pk},
    )
    facts = None if row is None else facts_from_row(row)
    if between is not None:
        await sync_to_async(between)()
    return await confirmation_decide_click_async(
        connection,
        facts=facts,
        user=user,
        approve=approve,
        reason=reason,
        via_channel_id=channel.pk,
        external_id=APRIL,
    )


def decide_on_the_loop(request: ConfirmationRequest, user: Any, channel: Any, **click: Any) -> Any:
    """:func:`click_on` on a connection of its own, from a test's thread."""

    async def decide() -> Any:
        connection = await adb.connect()
        try:
            return await click_on(connection, request, user, channel, **click)
        finally:
            await connection.close()

    return async_to_sync(decide)()
