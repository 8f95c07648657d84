"""What a card click on the server's event loop cannot get past, as on the thread path
(tests/channels_im/test_click_guards.py): a NUL in its reason, the clicker's decision rate,
separation of duties (docs/design.md §1.13)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import AsyncClient

from agents.services import run_start
from approvals.models import ChannelConfig, ConfirmationRequest, ConfirmationStatus
from tenancy.models import Membership, Role
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, paying_agent, set_policy
from tests.channels_im.click_kit import Kind, nothing_written, park, post_click, written
from tests.channels_im.loop_kit import Handoffs, Production, db, parked_with
from tests.channels_im.test_click_guards import (
    NUL_REASON,
    STORED_REASON,
    api_decision_status,
    refused_for_the_rate,
    set_decision_rate,
    use_up_the_rate,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


async def test_a_click_with_a_nul_in_its_reason_is_decided_on_the_loop(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
) -> None:
    request = await parked_with(production, personas, harness)

    response = await post_click(
        AsyncClient(), channel, request, decision="reject", form_value={"reason": NUL_REASON}
    )

    assert response.status_code == 200
    assert response.json()["toast"]["content"] == "The request was rejected."
    assert handoffs.calls == [], "decided on the loop"
    record = await db(written)(request)
    assert record["request"][0] == ConfirmationStatus.REJECTED and record["request"][3] == STORED_REASON


async def test_a_click_on_the_loop_counts_against_the_rate(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
    settings: Any,
) -> None:
    set_decision_rate(settings, 1)
    request = await parked_with(production, personas, harness)

    decided = await post_click(AsyncClient(), channel, request, decision="approve")

    assert decided.json()["toast"]["type"] == "success" and handoffs.calls == []
    assert await db(api_decision_status)(personas.approver) == 429, "the loop's click was counted"


async def test_a_click_past_the_rate_on_the_loop_is_refused_and_logged_by_the_thread_path(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
    settings: Any,
) -> None:
    request = await parked_with(production, personas, harness)
    await db(use_up_the_rate)(personas.approver, set_decision_rate(settings, 2))

    response = await post_click(AsyncClient(), channel, request, decision="approve")

    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"
    assert handoffs.calls == ["answer_parsed"]
    assert await db(refused_for_the_rate)(request, personas.approver)


# --- separation of duties on the loop ---------------------------------------------------------------


def _configured_by_april_after_she_was_asked(personas: Any, request: ConfirmationRequest) -> None:
    """Since the card went out, April changed the agent (recorded as the admin records it)."""
    agent = request.agent
    agent._history_user = personas.approver
    agent.save()


async def test_on_the_loop_a_configurer_without_the_approver_role_is_refused_and_it_is_logged(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
) -> None:
    def named_april() -> ConfirmationRequest:
        policy = set_policy(personas, allow_org_approvers=False, allow_agent_owner=False)
        policy.named_users.set([personas.approver])
        request = park(personas, harness, allow_org_approvers=False, allow_agent_owner=False)
        Membership.objects.filter(user=personas.approver).update(role=Role.OPERATOR)
        _configured_by_april_after_she_was_asked(personas, request)
        return request

    request = await db(named_april)()
    production.on()

    response = await post_click(AsyncClient(), channel, request, decision="approve")

    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"
    assert "made them an approver" in response.json()["toast"]["content"]
    assert handoffs.calls == ["answer_parsed"]
    record = await db(written)(request)
    assert record["request"][0] == ConfirmationStatus.PENDING and record["votes"] == []
    assert record["kinds"][-1] == Kind.CLICK_REFUSED


async def test_on_the_loop_a_requester_who_configured_the_agent_cannot_approve_their_own_call(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
) -> None:
    def aprils_own_call() -> ConfirmationRequest:
        set_policy(personas, allow_initiator=True, allow_self_approval=True)
        run = run_start(agent=paying_agent(personas), user=personas.approver, input="pay")
        assert harness.execute(run) == "awaiting_approval"
        request = ConfirmationRequest.objects.get(run=run)
        _configured_by_april_after_she_was_asked(personas, request)
        return request

    request = await db(aprils_own_call)()
    production.on()

    response = await post_click(AsyncClient(), channel, request, decision="approve")

    assert response.json()["toast"]["type"] == "error"
    assert "may not decide their own call" in response.json()["toast"]["content"]
    assert handoffs.calls == ["answer_parsed"]
    assert not await db(nothing_written)(request), "the refusal is logged"
    assert (await db(written)(request))["request"][0] == ConfirmationStatus.PENDING
