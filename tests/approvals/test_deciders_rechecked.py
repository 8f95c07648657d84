"""Who may decide is checked again at decision time, and other organisations see nothing
(docs/design.md §1.11): the approver snapshot is an upper bound; a decider must also still be active, a
member of the request's organisation and eligible under the agent's current policy. Another
organisation's request answers 404 and nothing is written on it.

Slack clicks for the same rules are in tests/channels_im/test_slack_tenancy.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals.models import ApproverPolicy, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from tenancy.models import Membership
from tests.agents.engine_kit import Harness
from tests.approvals.kit import make_approver, pay_tool, set_policy, suspended_run

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)


def pending_request(personas: Any) -> ConfirmationRequest:
    set_policy(personas)
    request = suspended_run(personas, Harness(pay_tool()))[1]
    assert request.approvers.filter(pk=personas.approver.pk).exists(), "April is in the snapshot"
    return request


def api_decide(user: Any, request: ConfirmationRequest, decision: str = "approve") -> Any:
    client = APIClient()
    client.force_login(user)
    return client.post(f"/api/approvals/{request.pk}/decision/", {"decision": decision}, format="json")


def inbox_decide(user: Any, request: ConfirmationRequest) -> Any:
    client = Client()
    client.force_login(user)
    return client.post(f"/approvals/{request.pk}/decide/", {"decision": "approve"}, follow=True)


def assert_still_pending(request: ConfirmationRequest, resumes: Any) -> None:
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by is None
    assert resumes.run_ids == []


def remove_from_org(personas: Any, user: Any) -> None:
    Membership.objects.filter(user=user, organization=personas.org).delete()


def exclude_org_approvers(personas: Any) -> None:
    # Only the agent's owner (oscar, if an admin made him an approver) decides now: April's role
    # no longer makes her an approver.
    set_policy(personas, allow_org_approvers=False)


# --- item 8: another organisation's request ----------------------------------------------------


def test_it_answers_404_to_a_stranger_deciding_another_organisations_request_via_the_api(
    personas, resumes
) -> None:
    request = pending_request(personas)

    response = api_decide(personas.stranger, request)

    assert response.status_code == 404
    assert response.json() == {
        "accepted": False,
        "status": "not_found",
        "message": "No such approval request.",
    }
    assert_still_pending(request, resumes)
    assert request.events.filter(kind=Kind.CLICK_REFUSED).count() == 0
    assert list(request.events.values_list("kind", flat=True)) == [Kind.CREATED, Kind.DELIVERED]


def test_it_answers_404_to_a_stranger_deciding_from_the_web_inbox_and_writes_nothing(
    personas, resumes
) -> None:
    request = pending_request(personas)
    client = Client()
    client.force_login(personas.stranger)

    response = client.post(f"/approvals/{request.pk}/decide/", {"decision": "approve"})

    assert response.status_code == 404
    assert_still_pending(request, resumes)
    assert not request.events.filter(kind=Kind.CLICK_REFUSED).exists()


def test_it_answers_404_to_a_stranger_even_with_a_token_and_a_reject(personas, resumes) -> None:
    request = pending_request(personas)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=personas.stranger).key}")

    response = client.post(f"/api/approvals/{request.pk}/decision/", {"decision": "reject"}, format="json")

    assert response.status_code == 404
    assert not request.events.filter(kind=Kind.CLICK_REFUSED).exists()


def test_a_member_of_the_same_organisation_who_is_no_approver_still_gets_a_logged_403(
    personas, resumes
) -> None:
    request = pending_request(personas)

    response = api_decide(personas.auditor, request)

    assert response.status_code == 403
    assert request.events.get(kind=Kind.CLICK_REFUSED).actor == personas.auditor


# --- item 3: approvers re-checked at decision time ---------------------------------------------


def test_it_refuses_an_approver_removed_from_the_organisation_via_the_api_and_logs_it(
    personas, resumes
) -> None:
    request = pending_request(personas)
    remove_from_org(personas, personas.approver)

    response = api_decide(personas.approver, request)

    assert response.status_code == 403
    assert "no longer a member of the organisation" in response.json()["message"]
    assert_still_pending(request, resumes)
    refused = request.events.get(kind=Kind.CLICK_REFUSED)
    assert refused.actor == personas.approver and "no longer a member" in refused.details["reason"]


def test_it_refuses_an_approver_removed_from_the_organisation_in_the_web_inbox(personas, resumes) -> None:
    request = pending_request(personas)
    remove_from_org(personas, personas.approver)

    response = inbox_decide(personas.approver, request)

    assert "no longer a member of the organisation" in response.content.decode()
    assert_still_pending(request, resumes)
    assert request.events.get(kind=Kind.CLICK_REFUSED).actor == personas.approver


def test_it_refuses_an_approver_the_current_policy_excludes_via_the_api_and_logs_it(
    personas, resumes
) -> None:
    request = pending_request(personas)
    exclude_org_approvers(personas)

    response = api_decide(personas.approver, request)

    assert response.status_code == 403
    assert "no longer an approver under the agent's current policy" in response.json()["message"]
    assert_still_pending(request, resumes)
    assert "current policy" in request.events.get(kind=Kind.CLICK_REFUSED).details["reason"]


def test_it_refuses_an_approver_the_current_policy_excludes_in_the_web_inbox(personas, resumes) -> None:
    request = pending_request(personas)
    exclude_org_approvers(personas)

    response = inbox_decide(personas.approver, request)

    assert "no longer an approver under the agent&#x27;s current policy" in response.content.decode()
    assert_still_pending(request, resumes)
    assert request.events.filter(kind=Kind.CLICK_REFUSED, actor=personas.approver).count() == 1


def test_the_agent_owner_the_current_policy_still_names_may_decide(personas, resumes) -> None:
    make_approver(personas, personas.operator)  # an owner decides only as an approver
    request = pending_request(personas)
    exclude_org_approvers(personas)

    response = api_decide(personas.operator, request)

    assert response.status_code == 200


def test_it_refuses_an_approver_whose_role_was_taken_away_although_still_a_member(personas, resumes) -> None:
    # April was asked as an organisation approver; an admin has since made her a plain member.
    request = pending_request(personas)
    Membership.objects.filter(user=personas.approver, organization=personas.org).update(role="member")

    response = api_decide(personas.approver, request)

    assert response.status_code == 403
    assert "no longer an approver under the agent's current policy" in response.json()["message"]
    assert_still_pending(request, resumes)


def named_approver_request(personas: Any) -> tuple[ApproverPolicy, ConfirmationRequest]:
    """A request under a policy that names April (and no organisation approvers)."""
    policy = set_policy(personas, allow_org_approvers=False)
    policy.named_users.set([personas.approver])
    request = suspended_run(personas, Harness(pay_tool()))[1]
    assert request.approvers.filter(pk=personas.approver.pk).exists()
    return policy, request


def test_it_refuses_a_named_approver_the_policy_no_longer_names(personas, resumes) -> None:
    policy, request = named_approver_request(personas)
    policy.named_users.clear()

    response = api_decide(personas.approver, request)

    assert response.status_code == 403
    assert "current policy" in response.json()["message"]
    assert_still_pending(request, resumes)


def test_a_named_approver_the_policy_still_names_may_decide(personas, resumes) -> None:
    _, request = named_approver_request(personas)

    assert api_decide(personas.approver, request).status_code == 200


def test_it_refuses_the_requester_once_the_policy_no_longer_allows_self_approval(personas, resumes) -> None:
    set_policy(personas, allow_initiator=True, allow_self_approval=True)
    request = suspended_run(personas, Harness(pay_tool()))[1]
    assert request.approvers.filter(pk=personas.member.pk).exists(), "the requester is in the snapshot"
    set_policy(personas, allow_initiator=True, allow_self_approval=False)

    response = api_decide(personas.member, request)

    assert response.status_code == 403
    assert "current policy" in response.json()["message"]
    assert_still_pending(request, resumes)


def test_it_refuses_a_deactivated_approver_and_logs_it(personas, resumes) -> None:
    # A deactivated user cannot sign in any more (the API turns them away before any service); a
    # click reaching the service for them (an IM identity) is refused and logged.
    request = pending_request(personas)
    personas.approver.is_active = False
    personas.approver.save()

    outcome = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert outcome.refused and "deactivated" in outcome.message
    assert_still_pending(request, resumes)
    assert request.events.get(kind=Kind.CLICK_REFUSED).actor == personas.approver


def test_it_refuses_a_deactivated_approver_via_the_api_and_the_web_inbox(personas, resumes) -> None:
    request = pending_request(personas)
    token = Token.objects.create(user=personas.approver)
    personas.approver.is_active = False
    personas.approver.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    assert client.post(f"/api/approvals/{request.pk}/decision/", {"decision": "approve"}).status_code in (
        401,
        403,
    )
    assert api_decide(personas.approver, request).status_code == 403
    assert inbox_decide(personas.approver, request).redirect_chain[-1][0].startswith("/approvals/login/")
    assert_still_pending(request, resumes)


def test_a_removed_approver_no_longer_finds_the_request_in_the_inbox(personas, resumes) -> None:
    pending_request(personas)
    remove_from_org(personas, personas.approver)
    client = APIClient()
    client.force_login(personas.approver)

    assert client.get("/api/approvals/").json() == []


def test_a_request_opened_after_removal_or_deactivation_leaves_them_out(personas, resumes) -> None:
    make_approver(personas, personas.operator)  # the one left to decide
    remove_from_org(personas, personas.approver)
    personas.admin.is_active = False
    personas.admin.save()

    set_policy(personas)
    request = suspended_run(personas, Harness(pay_tool()))[1]

    approvers = set(request.approvers.values_list("username", flat=True))
    assert approvers == {"oscar"}
