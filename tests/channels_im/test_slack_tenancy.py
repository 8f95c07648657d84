"""One tenant, one wall, on Slack (DESIGN §1.11): a signed click counts only through an IM
identity of the channel's organisation, its user is re-checked at decision time, and another
organisation's request answers 404 with nothing written on it.

Cards and clicks go through the same fake Slack and real callback endpoint as test_slack_flow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.models import Membership
from approvals.models import ConfirmationEvent, ConfirmationStatus
from tests.approvals.kit import set_policy
from tests.channels_im.slack_fake import FakeSlack, click_body, signed_headers
from tests.channels_im.test_slack_flow import APRIL, Flow, ephemeral_text, park

pytestmark = pytest.mark.django_db(transaction=True)

Kind = ConfirmationEvent.Kind


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def assert_pending_and_refused(flow: Flow, resumes: Any, reason: str) -> ConfirmationEvent:
    request = flow.refresh()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by is None
    assert resumes.run_ids == [] and flow.slack.calls("chat.update") == []
    [refused] = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert reason in refused.details["reason"], refused.details
    return refused


# --- item 3: the clicker is re-checked ---------------------------------------------------------


def test_it_refuses_a_slack_click_by_an_approver_removed_from_the_organisation(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    Membership.objects.filter(user=personas.approver, organization=personas.org).delete()

    response = flow.post(*flow.click())

    assert "no longer a member of the organisation" in ephemeral_text(response)
    refused = assert_pending_and_refused(flow, resumes, "no longer a member")
    assert refused.actor == personas.approver and refused.actor_external_id == APRIL


def test_it_refuses_a_slack_click_by_a_deactivated_approver(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    personas.approver.is_active = False
    personas.approver.save()

    response = flow.post(*flow.click())

    assert "deactivated" in ephemeral_text(response)
    assert assert_pending_and_refused(flow, resumes, "deactivated").actor == personas.approver


def test_it_refuses_a_slack_click_by_an_approver_the_current_policy_excludes(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    set_policy(personas, allow_org_approvers=False)

    response = flow.post(*flow.click(action="reject"))

    assert "current policy" in ephemeral_text(response)
    assert_pending_and_refused(flow, resumes, "no longer an approver under the agent's current policy")


# --- item 8: another organisation's request ----------------------------------------------------


def test_it_answers_404_to_a_click_on_another_organisations_request_and_writes_nothing(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    globex = slack.channel_config(personas.other_org, name="Globex Slack")
    body = click_body(request_id=str(flow.request.pk), user_id=APRIL)

    response = flow.post(body, signed_headers(body), config=globex)

    assert response.status_code == 404
    request = flow.refresh()
    assert request.status == ConfirmationStatus.PENDING
    assert list(request.events.values_list("kind", flat=True)) == [Kind.CREATED, Kind.DELIVERED]
