"""Fixtures of the channel tests: a fake Feishu, and its channel where April is linked; and, for
the clicks answered on the server's event loop, production's world around them (loop_kit.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from approvals.models import ChannelConfig, ConfirmationRequest
from channels_im import quick, replay
from channels_im.models import ImIdentity
from fimone import adb, rates
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, pay_tool
from tests.channels_im.click_kit import APRIL, park
from tests.channels_im.feishu_fake import FakeFeishu, configure_channel
from tests.channels_im.loop_kit import Handoffs, Production


@pytest.fixture
def fake() -> Iterator[FakeFeishu]:
    with FakeFeishu(hang_seconds=1.0) as server:
        yield server


@pytest.fixture
def channel(personas: Any, fake: FakeFeishu) -> ChannelConfig:
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="feishu", external_id=APRIL
    )
    return configure_channel(personas.org, fake=fake)


@pytest.fixture
def harness() -> Harness:
    return Harness(pay_tool())


# --- production's world for the clicks on the server's event loop (loop_kit.py) ----------------------


@pytest.fixture
def production(settings: Any) -> Iterator[Production]:
    world = Production(settings)
    try:
        yield world
    finally:
        world.off()


@pytest.fixture
def handoffs(monkeypatch: Any, production: Production) -> Handoffs:
    recorded = Handoffs()
    monkeypatch.setattr(quick, "sync_to_async", recorded)
    return recorded


@pytest.fixture
async def loop_connections() -> AsyncIterator[None]:
    """The test loop's pool and Redis client are closed with it."""
    yield
    await adb.close()
    await replay.close_async()
    await rates.close_async()


@pytest.fixture
def parked(
    production: Production, personas: Any, resumes: Resumes, channel: ChannelConfig, harness: Harness
) -> ConfirmationRequest:
    request = park(personas, harness)
    production.on()
    return request
