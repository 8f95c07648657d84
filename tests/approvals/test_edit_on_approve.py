"""A policy may let approvers change the arguments before approving (issue 15, item 2).

The edit is made in the web inbox (or the API), within the tool's parameter schema; the approved
arguments replace the proposed ones, the engine binds to their hash and runs exactly them, the
LLM is told what changed and by whom, and the record keeps both and the editor.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents import events as ev
from agents.engine.store import args_sha256
from agents.models import Connector, RunStatus, ToolExecution
from approvals.models import ConfirmationEvent, ConfirmationStatus, ConfirmationVote
from approvals.services import confirmation_decide, edit_problem
from tests.admin_kit import page_text
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import PAY_ARGS, paying_agent, set_policy, suspended_run
from tests.personas import make_action, make_http_connector

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string"},
        "amount": {"type": "number", "minimum": 0, "maximum": 5000},
    },
    "required": ["purchase_id", "amount"],
    "additionalProperties": False,
}
EDITED = {"purchase_id": "PO-1001", "amount": 1000}


def editable_request(personas: Any, resumes: Any, **policy: Any) -> tuple[Any, Any, Harness, RecordingTool]:
    """A parked payment whose tool is the agent's own connector action (its schema is the one an
    edit is checked against); the engine runs a recording stand-in with the same schema."""
    policy.setdefault("allow_edit_on_approve", True)
    set_policy(personas, **policy)
    agent = paying_agent(personas)
    connector = Connector.objects.filter(organization=personas.org, slug="oa").first()
    if connector is None:
        connector = make_http_connector(personas.org, "http://oa.invalid", slug="oa")
        make_action(connector, "purchase_pay", method="POST", parameters_schema=SCHEMA)
    agent.actions.add(*connector.actions.all())
    tool = RecordingTool(
        "oa__purchase_pay", result={"status": "paid"}, parameters=SCHEMA, requires_confirmation=True
    )
    harness = Harness(tool)
    run, request = suspended_run(personas, harness, agent)
    return run, request, harness, tool


def inbox_post(user: Any, request: Any, **data: Any) -> Any:
    client = Client()
    client.force_login(user)
    data.setdefault("decision", "approve")
    return client.post(f"/approvals/{request.pk}/decide/", data, follow=True)


def test_the_tool_receives_exactly_the_arguments_the_approver_edited(personas, resumes) -> None:
    run, request, harness, tool = editable_request(personas, resumes)

    page = inbox_post(personas.approver, request, arguments=json.dumps(EDITED))

    assert "Approved: Purchase pay with your changed arguments" in page.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED
    assert request.tool_args == EDITED and request.args_sha256 == args_sha256(EDITED)
    assert harness.resume(run) == RunStatus.COMPLETED
    assert tool.calls == [EDITED]
    assert ToolExecution.objects.get(run=run).args == EDITED
    [started] = events_of(run, ev.TOOL_STARTED)
    assert started["args_sha256"] == request.args_sha256, "the engine bound to the edited hash"


def test_the_llm_is_told_what_was_changed_and_by_whom(personas, resumes) -> None:
    run, request, harness, _ = editable_request(personas, resumes)
    inbox_post(personas.approver, request, arguments=json.dumps(EDITED))

    harness.resume(run)

    observation = [m for m in harness.llm_requests[-1] if m.get("role") == "tool"][-1]["content"]
    assert "the approver april changed the arguments before approving" in observation
    assert "amount changed from 1250.5 to 1000" in observation
    assert '{"status": "paid"}' in observation


def test_the_record_keeps_the_proposed_and_the_approved_arguments_and_the_editor(personas, resumes) -> None:
    _, request, _, _ = editable_request(personas, resumes)
    inbox_post(personas.approver, request, arguments=json.dumps(EDITED))

    request.refresh_from_db()
    assert request.proposed_args == PAY_ARGS and request.proposed_args_sha256 == args_sha256(PAY_ARGS)
    assert request.edited_by == personas.approver
    edited = request.events.get(kind=Kind.EDITED)
    assert edited.actor == personas.approver
    assert edited.details["proposed_args"] == PAY_ARGS and edited.details["approved_args"] == EDITED
    auditor = Client()
    auditor.force_login(personas.auditor)
    page = auditor.get(f"/approvals/{request.pk}/").content.decode()
    assert "Changed by <b>april</b> before approval" in page
    assert "1250.5" in page and "1000" in page


def test_an_edit_outside_the_tools_schema_is_refused_and_nothing_is_decided(personas, resumes) -> None:
    _, request, _, _ = editable_request(personas, resumes)

    page = inbox_post(personas.approver, request, arguments=json.dumps({**EDITED, "amount": 99999}))

    text = page.content.decode()
    assert "The arguments were not changed: they do not fit the tool&#x27;s parameters" in text
    assert "99999" in text and "5000" in text
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.tool_args == PAY_ARGS
    assert not ConfirmationVote.objects.filter(request=request).exists()
    refused = request.events.get(kind=Kind.CLICK_REFUSED)
    assert refused.details["reason"].startswith("edit refused:")


def test_arguments_that_are_not_json_are_refused_with_a_clear_message(personas, resumes) -> None:
    _, request, _, _ = editable_request(personas, resumes)

    page = inbox_post(personas.approver, request, arguments="{amount: 1000")

    assert page.status_code == 200
    assert "The arguments cannot be read: not valid JSON" in page.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING


def test_a_non_approver_cannot_edit(personas, resumes) -> None:
    _, request, _, _ = editable_request(personas, resumes)

    outcome = confirmation_decide(
        request_id=request.pk, user=personas.auditor, approve=True, edited_args=EDITED
    )

    assert outcome.refused
    request.refresh_from_db()
    assert request.tool_args == PAY_ARGS and request.edited_by is None
    assert not request.events.filter(kind=Kind.EDITED).exists()


def test_without_the_policy_flag_an_edit_is_refused(personas, resumes) -> None:
    _, request, _, _ = editable_request(personas, resumes, allow_edit_on_approve=False)

    outcome = confirmation_decide(
        request_id=request.pk, user=personas.approver, approve=True, edited_args=EDITED
    )

    assert outcome.status == "invalid_edit" and "does not allow changing the arguments" in outcome.message
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.tool_args == PAY_ARGS


def test_a_chat_button_cannot_edit_and_the_card_links_to_the_inbox(personas, resumes) -> None:
    from channels_im.cards import card_facts

    _, request, _, _ = editable_request(personas, resumes)

    problem = edit_problem(request=request, edited_args=EDITED, via_channel_id=7)
    facts = card_facts(request)

    assert problem == "arguments can only be changed in the web inbox"
    assert edit_problem(request=request, edited_args=EDITED) is None, "the inbox may"
    assert any("change the arguments" in n and f"/approvals/{request.pk}/" in n for n in facts.notes)


def test_the_api_may_edit_too_and_says_400_when_the_edit_is_refused(personas, resumes) -> None:
    from rest_framework.test import APIClient

    _, request, _, _ = editable_request(personas, resumes)
    client = APIClient()
    client.force_login(personas.approver)
    url = f"/api/approvals/{request.pk}/decision/"

    bad = client.post(url, {"decision": "approve", "arguments": {"amount": "lots"}}, format="json")
    good = client.post(url, {"decision": "approve", "arguments": EDITED}, format="json")

    assert bad.status_code == 400 and bad.json()["status"] == "invalid_edit"
    assert good.status_code == 200 and good.json()["status"] == "approved"
    request.refresh_from_db()
    assert request.tool_args == EDITED


def test_with_a_quorum_the_first_approver_edits_and_the_others_approve_the_edited_arguments(
    personas, resumes
) -> None:
    run, request, harness, tool = editable_request(personas, resumes, approvals_required=2)

    first = confirmation_decide(
        request_id=request.pk, user=personas.approver, approve=True, edited_args=EDITED
    )
    late_edit = confirmation_decide(
        request_id=request.pk, user=personas.admin, approve=True, edited_args={**EDITED, "amount": 1}
    )
    unseen = confirmation_decide(request_id=request.pk, user=personas.admin, approve=True)
    stale = inbox_post(personas.admin, request, args_sha256=args_sha256(PAY_ARGS))
    second = inbox_post(personas.admin, request, args_sha256=args_sha256(EDITED))

    assert first.status == "recorded"
    assert late_edit.status == "invalid_edit" and "already voted" in late_edit.message
    assert unseen.status == "args_changed", "a caller that does not say what it saw cannot approve edits"
    assert "changed by another approver since you saw them" in page_text(stale)
    assert "Approved: Purchase pay" in page_text(second)
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED
    harness.resume(run)
    assert tool.calls == [EDITED]
