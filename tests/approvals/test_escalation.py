"""A policy may name escalation tiers (issue 15, item 3).

Here only oscar (the agent's owner, whom an organisation admin made an approver: docs/design.md §1.13)
is asked first; if nobody decides within 60 s, the sweep adds
april (tier 1) and sends the card again, on the tier's channel when it names one. Times are
given to the sweep explicitly (a frozen clock): no test waits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from agents.models import RunStatus
from approvals.models import ConfirmationApprover, ConfirmationEvent, ConfirmationStatus, EscalationTier
from approvals.services import confirmation_decide, confirmation_escalate_due
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, make_approver, pay_tool, set_policy, suspended_run
from tests.channels_im.slack_fake import FakeSlack

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def escalating_request(
    personas: Any, *, after: int = 60, channel_config: Any = None, **policy: Any
) -> tuple[Any, Any, Harness, Any]:
    policy.setdefault("allow_org_approvers", False)  # first tier: the agent's owner alone
    make_approver(personas, personas.operator)
    row = set_policy(personas, **policy)
    tier = EscalationTier.objects.create(policy=row, after_seconds=after, channel_config=channel_config)
    tier.named_users.set([personas.approver])
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)
    return run, request, harness, tool


def at(request: Any, seconds: float) -> dt.datetime:
    return request.created_at + dt.timedelta(seconds=seconds)


def test_nothing_escalates_before_the_first_tier_is_due(personas, resumes) -> None:
    _, request, _, _ = escalating_request(personas)

    assert confirmation_escalate_due(now=at(request, 59)) == 0

    request.refresh_from_db()
    assert request.escalation_level == 0
    assert set(request.approvers.all()) == {personas.operator}


def test_after_the_first_tier_the_next_group_is_asked_once_and_it_is_logged(personas, resumes) -> None:
    _, request, _, _ = escalating_request(personas)
    delivered_before = request.events.filter(kind=Kind.DELIVERED).count()

    assert confirmation_escalate_due(now=at(request, 61)) == 1
    assert confirmation_escalate_due(now=at(request, 62)) == 0, "an escalation happens once"

    request.refresh_from_db()
    assert request.escalation_level == 1 and request.next_escalation_at is None
    assert set(request.approvers.all()) == {personas.operator, personas.approver}
    assert ConfirmationApprover.objects.get(request=request, user=personas.approver).tier == 1
    escalated = request.events.get(kind=Kind.ESCALATED)
    assert escalated.details["tier"] == 1 and escalated.details["added_approvers"] == [personas.approver.pk]
    assert request.events.filter(kind=Kind.DELIVERED).count() == delivered_before + 1, "the card went again"


def test_the_second_tier_sees_it_in_the_inbox_marked_escalated_and_may_approve(personas, resumes) -> None:
    run, request, harness, tool = escalating_request(personas)
    april = Client()
    april.force_login(personas.approver)
    assert str(request.pk) not in april.get("/approvals/").content.decode()

    confirmation_escalate_due(now=at(request, 61))
    page = april.get("/approvals/").content.decode()
    outcome = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert str(request.pk) in page and "Escalated (tier 1)" in page
    assert outcome.accepted
    assert harness.resume(run) == RunStatus.COMPLETED and tool.calls == [PAY_ARGS]
    detail = april.get(f"/approvals/{request.pk}/").content.decode()
    assert "Escalated to tier 1" in detail and "Escalated" in detail


def test_the_first_tier_may_still_decide_after_escalation_by_default(personas, resumes) -> None:
    _, request, _, _ = escalating_request(personas)
    confirmation_escalate_due(now=at(request, 61))

    outcome = confirmation_decide(request_id=request.pk, user=personas.operator, approve=True)

    assert outcome.accepted and outcome.status == ConfirmationStatus.APPROVED


def test_the_policy_may_leave_an_escalated_request_to_the_tiers_alone(personas, resumes) -> None:
    _, request, _, _ = escalating_request(personas, first_tier_may_decide_after_escalation=False)
    before = confirmation_decide(request_id=request.pk, user=personas.operator, approve=False)
    assert before.accepted, "before escalation the first tier decides"

    _, request, _, _ = escalating_request(personas, first_tier_may_decide_after_escalation=False)
    confirmation_escalate_due(now=at(request, 61))
    oscar = confirmation_decide(request_id=request.pk, user=personas.operator, approve=True)
    april = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert oscar.refused and "only the escalation tiers may decide" in oscar.message
    assert april.accepted


def test_a_tier_due_after_the_deadline_never_happens(personas, resumes) -> None:
    _, request, _, _ = escalating_request(personas, after=900, timeout_seconds=600)

    request.refresh_from_db()
    assert request.escalation_plan == [] and request.next_escalation_at is None
    assert confirmation_escalate_due(now=at(request, 599)) == 0


def test_a_decided_request_is_not_escalated(personas, resumes) -> None:
    _, request, _, _ = escalating_request(personas)
    confirmation_decide(request_id=request.pk, user=personas.operator, approve=True)

    assert confirmation_escalate_due(now=at(request, 61)) == 0
    assert not request.events.filter(kind=Kind.ESCALATED).exists()


def test_the_tier_card_goes_to_the_tiers_own_channel(personas, resumes, slack) -> None:
    config = slack.channel_config(personas.org, name="Finance leads")
    _, request, _, _ = escalating_request(personas, channel_config=config)
    assert request.channel == "web" and slack.calls("chat.postMessage") == []

    confirmation_escalate_due(now=at(request, 61))

    request.refresh_from_db()
    assert request.channel == "slack" and request.channel_config_id == config.pk
    [posted] = slack.calls("chat.postMessage")
    assert "Purchase pay" in str(posted.body)
    assert "Escalated" in str(posted.body)
