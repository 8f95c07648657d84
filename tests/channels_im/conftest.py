"""Fixtures of the channel tests: a fake Feishu, and its channel where April is linked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from channels_im.models import ChannelConfig, ImIdentity
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool
from tests.channels_im.click_kit import APRIL
from tests.channels_im.feishu_fake import FakeFeishu, configure_channel


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
