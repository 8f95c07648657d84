"""The approvals app hands cards to the channel app without importing it (docs/design.md §2): a registry
answers which channel a request goes to, and signals sent on commit say what to deliver."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import channels
from approvals.services import confirmation_cancel, confirmation_decide
from approvals.signals import confirmation_opened, confirmation_settled
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, pay_tool, set_policy, suspended_run
from tests.channels_im.feishu_fake import FakeFeishu, configure_channel

pytestmark = pytest.mark.django_db(transaction=True)


class Heard:
    def __init__(self, signal: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        signal.connect(self, dispatch_uid=f"test-{id(self)}")
        self.signal = signal

    def __call__(self, sender: Any, **kwargs: Any) -> None:
        kwargs.pop("signal", None)
        self.calls.append(kwargs)

    def close(self) -> None:
        self.signal.disconnect(dispatch_uid=f"test-{id(self)}")


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> Resumes:
    resumes = Resumes()
    monkeypatch.setattr("agents.executors.dispatch_resume", resumes)
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    return resumes


def test_a_new_request_is_announced_once_with_the_channel_the_registry_chose(
    personas: Any, quiet: Resumes, settings: Any
) -> None:
    settings.CHANNEL_DELIVERY = "celery"  # eager in tests; the fake platform answers
    opened = Heard(confirmation_opened)
    try:
        with FakeFeishu() as fake:
            configure_channel(personas.org, fake=fake)
            set_policy(personas)
            _, request = suspended_run(personas, Harness(pay_tool()))
    finally:
        opened.close()
    assert request.channel == "feishu"
    assert opened.calls == [{"request_id": request.pk, "channel": "feishu"}]


def test_it_sends_cards_to_the_web_inbox_when_no_channel_app_answers(
    personas: Any, quiet: Resumes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channels, "_resolver", None)
    with FakeFeishu() as fake:
        configure_channel(personas.org, fake=fake)
        set_policy(personas)
        _, request = suspended_run(personas, Harness(pay_tool()))
    assert request.channel == "web" and request.channel_config_id is None
    assert fake.im_calls == [], "nothing was sent to the platform"


def test_a_verdict_and_a_withdrawal_are_each_announced_after_commit(personas: Any, quiet: Resumes) -> None:
    set_policy(personas)
    settled = Heard(confirmation_settled)
    try:
        _, approved = suspended_run(personas, Harness(pay_tool()))
        confirmation_decide(request_id=approved.pk, approve=True, user=personas.approver)
        _, withdrawn = suspended_run(personas, Harness(pay_tool()))
        assert confirmation_cancel(request_id=withdrawn.pk, reason="run cancelled")
        assert not confirmation_cancel(request_id=withdrawn.pk, reason="twice")
    finally:
        settled.close()
    assert settled.calls == [
        {"request_id": approved.pk, "channel": "web", "status": "approved"},
        {"request_id": withdrawn.pk, "channel": "web", "status": "cancelled"},
    ]
