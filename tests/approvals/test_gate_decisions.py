"""The approval gate's verdicts end to end: a gated call parks its run, and what runs, what the LLM
reads, who may decide and what is logged once someone approves, rejects, lets it expire or cancels."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents import events as ev
from agents.models import Run, RunStatus
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide, confirmation_expire_due
from tests.agents.engine_kit import Harness, events_of
from tests.approvals.kit import PAY_ARGS, pay_tool, paying_agent, set_policy, suspended_run

Kind = ConfirmationEvent.Kind

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)


def log_kinds(request: ConfirmationRequest) -> list[str]:
    return list(request.events.order_by("pk").values_list("kind", flat=True))


def test_a_gated_call_opens_a_request_and_parks_the_run(personas, resumes) -> None:
    set_policy(personas)
    tool = pay_tool()
    run, request = suspended_run(personas, Harness(tool))

    assert tool.calls == []
    run.refresh_from_db()
    assert run.status == RunStatus.AWAITING_APPROVAL
    assert request.status == ConfirmationStatus.PENDING and request.tool_args == PAY_ARGS
    # Not oscar: he owns and configures the agent, and is no approver (docs/design.md §1.13).
    assert set(request.approvers.all()) == {personas.approver, personas.admin}
    [pending] = events_of(run, "approval.pending")
    assert pending["arguments"] == PAY_ARGS and pending["tool"] == "oa__purchase_pay"
    assert {a["name"] for a in pending["approvers"]} == {"april", "adam"}
    assert pending["channel"] == "web" and pending["expires_at"] == request.expires_at.isoformat()
    assert log_kinds(request) == [Kind.CREATED, Kind.DELIVERED]


def test_approving_runs_the_tool_once_with_exactly_the_approved_arguments(personas, resumes) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)

    outcome = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert outcome.accepted and outcome.status == "approved"
    assert resumes.run_ids == [run.pk], "the verdict resumes the parked run"
    assert harness.resume(run) == RunStatus.COMPLETED
    assert harness.resume(run) is None
    assert tool.calls == [PAY_ARGS]
    run.refresh_from_db()
    assert run.output == 'Outcome: {"status": "paid"}'
    [decided] = events_of(run, "approval.decided")
    assert decided["status"] == "approved" and decided["by"] == "april"
    assert log_kinds(request) == [Kind.CREATED, Kind.DELIVERED, Kind.DECIDED, Kind.EXECUTED]
    [started] = events_of(run, ev.TOOL_STARTED)
    assert started["args_sha256"] == request.args_sha256


def test_rejecting_with_a_reason_tells_the_llm_and_never_runs_the_tool(personas, resumes) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="budget frozen")
    harness.resume(run)

    assert tool.calls == []
    run.refresh_from_db()
    assert (
        run.output == "Outcome: Rejected by april: budget frozen. The call was not executed. Do not retry it."
    )
    tool_message = harness.llm_requests[-1][-1]
    assert "budget frozen" in tool_message["content"]
    assert "do not retry" in harness.llm_requests[-1][0]["content"].lower(), "system prompt carries the rule"


def test_an_expired_request_never_runs_the_tool_and_the_llm_is_told(personas, resumes) -> None:
    set_policy(personas, timeout_seconds=60)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)

    assert confirmation_expire_due() == 0, "not due yet"
    assert confirmation_expire_due(now=timezone.now() + dt.timedelta(seconds=61)) == 1
    harness.resume(run)

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.EXPIRED and tool.calls == []
    run.refresh_from_db()
    assert run.output.startswith("Outcome: No decision within 60 s: the call was not executed.")
    late = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert not late.accepted and late.message == "This request was already expired."


def test_a_click_from_outside_the_approver_set_changes_nothing_and_is_logged(personas, resumes) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))

    outcome = confirmation_decide(request_id=request.pk, user=personas.auditor, approve=True)
    assert outcome.refused and "not an approver" in outcome.message
    # Someone of another organisation is told there is no such request, and nothing is logged.
    outcome = confirmation_decide(request_id=request.pk, user=personas.stranger, approve=True)
    assert outcome.status == "not_found"

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and resumes.run_ids == []
    refused = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert [e.actor for e in refused] == [personas.auditor]


def test_the_requester_cannot_approve_their_own_call_unless_the_policy_allows(personas, resumes) -> None:
    set_policy(personas, allow_initiator=True)  # the initiator is named, self-approval still off
    _, request = suspended_run(personas, Harness(pay_tool()))

    outcome = confirmation_decide(request_id=request.pk, user=personas.member, approve=True)

    assert outcome.refused and "their own call" in outcome.message
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert request.events.get(kind=Kind.CLICK_REFUSED).details["reason"].startswith("the requester")


def test_self_approval_works_when_the_policy_allows_it(personas, resumes) -> None:
    set_policy(personas, allow_initiator=True, allow_self_approval=True)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)
    assert confirmation_decide(request_id=request.pk, user=personas.member, approve=True).accepted
    harness.resume(run)
    assert tool.calls == [PAY_ARGS]


def test_duplicate_decisions_give_one_verdict_and_tell_the_others(personas, resumes) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))

    first = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    again = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    other = confirmation_decide(request_id=request.pk, user=personas.admin, approve=False, reason="no")

    assert first.accepted and not again.accepted and not other.accepted
    assert again.message == other.message == "This request was already approved."
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.approver
    assert request.events.filter(kind=Kind.DECIDED).count() == 1


def test_an_agent_with_require_confirmation_for_all_gates_even_read_tools(personas, resumes) -> None:
    set_policy(personas)
    tool = pay_tool()
    tool.spec = type(tool.spec)(name=tool.spec.name, description="", parameters=tool.spec.parameters)
    agent = paying_agent(personas, require_confirmation_for_all=True)
    _, request = suspended_run(personas, Harness(tool), agent)
    assert request.status == ConfirmationStatus.PENDING and tool.calls == []


def test_a_call_nobody_may_approve_is_refused_at_once(personas, resumes) -> None:
    set_policy(personas, allow_agent_owner=False, allow_org_approvers=False)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying_agent(personas)
    from agents.services import run_start

    run = run_start(agent=agent, user=personas.member, input="pay")
    assert harness.execute(run) == RunStatus.COMPLETED
    run.refresh_from_db()
    assert "nobody is authorised to approve this call" in run.output and tool.calls == []


def test_cancelling_a_parked_run_withdraws_its_request(personas, resumes) -> None:
    from agents.services import run_cancel

    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    run_cancel(run=Run.objects.get(pk=run.pk), user=personas.member)
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.CANCELLED
    assert not confirmation_decide(request_id=request.pk, user=personas.approver, approve=True).accepted


def test_the_event_log_is_append_only(personas, resumes) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    event = request.events.first()
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    with pytest.raises(ValueError, match="append-only"):
        event.delete()
