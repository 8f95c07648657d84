"""The Feishu channel end to end: a gated call parks its run, the card reaches the (fake) chat,
a signed click comes back to ``/im/callback/<key>/``, and the verdict runs — or, when something
is wrong, changes nothing and is logged."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from agents.models import Run, RunStatus
from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from approvals.services import confirmation_decide, confirmation_expire_due
from channels_im.models import ImIdentity
from tests.agents.engine_kit import Harness, events_of
from tests.approvals.kit import PAY_ARGS, Resumes, set_policy, suspended_run
from tests.channels_im.feishu_fake import (
    AppKeys,
    FakeFeishu,
    card_buttons,
    card_texts,
    click_event,
    configure_channel,
    keys_of,
    signed_body,
)

Kind = ConfirmationEvent.Kind

# Verdicts act after commit (resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

APRIL = "ou_april0000000000000000000000001"


@pytest.fixture
def channel(personas: Any, fake: FakeFeishu) -> ChannelConfig:
    """The organisation's default approval channel: a Feishu chat, where April is ``APRIL``."""
    personas.approver.first_name, personas.approver.last_name = "April", "Chen"
    personas.approver.save()
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="feishu", external_id=APRIL
    )
    return configure_channel(personas.org, fake=fake)


def park(personas: Any, harness: Harness, **policy: Any) -> tuple[Run, ConfirmationRequest]:
    set_policy(personas, **policy)
    run, request = suspended_run(personas, harness)
    request.refresh_from_db()
    return run, request


def post_click(
    client: Client,
    config: ChannelConfig,
    request: ConfirmationRequest,
    decision: str = "approve",
    *,
    open_id: str = APRIL,
    keys: AppKeys | None = None,
    body: tuple[bytes, dict[str, str]] | None = None,
    **fields: Any,
) -> HttpResponse:
    """Click a button of ``request``'s card as ``open_id``: Feishu signs and encrypts the callback
    with the app's keys (``config``'s unless ``keys`` says otherwise) and posts it to ``config``."""
    keys = keys or keys_of(config)
    event = click_event(
        keys,
        request_id=str(request.pk),
        decision=decision,
        open_id=open_id,
        message_id=request.external_message_id,
        **fields,
    )
    data, headers = body or signed_body(event, encrypt_key=keys.encrypt_key)
    url = reverse("im-callback", args=[config.callback_key])
    return client.post(url, data=data, content_type="application/json", headers=headers)


def log_kinds(request: ConfirmationRequest) -> list[str]:
    return list(request.events.order_by("pk").values_list("kind", flat=True))


def refusals(request: ConfirmationRequest) -> list[ConfirmationEvent]:
    return list(request.events.filter(kind=Kind.CLICK_REFUSED).order_by("pk"))


def still_pending(request: ConfirmationRequest) -> bool:
    request.refresh_from_db()
    return (
        request.status == ConfirmationStatus.PENDING and not request.events.filter(kind=Kind.DECIDED).exists()
    )


# --- the happy path ------------------------------------------------------------------------------


def approve_in_feishu_and_finish_the_run(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    run, request = park(personas, harness)

    [delivered] = request.events.filter(kind=Kind.DELIVERED)
    message_id = delivered.details["message_id"]
    assert request.external_message_id == message_id and message_id in fake.messages
    assert [b["name"] for b in card_buttons(fake.messages[message_id].card)] == ["approve", "reject"]

    click = signed_body(
        click_event(keys_of(channel), request_id=str(request.pk), decision="approve", open_id=APRIL),
        encrypt_key=keys_of(channel).encrypt_key,
    )
    response = post_click(client, channel, request, body=click)

    assert response.status_code == 200
    answer = response.json()
    assert answer["toast"] == {"type": "success", "content": "The request was approved."}
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED
    assert (request.responded_by, request.responded_by_external_id) == (personas.approver, APRIL)
    outcome = f"Approved by April Chen at {request.responded_at:%Y-%m-%d %H:%M} UTC"
    assert answer["card"]["type"] == "raw" and card_buttons(answer["card"]["data"]) == []
    assert outcome in card_texts(answer["card"]["data"])

    assert resumes.run_ids == [run.pk], "the verdict resumes the parked run"
    assert harness.resume(run) == RunStatus.COMPLETED
    assert harness.tools["oa__purchase_pay"].calls == [PAY_ARGS]

    [patch] = fake.patches
    assert patch.path == f"/open-apis/im/v1/messages/{message_id}"
    assert outcome in card_texts(patch.card) and card_buttons(patch.card) == []
    assert APRIL not in patch.json["content"] and APRIL not in response.content.decode()
    assert log_kinds(request) == [Kind.CREATED, Kind.DELIVERED, Kind.DECIDED, Kind.EXECUTED]

    replay = post_click(client, channel, request, body=click)

    assert replay.status_code == 200
    assert replay.json() == {"toast": {"type": "info", "content": "This click was already handled."}}
    assert request.events.filter(kind=Kind.DECIDED).count() == 1 and len(fake.patches) == 1
    [refused] = refusals(request)
    assert "replayed" in refused.details["reason"] and refused.actor_external_id == APRIL


def test_an_approver_clicks_approve_in_feishu_and_the_run_completes(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    approve_in_feishu_and_finish_the_run(client, personas, resumes, fake, channel, harness)


@pytest.mark.postgres
@pytest.mark.redis
def test_an_approver_clicks_approve_in_feishu_and_the_run_completes_on_postgresql_and_redis(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    approve_in_feishu_and_finish_the_run(client, personas, resumes, fake, channel, harness)


def test_a_rejection_with_a_reason_from_the_card_form_reaches_the_llm(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    run, request = park(personas, harness)

    response = post_click(client, channel, request, "reject", form_value={"reason": "  budget frozen  "})

    assert response.json()["toast"] == {"type": "success", "content": "The request was rejected."}
    harness.resume(run)
    run.refresh_from_db()
    assert harness.tools["oa__purchase_pay"].calls == []
    assert (
        run.output
        == "Outcome: Rejected by April Chen: budget frozen. The call was not executed. Do not retry it."
    )
    assert any("budget frozen" in text for text in card_texts(fake.patches[0].card))


def test_a_late_click_is_told_the_verdict_and_shown_the_settled_card(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    _, request = park(personas, harness)
    post_click(client, channel, request, "reject")

    late = post_click(client, channel, request, "approve")  # a new click, not a replay

    assert late.status_code == 200
    assert late.json()["toast"] == {"type": "info", "content": "This request was already rejected."}
    assert card_buttons(late.json()["card"]["data"]) == []
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED
    assert refusals(request)[-1].details["reason"] == "already rejected"


# --- delivery faults -----------------------------------------------------------------------------


def test_a_card_feishu_never_takes_leaves_the_request_pending_until_it_expires_and_the_llm_is_told(
    personas: Any, resumes: Resumes, fake: FakeFeishu, channel: ChannelConfig, harness: Harness
) -> None:
    channel.settings_json["timeout"] = 0.5  # each hang costs one short timeout
    channel.save()
    fake.fail_next("500", "503-json", "500", "hang", "hang", "hang")

    run, request = park(personas, harness, timeout_seconds=60)

    failures = request.events.filter(kind=Kind.DELIVERY_FAILED).order_by("pk")
    assert [(f.details["attempt"], f.details["will_retry"]) for f in failures] == [
        (1, True), (2, True), (3, True), (4, True), (5, True), (6, False),
    ]  # fmt: skip
    assert "not JSON" in failures[0].details["error"] and "code 1500" in failures[1].details["error"]
    assert failures[5].details["error"] == "Feishu did not answer the card delivery within 0.5 s"
    assert not request.events.filter(kind=Kind.DELIVERED).exists() and request.external_message_id == ""
    assert still_pending(request) and len(fake.im_calls) == 6

    assert confirmation_expire_due(now=request.expires_at + dt.timedelta(seconds=1)) == 1
    assert resumes.run_ids == [run.pk]
    harness.resume(run)

    assert harness.tools["oa__purchase_pay"].calls == []
    run.refresh_from_db()
    assert run.output == (
        "Outcome: No decision within 60 s: the call was not executed. The approval request could not be "
        "delivered to approvers (Feishu did not answer the card delivery within 0.5 s). "
        "Do not retry it unless the user asks."
    )
    assert "could not be delivered to approvers" in harness.llm_requests[-1][-1]["content"]
    [decided] = events_of(run, "approval.decided")
    assert decided["status"] == "expired"
    assert decided["delivery_problem"] == "Feishu did not answer the card delivery within 0.5 s"
    assert fake.patches == [], "there is no message to update"


def test_a_card_feishu_refuses_for_good_is_given_up_at_once(
    personas: Any, resumes: Resumes, fake: FakeFeishu, channel: ChannelConfig, harness: Harness
) -> None:
    fake.fail_next("bot-not-in-chat")

    _, request = park(personas, harness)

    [failure] = request.events.filter(kind=Kind.DELIVERY_FAILED)
    assert failure.details["attempt"] == 1 and failure.details["will_retry"] is False
    assert "code 230002" in failure.details["error"]
    assert still_pending(request) and len(fake.im_calls) == 1


def test_a_rate_limited_card_is_delivered_on_the_next_attempt(
    personas: Any, resumes: Resumes, fake: FakeFeishu, channel: ChannelConfig, harness: Harness
) -> None:
    fake.fail_next("429")

    _, request = park(personas, harness)

    assert log_kinds(request) == [Kind.CREATED, Kind.DELIVERY_FAILED, Kind.DELIVERED]
    assert request.events.get(kind=Kind.DELIVERED).details["attempt"] == 2
    assert request.external_message_id in fake.messages


# --- clicks that change nothing ------------------------------------------------------------------


def test_a_click_from_an_unmapped_feishu_user_changes_nothing_and_is_logged(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    _, request = park(personas, harness)

    response = post_click(client, channel, request, open_id="ou_nobody")

    assert response.status_code == 200
    toast = response.json()["toast"]
    assert toast["type"] == "error" and "not linked to FIM One" in toast["content"]
    assert "card" not in response.json()
    assert still_pending(request) and resumes.run_ids == [] and fake.patches == []
    [refused] = refusals(request)
    assert refused.actor is None and refused.actor_external_id == "ou_nobody"


def test_an_unlinked_feishu_user_is_offered_a_link_in_the_toast_and_links_their_account(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    _, request = park(personas, harness)

    toast = post_click(client, channel, request, open_id="ou_adam")

    content = toast.json()["toast"]["content"]
    assert "not linked to FIM One in Acme" in content
    [url] = re.findall(r"https?://\S+/im/link/[A-Za-z0-9_\-]+/", content)
    page = Client()
    page.force_login(personas.admin)
    assert page.post(urlsplit(url).path).status_code == 302
    identity = ImIdentity.objects.get(provider="feishu", external_id="ou_adam")
    assert identity.organization == personas.org and identity.user == personas.admin

    response = post_click(client, channel, request, open_id="ou_adam", decision="reject")

    assert response.json()["toast"]["type"] == "success"
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED and request.responded_by == personas.admin


@pytest.mark.parametrize(
    ("who", "why"),
    [
        ("auditor", "not an approver of this request"),
        ("member", "the requester may not approve their own call"),
    ],
)
def test_a_click_from_a_mapped_user_who_may_not_decide_changes_nothing_and_is_logged(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
    who: str,
    why: str,
) -> None:
    user = getattr(personas, who)
    ImIdentity.objects.create(
        organization=personas.org, user=user, provider="feishu", external_id=f"ou_{who}"
    )
    _, request = park(personas, harness)

    response = post_click(client, channel, request, open_id=f"ou_{who}")

    assert response.status_code == 200
    assert response.json()["toast"] == {
        "type": "error",
        "content": f"You cannot decide this request: {why}.",
    }
    assert still_pending(request) and resumes.run_ids == []
    [refused] = refusals(request)
    assert (refused.actor, refused.actor_external_id, refused.details["reason"]) == (user, f"ou_{who}", why)


def test_a_click_on_another_channels_request_changes_nothing_and_is_logged(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    other = configure_channel(personas.org, name="Another chat", is_default=False)
    _, request = park(personas, harness)

    response = post_click(client, other, request)

    assert response.status_code == 200
    assert response.json()["toast"]["type"] == "error"
    assert "not sent to this channel" in response.json()["toast"]["content"]
    assert still_pending(request)
    [refused] = refusals(request)
    assert refused.details["reason"] == "this request was not sent to this channel"
    assert refused.details["via"] == other.pk


def test_a_click_signed_for_one_channel_is_unverified_on_another_and_not_even_logged(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    other = configure_channel(personas.org, name="Another chat", is_default=False)
    _, request = park(personas, harness)

    response = post_click(client, other, request, keys=keys_of(channel))

    assert response.status_code == 401 and "signature" in response.json()["error"]
    assert still_pending(request) and refusals(request) == []


def test_a_replayed_click_is_refused_even_once_it_would_be_accepted(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    _, request = park(personas, harness)
    keys = keys_of(channel)
    captured = signed_body(
        click_event(keys, request_id=str(request.pk), decision="approve", open_id="ou_new_hire"),
        encrypt_key=keys.encrypt_key,
    )
    assert post_click(client, channel, request, body=captured).json()["toast"]["type"] == "error"
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="feishu", external_id="ou_new_hire"
    )

    replay = post_click(client, channel, request, body=captured)

    assert replay.status_code == 200
    assert replay.json()["toast"] == {"type": "info", "content": "This click was already handled."}
    assert still_pending(request) and resumes.run_ids == []
    first, second = refusals(request)
    assert first.details["reason"] == "the clicker is not mapped to a user"
    assert "replayed" in second.details["reason"] and second.actor_external_id == "ou_new_hire"


# --- a quorum's tally on the card ----------------------------------------------------------------


def test_a_first_vote_of_two_shows_the_tally_on_the_card_and_the_verdict_then_settles_it(
    client: Client,
    personas: Any,
    resumes: Resumes,
    fake: FakeFeishu,
    channel: ChannelConfig,
    harness: Harness,
) -> None:
    run, request = park(personas, harness, approvals_required=2)

    response = post_click(client, channel, request)

    assert response.status_code == 200 and still_pending(request)
    [tally] = fake.patches
    assert tally.path == f"/open-apis/im/v1/messages/{request.external_message_id}"
    assert "1 of 2 approvals: April Chen approved" in "\n".join(card_texts(tally.card))
    assert [b["name"] for b in card_buttons(tally.card)] == ["approve", "reject"], "others may still vote"

    outcome = confirmation_decide(request_id=request.pk, user=personas.admin, approve=True)

    assert outcome.accepted
    request.refresh_from_db()
    assert len(fake.patches) == 2, "the verdict updates the card once more"
    verdict = fake.patches[-1]
    assert f"Approved by {display_name(personas.admin)} at" in "\n".join(card_texts(verdict.card))
    assert card_buttons(verdict.card) == []
    assert harness.resume(run) == RunStatus.COMPLETED
