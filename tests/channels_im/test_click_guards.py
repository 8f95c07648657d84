"""What a verified card click cannot get past, whichever channel it comes through: the
clicker's ``DECISION_RATE`` (shared with the inbox and the API: docs/security.md, Throttles), and free text
PostgreSQL cannot hold (a NUL in the card's reason field, or in arguments edited in the inbox).
Never a 500: the click is either decided or refused, logged and the clicker told. The same on the
event loop's lane is in test_clicks_answered_on_the_loop.py and its neighbours; separation of
duties on every path in tests/approvals/test_separation_of_duties.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from approvals.models import ChannelConfig, ConfirmationRequest, ConfirmationStatus
from tests.admin_kit import page_text
from tests.agents.engine_kit import Harness
from tests.approvals.test_edit_on_approve import editable_request, inbox_post
from tests.channels_im.click_kit import Kind, park, post_click, written
from tests.channels_im.slack_fake import FakeSlack
from tests.channels_im.test_slack_flow import ephemeral_text
from tests.channels_im.test_slack_flow import park as park_in_slack
from tests.channels_im.test_wecom_flow import park as park_in_wecom
from tests.channels_im.wecom_fake import FakeWecom

pytestmark = pytest.mark.django_db(transaction=True)

NUL_REASON = "wrong\x00supplier"
STORED_REASON = "wrong\ufffdsupplier"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def wecom() -> Iterator[FakeWecom]:
    with FakeWecom() as fake:
        yield fake


def set_decision_rate(settings: Any, per_minute: int) -> int:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
            "decision": f"{per_minute}/min",
        },
    }
    return per_minute


@pytest.fixture
def decision_rate(settings: Any) -> int:
    """``DECISION_RATE`` of 2 a minute."""
    return set_decision_rate(settings, 2)


def use_up_the_rate(user: Any, limit: int) -> None:
    """``limit`` API decisions of ``user`` (on requests that do not exist: they count the same)."""
    client = APIClient()
    client.force_login(user)
    for _ in range(limit):
        assert (
            client.post(f"/api/approvals/{uuid.uuid4()}/decision/", {"decision": "reject"}).status_code == 404
        )


def api_decision(client: APIClient) -> Any:
    return client.post(f"/api/approvals/{uuid.uuid4()}/decision/", {"decision": "reject"})


def api_decision_status(user: Any) -> int:
    client = APIClient()
    client.force_login(user)
    return api_decision(client).status_code


def refused_for_the_rate(request: ConfirmationRequest, user: Any) -> bool:
    request.refresh_from_db()
    refusal = request.events.filter(kind=Kind.CLICK_REFUSED, actor=user).last()
    return (
        request.status == ConfirmationStatus.PENDING
        and not request.votes.exists()
        and refusal is not None
        and refusal.details["reason"] == "Too many decisions: the limit is 2 per minute."
    )


# --- a NUL in the reason ----------------------------------------------------------------------------


def _a_nul_in_the_reason_is_replaced_and_the_click_decided(
    personas: Any, harness: Harness, channel: ChannelConfig
) -> None:
    request = park(personas, harness)

    response = post_click(Client(), channel, request, decision="reject", form_value={"reason": NUL_REASON})

    assert response.status_code == 200
    assert response.json()["toast"] == {"type": "success", "content": "The request was rejected."}
    record = written(request)
    assert record["request"][0] == ConfirmationStatus.REJECTED and record["request"][3] == STORED_REASON
    assert [vote["reason"] for vote in record["votes"]] == [STORED_REASON]
    assert record["decided"][0]["details"]["reason"] == STORED_REASON


def test_a_click_with_a_nul_in_its_reason_is_decided_with_the_character_replaced(
    personas, resumes, harness, channel
) -> None:
    _a_nul_in_the_reason_is_replaced_and_the_click_decided(personas, harness, channel)


@pytest.mark.postgres
def test_a_click_with_a_nul_in_its_reason_is_decided_on_postgresql(
    personas, resumes, harness, channel
) -> None:
    _a_nul_in_the_reason_is_replaced_and_the_click_decided(personas, harness, channel)


# --- the decision rate ------------------------------------------------------------------------------


def test_card_clicks_count_against_the_decision_rate_the_api_shares(
    personas, resumes, channel, decision_rate
) -> None:
    for _ in range(decision_rate):  # clicks on cards of requests that do not exist count the same
        nowhere = SimpleNamespace(pk=uuid.uuid4(), external_message_id="om_gone")
        assert post_click(Client(), channel, nowhere, decision="approve").status_code == 200

    assert api_decision_status(personas.approver) == 429
    assert api_decision_status(personas.admin) == 404, "per user"


def test_a_feishu_click_past_the_rate_decides_nothing_and_the_clicker_is_told(
    personas, resumes, harness, channel, decision_rate
) -> None:
    request = park(personas, harness)
    use_up_the_rate(personas.approver, decision_rate)

    response = post_click(Client(), channel, request, decision="approve")

    assert response.status_code == 200
    toast = response.json()["toast"]
    assert toast["type"] == "error" and toast["content"].startswith("Too many decisions: the limit is 2 per")
    assert refused_for_the_rate(request, personas.approver)
    assert resumes.run_ids == []


def test_a_slack_click_past_the_rate_decides_nothing_and_the_clicker_is_told(
    personas, resumes, slack, decision_rate
) -> None:
    flow = park_in_slack(personas, slack)
    use_up_the_rate(personas.approver, decision_rate)

    response = flow.post(*flow.click())

    assert ephemeral_text(response).startswith("Too many decisions: the limit is 2 per minute.")
    assert refused_for_the_rate(flow.request, personas.approver)


def test_a_wecom_click_past_the_rate_decides_nothing_and_the_clicker_is_told(
    personas, resumes, wecom, decision_rate
) -> None:
    flow = park_in_wecom(personas, wecom)
    use_up_the_rate(personas.approver, decision_rate)

    response = flow.click()

    assert response.status_code == 200
    [notice] = wecom.notices
    assert notice["text"]["content"].startswith("Too many decisions: the limit is 2 per minute.")
    assert refused_for_the_rate(flow.request, personas.approver)


@pytest.mark.postgres
@pytest.mark.redis
def test_a_click_past_the_rate_decides_nothing_on_postgresql_and_redis(
    personas, resumes, harness, channel, decision_rate
) -> None:
    request = park(personas, harness)
    use_up_the_rate(personas.approver, decision_rate)

    response = post_click(Client(), channel, request, decision="approve")

    assert response.json()["toast"]["type"] == "error"
    assert refused_for_the_rate(request, personas.approver)


# --- free text from the inbox -------------------------------------------------------------------------


@pytest.mark.postgres
def test_edited_arguments_holding_a_nul_are_refused_in_the_inbox_and_the_refusal_is_logged(
    personas, resumes
) -> None:
    _, request, _, tool = editable_request(personas, resumes)
    edited = '{"purchase_id": "PO-1001\\u0000", "amount": 10}'

    page = inbox_post(personas.approver, request, arguments=edited)

    assert page.status_code == 200
    assert "The arguments were not changed: purchase_id contains a NUL character." in page_text(page)
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.edited_by is None
    refusal = request.events.get(kind=Kind.CLICK_REFUSED)
    assert refusal.details["edited_args"]["purchase_id"] == "PO-1001\ufffd"
    assert tool.calls == []
