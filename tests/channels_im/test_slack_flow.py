"""An approval through Slack end to end, and every way it can go wrong (docs/design.md §1.7, §6).

The card goes to :class:`FakeSlack` through the real delivery task (Celery eager: retries happen
at once), clicks are signed by slack_sdk and posted to the real callback endpoint, and the run is
resumed by the engine itself.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client

from agents.models import Run, RunStatus
from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from approvals.services import confirmation_decide, confirmation_expire_due
from channels_im.models import ImIdentity
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import PAY_ARGS, pay_tool, set_policy, suspended_run
from tests.channels_im.slack_fake import (
    CHANNEL,
    HANG,
    HTTP_500,
    LOST,
    FakeSlack,
    api_error,
    click_body,
    ratelimited,
    signed_headers,
)

# Verdicts act after commit (resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

Kind = ConfirmationEvent.Kind
APRIL = "U0APRIL"  # the approver's Slack user id


@dataclass
class Flow:
    slack: FakeSlack
    config: ChannelConfig
    tool: RecordingTool
    harness: Harness
    run: Run
    request: ConfirmationRequest

    def click(self, *, user: str = APRIL, action: str = "approve") -> tuple[bytes, dict[str, str]]:
        """A click on the card's button as Slack would post it, signed."""
        body = click_body(request_id=str(self.request.pk), user_id=user, action_id=action)
        return body, signed_headers(body)

    def post(self, body: bytes, headers: dict[str, str], config: ChannelConfig | None = None) -> HttpResponse:
        return Client().post(
            f"/im/callback/{(config or self.config).callback_key}/",
            data=body,
            content_type="application/x-www-form-urlencoded",
            headers=headers,
        )

    def refresh(self) -> ConfirmationRequest:
        self.request.refresh_from_db()
        return self.request

    def kinds(self) -> list[str]:
        return list(self.request.events.order_by("pk").values_list("kind", flat=True))


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def park(personas: Any, slack: FakeSlack, **policy: Any) -> Flow:
    """Slack as the organisation's default channel, April mapped to her Slack id, and a run
    parked on its approval (its card delivered, or not, by the delivery task)."""
    personas.approver.first_name, personas.approver.last_name = "April", "Chen"
    personas.approver.save()
    config = slack.channel_config(personas.org, is_default=True)
    ImIdentity.objects.create(
        organization=personas.org,
        user=personas.approver,
        provider="slack",
        external_id=APRIL,
        display_name="april",
    )
    set_policy(personas, **policy)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)
    return Flow(slack, config, tool, harness, run, request)


def ephemeral_text(response: HttpResponse) -> str:
    assert response.status_code == 200
    answer = response.json()
    assert answer["response_type"] == "ephemeral" and answer["replace_original"] is False
    return answer["text"]


# --- the happy path ------------------------------------------------------------------------------


def _approve_in_slack_and_resume(personas: Any, resumes: Any, slack: FakeSlack) -> None:
    flow = park(personas, slack)

    request = flow.refresh()
    [post] = slack.calls("chat.postMessage")
    ref = f"{post.body['channel']}:{next(iter(slack.messages))[1]}"
    assert request.channel == "slack" and request.channel_config == flow.config
    assert request.external_message_id == ref
    delivered = request.events.get(kind=Kind.DELIVERED)
    assert delivered.details == {"attempt": 1, "message_id": ref}
    assert post.body["blocks"][-1]["elements"][0]["value"] == str(request.pk)

    response = flow.post(*flow.click())

    assert response.status_code == 200
    answer = response.json()
    assert answer["replace_original"] is True and answer["text"].startswith("Approved by April Chen at ")
    assert all(block["type"] != "actions" for block in answer["blocks"])
    request = flow.refresh()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.approver
    assert request.responded_by_external_id == APRIL
    decided = request.events.get(kind=Kind.DECIDED)
    assert decided.details["via"] == flow.config.pk and decided.actor_external_id == APRIL
    assert resumes.run_ids == [flow.run.pk], "the verdict asks for the parked run to resume"

    assert flow.harness.resume(flow.run) == RunStatus.COMPLETED
    assert flow.harness.resume(flow.run) is None
    assert flow.tool.calls == [PAY_ARGS]
    [update] = slack.calls("chat.update")
    assert f"{update.body['channel']}:{update.body['ts']}" == ref
    assert update.body["text"].startswith("Approved by April Chen at ")
    assert flow.kinds() == [Kind.CREATED, Kind.DELIVERED, Kind.DECIDED, Kind.EXECUTED]


def test_an_approval_clicked_in_slack_resumes_the_run_which_pays_once(personas, resumes, slack) -> None:
    _approve_in_slack_and_resume(personas, resumes, slack)


@pytest.mark.postgres
@pytest.mark.redis
def test_an_approval_clicked_in_slack_resumes_the_run_on_postgresql_and_redis(
    personas, resumes, slack
) -> None:
    _approve_in_slack_and_resume(personas, resumes, slack)


def test_a_reject_click_records_the_rejection_and_the_tool_never_runs(personas, resumes, slack) -> None:
    flow = park(personas, slack)

    response = flow.post(*flow.click(action="reject"))

    assert response.json()["text"].startswith("Rejected by April Chen at ")
    assert flow.refresh().status == ConfirmationStatus.REJECTED
    flow.harness.resume(flow.run)
    assert flow.tool.calls == []
    [update] = slack.calls("chat.update")
    assert ":x: *Rejected by April Chen" in update.body["blocks"][-2]["text"]["text"]


# --- delivery faults -----------------------------------------------------------------------------


def test_a_card_slack_never_takes_is_retried_then_given_up_and_the_request_expires_unrun(
    personas, resumes, slack
) -> None:
    slack.fail_next(HTTP_500, HTTP_500, HTTP_500, HANG, HANG, HANG)

    flow = park(personas, slack)

    request = flow.refresh()
    failures = list(request.events.filter(kind=Kind.DELIVERY_FAILED).order_by("pk"))
    assert [f.details["attempt"] for f in failures] == [1, 2, 3, 4, 5, 6]
    assert [f.details["will_retry"] for f in failures] == [True] * 5 + [False]
    assert all("(HTTP 500)" in f.details["error"] for f in failures[:3])
    assert all("did not answer chat.postMessage within 0.5 s" in f.details["error"] for f in failures[3:])
    assert len(slack.calls("chat.postMessage")) == 6
    assert request.status == ConfirmationStatus.PENDING and request.external_message_id == ""
    assert not request.events.filter(kind=Kind.DELIVERED).exists()

    assert confirmation_expire_due(now=request.expires_at + dt.timedelta(seconds=1)) == 1
    flow.harness.resume(flow.run)

    assert flow.refresh().status == ConfirmationStatus.EXPIRED
    assert flow.tool.calls == []
    flow.run.refresh_from_db()
    assert flow.run.output.startswith("Outcome: No decision within")
    assert slack.calls("chat.update") == [], "there is no card to update"


def test_a_permanent_slack_error_is_logged_once_and_not_retried(personas, resumes, slack) -> None:
    slack.fail_next(api_error("not_in_channel"))

    flow = park(personas, slack)

    [failure] = flow.refresh().events.filter(kind=Kind.DELIVERY_FAILED)
    assert failure.details == {
        "attempt": 1,
        "error": "Slack chat.postMessage failed: not_in_channel (HTTP 200)",
        "will_retry": False,
    }
    assert len(slack.calls("chat.postMessage")) == 1 and flow.request.status == ConfirmationStatus.PENDING


def test_a_rate_limited_card_is_delivered_on_the_next_attempt(personas, resumes, slack) -> None:
    slack.fail_next(ratelimited(retry_after=3))

    flow = park(personas, slack)

    assert flow.kinds() == [Kind.CREATED, Kind.DELIVERY_FAILED, Kind.DELIVERED]
    failed, delivered = flow.request.events.filter(kind__in=[Kind.DELIVERY_FAILED, Kind.DELIVERED])
    assert "ratelimited, retry after 3 s" in failed.details["error"] and failed.details["will_retry"]
    assert delivered.details["attempt"] == 2 and flow.refresh().external_message_id


def test_a_card_whose_answer_was_lost_is_found_in_the_channel_and_not_posted_twice(
    personas, resumes, slack
) -> None:
    slack.fail_next(LOST)  # Slack stores the card, then the answer never arrives

    flow = park(personas, slack)

    [(channel, ts)] = slack.messages  # one card in the channel, not two
    assert len(slack.calls("chat.postMessage")) == 1 and len(slack.calls("conversations.history")) == 1
    assert flow.kinds() == [Kind.CREATED, Kind.DELIVERY_FAILED, Kind.DELIVERED]
    failed, delivered = flow.request.events.filter(kind__in=[Kind.DELIVERY_FAILED, Kind.DELIVERED])
    assert failed.details["maybe_sent"] is True and failed.details["will_retry"] is True
    assert delivered.details == {"attempt": 2, "message_id": f"{channel}:{ts}"}

    flow.post(*flow.click())  # the one card is the one that gets updated

    [update] = slack.calls("chat.update")
    assert (update.body["channel"], update.body["ts"]) == (channel, ts)


def test_a_lost_card_is_found_past_the_first_page_of_a_busy_channels_history(
    personas, resumes, slack, monkeypatch
) -> None:
    slack.fail_next(LOST)
    post_and_store = slack._answer

    def then_the_channel_moves_on(call: Any) -> dict[str, Any]:
        answer = post_and_store(call)
        if call.method == "chat.postMessage":  # 450 messages arrive while the answer is lost
            later = int(time.time()) + 1
            for n in range(450):
                ts = f"{later}.{n:06d}"
                slack.messages[(CHANNEL, ts)] = {"text": f"chatter {n}", "blocks": [], "ts": ts}
        return answer

    monkeypatch.setattr(slack, "_answer", then_the_channel_moves_on)

    flow = park(personas, slack)

    cards = [message for message in slack.messages.values() if message.get("metadata")]
    assert len(cards) == 1 and len(slack.calls("chat.postMessage")) == 1
    assert len(slack.calls("conversations.history")) == 3  # 200 + 200 + the page holding the card
    assert flow.refresh().external_message_id == f"{CHANNEL}:{cards[0]['ts']}"


def test_without_the_history_scope_a_lost_card_is_posted_again_rather_than_not_at_all(
    personas, resumes, slack, caplog
) -> None:
    slack.fail_next(LOST)
    slack.fail_next(api_error("missing_scope"), methods=("conversations.history",))

    flow = park(personas, slack)

    assert len(slack.messages) == 2 and len(slack.calls("chat.postMessage")) == 2
    second = sorted(ts for _, ts in slack.messages)[-1]
    assert flow.refresh().external_message_id.endswith(second)
    assert "could not look for the posted card" in caplog.text and "missing_scope" in caplog.text


def test_a_card_refused_outright_is_not_looked_for_before_the_retry(personas, resumes, slack) -> None:
    slack.fail_next(HTTP_500)

    park(personas, slack)

    assert slack.calls("conversations.history") == [] and len(slack.messages) == 1


def test_a_card_update_slack_keeps_failing_does_not_spoil_the_answer_to_the_click(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    slack.fail_next(*[HTTP_500] * 6)

    response = flow.post(*flow.click())

    assert response.status_code == 200 and response.json()["replace_original"] is True
    assert flow.refresh().status == ConfirmationStatus.APPROVED
    assert len(slack.calls("chat.update")) == 6, "tried once and retried five times"


# --- clicks that change nothing ------------------------------------------------------------------


def _assert_refused_and_pending(flow: Flow, resumes: Any, reason: str) -> ConfirmationEvent:
    request = flow.refresh()
    assert request.status == ConfirmationStatus.PENDING and resumes.run_ids == []
    assert flow.slack.calls("chat.update") == []
    [refused] = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert reason in refused.details["reason"]
    return refused


def test_a_replayed_click_changes_nothing_more_and_is_logged(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    body, headers = flow.click()
    assert flow.post(body, headers).json()["replace_original"] is True

    replay = flow.post(body, headers)

    assert "already received" in ephemeral_text(replay)
    request = flow.refresh()
    assert request.events.filter(kind=Kind.DECIDED).count() == 1
    [refused] = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert "already received" in refused.details["reason"] and refused.actor_external_id == APRIL
    assert resumes.run_ids == [flow.run.pk], "resumed once"
    assert len(slack.calls("chat.update")) == 1


def test_a_click_by_an_unmapped_slack_user_changes_nothing_and_is_logged(personas, resumes, slack) -> None:
    flow = park(personas, slack)

    response = flow.post(*flow.click(user="U0NOBODY"))

    assert "not linked to FIM One" in ephemeral_text(response)
    refused = _assert_refused_and_pending(flow, resumes, "not mapped to a user")
    assert refused.actor_external_id == "U0NOBODY"


def test_a_click_by_a_mapped_user_who_may_not_approve_changes_nothing_and_is_logged(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    ImIdentity.objects.create(
        organization=personas.org, user=personas.auditor, provider="slack", external_id="U0AUDE"
    )

    response = flow.post(*flow.click(user="U0AUDE"))

    assert ephemeral_text(response).startswith("You cannot decide this request")
    refused = _assert_refused_and_pending(flow, resumes, "not an approver")
    assert refused.actor == personas.auditor and refused.actor_external_id == "U0AUDE"


def test_a_click_arriving_through_another_channel_changes_nothing_and_is_logged(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    other = slack.channel_config(personas.org, name="Another Slack workspace")

    response = flow.post(*flow.click(), config=other)

    assert "not sent to this channel" in ephemeral_text(response)
    refused = _assert_refused_and_pending(flow, resumes, "not sent to this channel")
    assert refused.details["via"] == other.pk


def test_a_second_approver_clicking_after_the_verdict_is_told_it_was_already_decided(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    ImIdentity.objects.create(
        organization=personas.org, user=personas.admin, provider="slack", external_id="U0ADAM"
    )
    flow.post(*flow.click())

    late = flow.post(*flow.click(user="U0ADAM", action="reject"))

    assert ephemeral_text(late) == "This request was already approved."
    assert flow.refresh().status == ConfirmationStatus.APPROVED
    assert flow.request.events.filter(kind=Kind.CLICK_REFUSED).get().actor == personas.admin


# --- a quorum's tally on the card ----------------------------------------------------------------


def test_a_first_vote_of_two_shows_the_tally_on_the_card_and_the_verdict_then_settles_it(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack, approvals_required=2)

    answer = ephemeral_text(flow.post(*flow.click()))

    assert answer == "Your approval was recorded: 1 of 2 approvals — waiting for one more."
    [tally] = slack.calls("chat.update")
    assert f"{tally.body['channel']}:{tally.body['ts']}" == flow.refresh().external_message_id
    assert "1 of 2 approvals: April Chen approved" in str(tally.body["blocks"])
    assert tally.body["blocks"][-1]["type"] == "actions", "the others may still vote"

    assert confirmation_decide(request_id=flow.request.pk, user=personas.admin, approve=True).accepted

    assert len(slack.calls("chat.update")) == 2, "the verdict updates the card once more"
    verdict = slack.calls("chat.update")[-1]
    assert verdict.body["text"].startswith(f"Approved by {display_name(personas.admin)} at ")
    assert all(block["type"] != "actions" for block in verdict.body["blocks"])
    [(_, card)] = slack.messages.items()
    assert card["text"] == verdict.body["text"], "the card in the channel shows the verdict"
    assert flow.harness.resume(flow.run) == RunStatus.COMPLETED and flow.tool.calls == [PAY_ARGS]


def test_a_verdict_landing_during_a_tally_update_still_ends_on_the_card(
    personas, resumes, slack, monkeypatch
) -> None:
    from channels_im.slack.transport import SlackChannel

    flow = park(personas, slack, approvals_required=2)
    post_tally = SlackChannel.update_card

    def while_the_verdict_lands(self: Any, request: Any) -> None:
        post_tally(self, request)
        if request.status == ConfirmationStatus.PENDING:  # its own update already went: outrun it
            ConfirmationRequest.objects.filter(pk=request.pk).update(
                status=ConfirmationStatus.APPROVED,
                responded_by=personas.admin,
                responded_at=request.created_at,
            )

    monkeypatch.setattr(SlackChannel, "update_card", while_the_verdict_lands)

    flow.post(*flow.click())

    tally, verdict = slack.calls("chat.update")
    assert "1 of 2 approvals" in str(tally.body["blocks"])
    assert verdict.body["text"].startswith(f"Approved by {display_name(personas.admin)} at ")
    [(_, card)] = slack.messages.items()
    assert card["text"] == verdict.body["text"]
