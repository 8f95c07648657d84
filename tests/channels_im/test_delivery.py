"""Embedded delivery: cards to IM platforms go through a background pool, off the caller's
thread, with the same attempts and backoff as the Celery task."""

from __future__ import annotations

import time
from typing import Any

import pytest

from approvals.models import ConfirmationEvent, ConfirmationRequest
from channels_im.delivery import enqueue_card_delivery
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.channels_im.feishu_fake import FakeFeishu, configure_channel

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_in_embedded_mode_a_card_is_sent_off_the_callers_thread_and_retried_with_backoff(
    personas: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr("agents.executors.dispatch_resume", lambda run_id, reason: None)
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    monkeypatch.setattr("channels_im.services.backoff_seconds", lambda attempt: 0.05)
    settings.CHANNEL_DELIVERY = "background"
    with FakeFeishu(hang_seconds=1.0) as fake:
        configure_channel(personas.org, fake=fake)
        fake.fail_next("500")
        set_policy(personas)

        started = time.monotonic()
        _, request = suspended_run(personas, Harness(pay_tool()))
        parked_in = time.monotonic() - started

        delivered = wait_for(lambda: request.events.filter(kind=ConfirmationEvent.Kind.DELIVERED).first())
    assert delivered.details["attempt"] == 2, "the failed first attempt was retried"
    assert request.events.filter(kind=ConfirmationEvent.Kind.DELIVERY_FAILED).count() == 1
    assert ConfirmationRequest.objects.get(pk=request.pk).external_message_id.startswith("om_")
    assert parked_in < 5, "the run was parked without waiting for the platform"


def test_the_web_inbox_is_delivered_in_place(
    personas: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr("agents.executors.dispatch_resume", lambda run_id, reason: None)
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    calls: list = []
    monkeypatch.setattr("channels_im.delivery._background", lambda: calls.append(1))
    settings.CHANNEL_DELIVERY = "background"
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    assert request.events.filter(kind=ConfirmationEvent.Kind.DELIVERED).exists() and calls == []
    enqueue_card_delivery(request.pk, channel="web")
    assert calls == []
