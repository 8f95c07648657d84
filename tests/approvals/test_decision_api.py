"""The REST decision API: the inbox, one request, and deciding — with the web page's rules."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, pay_tool, set_policy, suspended_run
from tests.personas import make_user

Kind = ConfirmationEvent.Kind

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

INBOX = "/api/approvals/"


def api_as(user: Any, **client_options: Any) -> APIClient:
    client = APIClient(**client_options)
    client.force_login(user)
    return client


def detail_url(request: ConfirmationRequest) -> str:
    return f"/api/approvals/{request.pk}/"


def decision_url(request: ConfirmationRequest) -> str:
    return f"/api/approvals/{request.pk}/decision/"


def pending_request(personas: Any) -> ConfirmationRequest:
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))[1]


# --- reading -------------------------------------------------------------------------------------


def test_the_inbox_lists_what_the_caller_may_decide(personas, resumes) -> None:
    request = pending_request(personas)

    response = api_as(personas.approver).get(INBOX)

    assert response.status_code == 200
    assert response.json() == [
        {
            "id": str(request.pk),
            "tool": "oa__purchase_pay",
            "args_sha256": request.args_sha256,
            "arguments": PAY_ARGS,
            "agent": {"id": request.agent_id, "name": "Procurement assistant"},
            "requested_by": {"id": personas.member.pk, "name": "alice"},
            "created_at": response.json()[0]["created_at"],
            "expires_at": response.json()[0]["expires_at"],
            "channel": "web",
            "stage": None,
        }
    ]
    assert dt.datetime.fromisoformat(response.json()[0]["expires_at"]) == request.expires_at


def test_the_inbox_is_empty_for_the_requester_a_stranger_and_once_expired(personas, resumes) -> None:
    request = pending_request(personas)

    for user in (personas.member, personas.stranger, personas.auditor):
        assert api_as(user).get(INBOX).json() == [], user.username
    ConfirmationRequest.objects.filter(pk=request.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert api_as(personas.approver).get(INBOX).json() == []


def test_the_api_turns_away_an_anonymous_caller(personas, resumes) -> None:
    request = pending_request(personas)

    assert APIClient().get(INBOX).status_code == 403
    assert APIClient().post(decision_url(request), {"decision": "approve"}).status_code == 403


def test_one_request_shows_its_status_run_and_event_log(personas, resumes) -> None:
    request = pending_request(personas)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="budget frozen")

    body = api_as(personas.auditor).get(detail_url(request)).json()

    assert body["status"] == "rejected" and body["reason"] == "budget frozen"
    assert body["responded_by"] == {"id": personas.approver.pk, "name": "april"}
    assert body["run"] == {"id": request.run_id, "status": "awaiting_approval"}
    assert [e["kind"] for e in body["events"]] == ["created", "delivered", "decided"]
    assert body["events"][-1]["actor"] == {"id": personas.approver.pk, "name": "april"}


@pytest.mark.parametrize("who", ["approver", "member", "auditor", "admin"])
def test_one_request_is_visible_to_its_approvers_requester_and_auditors(personas, resumes, who) -> None:
    request = pending_request(personas)

    assert api_as(getattr(personas, who)).get(detail_url(request)).status_code == 200


def test_one_request_is_a_404_for_everyone_else_and_for_unknown_ids(personas, resumes) -> None:
    request = pending_request(personas)
    colleague = make_user("bob", personas.org)

    assert api_as(personas.stranger).get(detail_url(request)).status_code == 404
    assert api_as(colleague).get(detail_url(request)).status_code == 404
    assert api_as(personas.approver).get(f"/api/approvals/{uuid.uuid4()}/").status_code == 404


# --- deciding ------------------------------------------------------------------------------------


def test_approving_answers_200_approves_and_resumes_the_run(personas, resumes) -> None:
    request = pending_request(personas)

    response = api_as(personas.approver).post(decision_url(request), {"decision": "approve"}, format="json")

    assert response.status_code == 200
    assert response.json() == {"accepted": True, "status": "approved", "message": "The request was approved."}
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and resumes.run_ids == [request.run_id]


def test_rejecting_stores_the_reason(personas, resumes) -> None:
    request = pending_request(personas)

    response = api_as(personas.admin).post(
        decision_url(request), {"decision": "reject", "reason": "wrong vendor"}, format="json"
    )

    assert response.status_code == 200 and response.json()["status"] == "rejected"
    request.refresh_from_db()
    assert request.reason == "wrong vendor" and request.responded_by == personas.admin


def test_a_second_decision_is_a_409_that_names_the_verdict(personas, resumes) -> None:
    request = pending_request(personas)
    first = api_as(personas.approver).post(decision_url(request), {"decision": "approve"}, format="json")

    again = api_as(personas.admin).post(decision_url(request), {"decision": "reject"}, format="json")

    assert first.status_code == 200
    assert again.status_code == 409
    assert again.json() == {
        "accepted": False,
        "status": "approved",
        "message": "This request was already approved.",
    }
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and resumes.run_ids == [request.run_id]


def test_a_decision_after_the_deadline_is_a_409(personas, resumes) -> None:
    request = pending_request(personas)
    ConfirmationRequest.objects.filter(pk=request.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )

    response = api_as(personas.approver).post(decision_url(request), {"decision": "approve"}, format="json")

    assert response.status_code == 409
    assert response.json()["status"] == "expired"
    assert response.json()["message"] == "This request was already expired."


@pytest.mark.parametrize("who", ["auditor", "member"])
def test_it_refuses_a_decision_from_a_non_approver_with_a_403_and_logs_it(personas, resumes, who) -> None:
    request = pending_request(personas)
    outsider = getattr(personas, who)

    response = api_as(outsider).post(decision_url(request), {"decision": "approve"}, format="json")

    assert response.status_code == 403
    body = response.json()
    assert body["accepted"] is False and body["status"] == "refused"
    assert body["message"].startswith("You cannot decide this request: ")
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and resumes.run_ids == []
    assert request.events.get(kind=Kind.CLICK_REFUSED).actor == outsider


def test_deciding_an_unknown_request_is_a_404(personas) -> None:
    response = api_as(personas.approver).post(
        f"/api/approvals/{uuid.uuid4()}/decision/", {"decision": "approve"}, format="json"
    )

    assert response.status_code == 404
    assert response.json() == {
        "accepted": False,
        "status": "not_found",
        "message": "No such approval request.",
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "maybe"}, "decision"),
        ({}, "decision"),
        ({"decision": "reject", "reason": "x" * 2001}, "reason"),
        ({"decision": "reject", "reason": ["not", "text"]}, "reason"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(personas, resumes, body, field) -> None:
    request = pending_request(personas)

    response = api_as(personas.approver).post(decision_url(request), body, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert not request.events.filter(kind__in=[Kind.DECIDED, Kind.CLICK_REFUSED]).exists()


def test_a_token_authenticates_without_a_csrf_token(personas, resumes) -> None:
    request = pending_request(personas)
    token = Token.objects.create(user=personas.approver)
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    assert client.get(INBOX).json()[0]["id"] == str(request.pk)
    response = client.post(decision_url(request), {"decision": "approve"}, format="json")

    assert response.status_code == 200
    request.refresh_from_db()
    assert request.responded_by == personas.approver


def test_a_session_post_without_a_csrf_token_is_refused_and_changes_nothing(personas, resumes) -> None:
    request = pending_request(personas)

    response = api_as(personas.approver, enforce_csrf_checks=True).post(
        decision_url(request), {"decision": "approve"}, format="json"
    )

    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and resumes.run_ids == []


def test_the_openapi_schema_documents_the_approval_endpoints(db) -> None:
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()

    decide = schema["paths"]["/api/approvals/{request_id}/decision/"]["post"]
    assert decide["operationId"] == "approvals_decide"
    assert set(decide["responses"]) == {"200", "400", "403", "404", "409", "429"}
    assert decide["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ApprovalDecision"
    }
    assert schema["paths"]["/api/approvals/"]["get"]["operationId"] == "approvals_list"
    assert schema["paths"]["/api/approvals/{request_id}/"]["get"]["operationId"] == "approvals_retrieve"
