"""An approval through WeCom end to end (docs/design.md §1.7, §6): the card goes to :class:`FakeWecom`
through the real delivery task (Celery eager), clicks are encrypted and signed by wechatpy and
posted to the real callback endpoint, the run is resumed by the engine, and the card is updated
with the send's single-use response_code."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client

from agents.models import Run, RunStatus
from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity
from channels_im.wecom.transport import parse_message_ref
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import PAY_ARGS, pay_tool, set_policy, suspended_run
from tests.channels_im.wecom_fake import (
    HANG,
    HTTP_500,
    LOST,
    RECIPIENTS,
    FakeWecom,
    click_xml,
    errcode,
    signed_callback,
)

# Verdicts act after commit (resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

Kind = ConfirmationEvent.Kind
APRIL = "april.chen"
SEND = "/cgi-bin/message/send"
UPDATE = "/cgi-bin/message/update_template_card"


@dataclass
class Flow:
    wecom: FakeWecom
    config: ChannelConfig
    tool: RecordingTool
    harness: Harness
    run: Run
    request: ConfirmationRequest

    def click(self, *, user: str = APRIL, decision: str = "approve") -> HttpResponse:
        query, body = signed_callback(
            click_xml(request_id=str(self.request.pk), user_id=user, decision=decision)
        )
        return Client().post(
            f"/im/callback/{self.config.callback_key}/?{query}", data=body, content_type="text/xml"
        )

    def refresh(self) -> ConfirmationRequest:
        self.request.refresh_from_db()
        return self.request

    def kinds(self) -> list[str]:
        return list(self.request.events.order_by("pk").values_list("kind", flat=True))


@pytest.fixture
def wecom() -> Iterator[FakeWecom]:
    with FakeWecom() as fake:
        yield fake


def park(personas: Any, wecom: FakeWecom, **policy: Any) -> Flow:
    personas.approver.first_name, personas.approver.last_name = "April", "Chen"
    personas.approver.save()
    config = wecom.channel_config(personas.org, is_default=True)
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="wecom", external_id=APRIL
    )
    set_policy(personas, **policy)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)
    return Flow(wecom, config, tool, harness, run, request)


def _approve_in_wecom_and_resume(personas: Any, resumes: Any, wecom: FakeWecom) -> None:
    flow = park(personas, wecom)

    request = flow.refresh()
    [send] = wecom.calls(SEND)
    card = send.body["template_card"]
    assert send.body["msgtype"] == "template_card" and send.body["touser"] == RECIPIENTS
    assert send.body["enable_duplicate_check"] == 1
    assert card["card_type"] == "button_interaction"
    assert [b["key"] for b in card["button_list"]] == [f"approve:{request.pk}", f"reject:{request.pk}"]
    assert request.channel == "wecom" and parse_message_ref(request.external_message_id) is not None

    response = flow.click()

    assert response.status_code == 200
    request = flow.refresh()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.approver
    assert request.responded_by_external_id == APRIL
    assert request.events.get(kind=Kind.DECIDED).details["via"] == flow.config.pk
    assert resumes.run_ids == [flow.run.pk]
    assert flow.harness.resume(flow.run) == RunStatus.COMPLETED
    assert flow.harness.resume(flow.run) is None
    assert flow.tool.calls == [PAY_ARGS]

    [update] = wecom.calls(UPDATE)
    assert update.body["response_code"] == parse_message_ref(request.external_message_id)[1]
    assert update.body["atall"] == 1
    settled = wecom.cards[card["task_id"]]["card"]
    assert settled["replace_text"] == "Approved"
    assert settled["sub_title_text"].startswith("Approved by April Chen at ")
    assert wecom.notices == []
    assert flow.kinds() == [Kind.CREATED, Kind.DELIVERED, Kind.DECIDED, Kind.EXECUTED]


def test_an_approval_clicked_in_wecom_resumes_the_run_which_pays_once(personas, resumes, wecom) -> None:
    _approve_in_wecom_and_resume(personas, resumes, wecom)


@pytest.mark.postgres
@pytest.mark.redis
def test_an_approval_clicked_in_wecom_resumes_the_run_on_postgresql_and_redis(
    personas, resumes, wecom
) -> None:
    _approve_in_wecom_and_resume(personas, resumes, wecom)


def test_a_reject_click_greys_the_card_out_and_the_tool_never_runs(personas, resumes, wecom) -> None:
    flow = park(personas, wecom)

    flow.click(decision="reject")

    assert flow.refresh().status == ConfirmationStatus.REJECTED
    flow.harness.resume(flow.run)
    assert flow.tool.calls == []
    [update] = wecom.calls(UPDATE)
    assert update.body["template_card"]["replace_text"] == "Rejected"


def test_a_second_approver_clicking_after_the_verdict_is_told_privately(personas, resumes, wecom) -> None:
    flow = park(personas, wecom)
    ImIdentity.objects.create(
        organization=personas.org, user=personas.admin, provider="wecom", external_id="adam"
    )
    flow.click()

    response = flow.click(user="adam", decision="reject")

    assert response.status_code == 200 and flow.refresh().status == ConfirmationStatus.APPROVED
    [notice] = wecom.notices
    assert notice["touser"] == "adam" and notice["text"]["content"] == "This request was already approved."
    assert len(wecom.calls(UPDATE)) == 1, "the single-use response_code is spent once"


def test_a_first_vote_of_two_keeps_the_single_use_code_for_the_verdict(personas, resumes, wecom) -> None:
    flow = park(personas, wecom, approvals_required=2)
    ImIdentity.objects.create(
        organization=personas.org, user=personas.admin, provider="wecom", external_id="adam"
    )

    flow.click()

    assert flow.refresh().status == ConfirmationStatus.PENDING
    assert wecom.calls(UPDATE) == [], "the card's one update is kept for the verdict"
    [notice] = wecom.notices
    assert notice["touser"] == APRIL
    assert notice["text"]["content"] == "Your approval was recorded: 1 of 2 approvals — waiting for one more."

    flow.click(user="adam")

    assert flow.refresh().status == ConfirmationStatus.APPROVED
    [update] = wecom.calls(UPDATE)
    assert update.body["template_card"]["replace_text"] == "Approved"


# --- delivery faults -----------------------------------------------------------------------------


def test_a_card_wecom_fails_to_take_is_retried_and_delivered(personas, resumes, wecom) -> None:
    wecom.fail_next(HTTP_500, errcode(-1, "system busy"))

    flow = park(personas, wecom)

    assert flow.kinds() == [Kind.CREATED, Kind.DELIVERY_FAILED, Kind.DELIVERY_FAILED, Kind.DELIVERED]
    assert len(wecom.cards) == 1


def test_a_permanent_wecom_error_is_logged_once_and_not_retried(personas, resumes, wecom) -> None:
    wecom.fail_next(errcode(81013, "user & party & tag all invalid"))

    flow = park(personas, wecom)

    [failure] = flow.refresh().events.filter(kind=Kind.DELIVERY_FAILED)
    assert failure.details["will_retry"] is False and "errcode 81013" in failure.details["error"]
    assert len(wecom.calls(SEND)) == 1 and flow.request.status == ConfirmationStatus.PENDING


def test_a_wrong_app_secret_is_not_retried_and_never_echoed(personas, resumes, wecom) -> None:
    config = wecom.channel_config(personas.org, is_default=True, name="typo")
    config.secrets = {**config.secrets, "secret": "a-secret-with-a-typo"}
    config.save()
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))

    [failure] = request.events.filter(kind=Kind.DELIVERY_FAILED)
    assert "check corp_id and secret" in failure.details["error"] and failure.details["will_retry"] is False
    assert "a-secret-with-a-typo" not in failure.details["error"]


def test_a_card_whose_answer_was_lost_is_not_sent_twice(personas, resumes, wecom) -> None:
    wecom.fail_next(LOST)  # WeCom takes the card, then the answer never arrives

    flow = park(personas, wecom)

    assert len(wecom.calls(SEND)) == 2 and len(wecom.cards) == 1, "the duplicate check swallowed the retry"
    failed = flow.refresh().events.get(kind=Kind.DELIVERY_FAILED)
    assert failed.details["maybe_sent"] is True and "within 0.5 s" in failed.details["error"]
    flow.click()
    assert len(wecom.calls(UPDATE)) == 1


def test_an_expired_access_token_is_fetched_again_once(personas, resumes, wecom) -> None:
    flow = park(personas, wecom)
    wecom.expire_tokens()

    flow.click()

    assert len(wecom.calls("/cgi-bin/gettoken")) == 2
    [failed, updated] = wecom.calls(UPDATE)
    assert failed.query["access_token"] != updated.query["access_token"]
    assert flow.refresh().status == ConfirmationStatus.APPROVED


def test_a_card_update_wecom_never_answers_does_not_spoil_the_answer_to_the_click(
    personas, resumes, wecom
) -> None:
    flow = park(personas, wecom)
    wecom.fail_next(HANG, HANG, HANG, HANG, HANG, HANG, HANG, paths=(UPDATE,))

    response = flow.click()

    assert response.status_code == 200 and flow.refresh().status == ConfirmationStatus.APPROVED
