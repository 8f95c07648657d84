"""Card clicks the event loop hands to the thread path with what it did (an unlinked account, a
clicker who may not decide, a quorum vote, any Slack click), and clicks with QUICK_CLICKS off:
each answered as the thread path answers it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import AsyncClient

from approvals.models import ChannelConfig, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from approvals.tasks import confirmation_settled_task
from tenancy.models import Membership, Role
from tests.approvals.kit import Resumes
from tests.channels_im.click_kit import Kind, post_click, written
from tests.channels_im.feishu_fake import click_event, keys_of, signed_body
from tests.channels_im.loop_kit import Handoffs, Production, broker_messages, db, parked_with, the_outbox
from tests.channels_im.slack_fake import FakeSlack
from tests.channels_im.test_slack_flow import park as park_in_slack

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


async def test_a_click_by_an_unlinked_account_is_handed_to_the_thread_path_which_offers_a_link(
    handoffs: Handoffs, production: Production, loop_connections: None, parked: ConfirmationRequest, channel
) -> None:
    keys = keys_of(channel)
    body, headers = signed_body(
        click_event(keys, request_id=str(parked.pk), decision="approve", open_id="ou_somebody_else"),
        encrypt_key=keys.encrypt_key,
    )
    response = await AsyncClient().post(
        f"/im/callback/{channel.callback_key}/", data=body, content_type="application/json", headers=headers
    )

    assert response.status_code == 200
    toast = response.json()["toast"]
    assert toast["type"] == "error" and "/im/link/" in toast["content"]
    assert handoffs.calls == ["answer_parsed"]
    assert (await db(written)(parked))["kinds"][-1] == Kind.CLICK_REFUSED
    assert await db(the_outbox)() == []


async def test_a_click_by_someone_who_may_not_decide_is_refused_and_logged_by_the_thread_path(
    handoffs: Handoffs,
    loop_connections: None,
    personas: Any,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
) -> None:
    demoted = Membership.objects.filter(organization=personas.org, user=personas.approver).aupdate
    await demoted(role=Role.MEMBER)  # since the card went out: no longer an approver

    response = await post_click(AsyncClient(), channel, parked, decision="approve")

    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"
    assert handoffs.calls == ["answer_parsed"]
    record = await db(written)(parked)
    assert record["request"][0] == ConfirmationStatus.PENDING and record["votes"] == []
    assert record["kinds"][-1] == Kind.CLICK_REFUSED
    assert await db(the_outbox)() == []


async def test_a_quorum_vote_is_counted_by_the_thread_path_and_leaves_the_request_pending(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    channel,
    harness,
) -> None:
    parked = await parked_with(production, personas, harness, approvals_required=2)

    response = await post_click(AsyncClient(), channel, parked, decision="approve")

    assert response.status_code == 200
    assert handoffs.calls == ["answer_parsed"]
    parked = await db(ConfirmationRequest.objects.get)(pk=parked.pk)
    assert parked.status == ConfirmationStatus.PENDING
    assert await db(ConfirmationVote.objects.filter(request=parked).count)() == 1


def test_with_quick_clicks_off_the_thread_path_decides_and_queues_the_same_follow_up(
    handoffs: Handoffs,
    production: Production,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
    settings: Any,
    client: Any,
) -> None:
    settings.QUICK_CLICKS = False

    response = post_click(client, channel, parked, decision="approve")

    assert response.json()["toast"] == {"type": "success", "content": "The request was approved."}
    assert handoffs.calls == [], "the lane was not asked"
    assert the_outbox() == [
        (confirmation_settled_task.name, [str(parked.pk), parked.run_id, "feishu", "approved"])
    ]
    assert broker_messages(production.queue) == 0, "the web process sent to the broker itself"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


async def test_a_slack_click_is_handed_whole_to_the_thread_path_which_decides_it(
    production: Production,
    handoffs: Handoffs,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    slack: FakeSlack,
) -> None:
    flow = await db(park_in_slack)(personas, slack)
    production.on()
    body, headers = flow.click()

    response = await AsyncClient().post(
        f"/im/callback/{flow.config.callback_key}/",
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers=headers,
    )

    assert response.status_code == 200 and response.json()["replace_original"] is True
    assert handoffs.calls == ["answer_for_channel"], "Slack is verified in a thread"
    request = await db(flow.refresh)()
    assert request.status == ConfirmationStatus.APPROVED
    assert [args[0] for _, args in await db(the_outbox)()] == [str(request.pk)]
