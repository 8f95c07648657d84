"""A policy may require M distinct approvals of the N who may decide (issue 15, item 1).

With the default policy the approvers are oscar (the agent's owner, whom an organisation admin
made an approver: docs/design.md §1.13), april (approver) and adam (admin): N = 3. Each vote is recorded
once; the request leaves ``pending`` once, when the M-th approval lands or a rejection does (or,
when one rejection is not enough, once approval became impossible).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from agents.models import RunStatus
from approvals.models import ConfirmationEvent, ConfirmationStatus, ConfirmationVote
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, make_approver, pay_tool, set_policy, suspended_run

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _oscar_approves(personas: Any) -> None:
    make_approver(personas, personas.operator)


def quorum_request(personas: Any, resumes: Any, **policy: Any) -> tuple[Any, Any, Any, Any]:
    set_policy(personas, **policy)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)
    return run, request, harness, tool


def vote(request: Any, user: Any, approve: bool = True, reason: str = "") -> Any:
    return confirmation_decide(request_id=request.pk, user=user, approve=approve, reason=reason)


def test_the_request_snapshots_the_policys_quorum(personas, resumes) -> None:
    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2, any_rejection_rejects=False)
    set_policy(personas, approvals_required=3)  # a later change does not move the bar

    request.refresh_from_db()
    assert request.approvals_required == 2 and request.any_rejection_rejects is False
    created = request.events.get(kind=Kind.CREATED)
    assert created.details["approvals_required"] == 2


def test_one_approval_of_two_keeps_the_request_pending_and_says_so(personas, resumes) -> None:
    run, request, harness, tool = quorum_request(personas, resumes, approvals_required=2)

    first = vote(request, personas.approver)

    assert not first.accepted and first.counted and first.status == "recorded"
    assert first.message == "Your approval was recorded: 1 of 2 approvals — waiting for one more."
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert resumes.run_ids == [], "nothing resumes the run before the quorum is met"
    assert request.events.filter(kind=Kind.VOTED).count() == 1
    assert harness.resume(run) == RunStatus.AWAITING_APPROVAL
    assert tool.calls == []


def test_the_second_distinct_approval_approves_and_the_tool_runs_once(personas, resumes) -> None:
    run, request, harness, tool = quorum_request(personas, resumes, approvals_required=2)

    vote(request, personas.approver)
    second = vote(request, personas.admin, reason="checked the PO")

    assert second.accepted and second.status == "approved"
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.admin
    decided = request.events.get(kind=Kind.DECIDED)
    assert decided.details["approvals"] == 2 and decided.details["required"] == 2
    assert harness.resume(run) == RunStatus.COMPLETED
    assert tool.calls == [PAY_ARGS]


def test_a_second_vote_by_the_same_person_counts_once(personas, resumes) -> None:
    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2)

    vote(request, personas.approver)
    again = vote(request, personas.approver)
    changed_mind = vote(request, personas.approver, approve=False)

    assert not again.counted and again.status == "already_voted"
    assert "counts once" in again.message
    assert not changed_mind.counted
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert list(request.votes.values_list("user_id", "approve")) == [(personas.approver.pk, True)]
    refused = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert [e.details["reason"] for e in refused] == ["already voted", "already voted"]


def test_one_rejection_rejects_by_default_even_after_an_approval(personas, resumes) -> None:
    run, request, harness, tool = quorum_request(personas, resumes, approvals_required=2)

    vote(request, personas.approver)
    no = vote(request, personas.operator, approve=False, reason="wrong supplier")

    assert no.accepted and no.status == "rejected"
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED and request.reason == "wrong supplier"
    late = vote(request, personas.admin)
    assert not late.counted and late.status == "rejected"
    harness.resume(run)
    assert tool.calls == []


def test_without_any_rejection_rejects_a_rejection_waits_until_approval_is_impossible(
    personas, resumes
) -> None:
    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2, any_rejection_rejects=False)

    first_no = vote(request, personas.operator, approve=False)
    assert first_no.status == "recorded", "two others could still approve"
    assert "1 rejection" in first_no.message
    yes = vote(request, personas.approver)
    assert yes.status == "recorded"
    second_no = vote(request, personas.admin, approve=False, reason="no")

    assert second_no.accepted and second_no.status == "rejected"
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED
    assert ConfirmationVote.objects.filter(request=request).count() == 3


def test_a_quorum_larger_than_the_people_who_may_approve_refuses_the_call_at_once(personas, resumes) -> None:
    set_policy(personas, approvals_required=4)  # only three people may approve
    tool = pay_tool()
    harness = Harness(tool)
    from agents.services import run_start
    from tests.approvals.kit import paying_agent

    run = run_start(agent=paying_agent(personas), user=personas.member, input="pay")
    assert harness.execute(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert tool.calls == []
    assert "needs 4 approvals and only 3 people may approve" in run.output
    assert not run.confirmation_requests.exists()


def test_a_voter_must_still_be_eligible_when_voting(personas, resumes) -> None:
    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2)
    personas.approver.is_active = False
    personas.approver.save()

    refused = vote(request, personas.approver)

    assert refused.refused
    assert not ConfirmationVote.objects.filter(request=request).exists()


def test_the_inbox_shows_the_tally_and_drops_the_request_for_who_voted(personas, resumes) -> None:
    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2)
    april, adam = Client(), Client()
    april.force_login(personas.approver)
    adam.force_login(personas.admin)

    answer = april.post(f"/approvals/{request.pk}/decide/", {"decision": "approve"}, follow=True)

    assert "1 of 2 approvals — waiting for one more" in answer.content.decode()
    assert str(request.pk) not in april.get("/approvals/").content.decode(), "april has voted"
    page = adam.get("/approvals/").content.decode()
    said = re.compile(r"1 of 2 approvals: april approved [0-9: -]+ UTC — waiting for one more")
    assert str(request.pk) in page and said.search(page), "adam sees who voted, and when"
    detail = adam.get(f"/approvals/{request.pk}/").content.decode()
    assert said.search(detail)


def test_the_api_answers_200_with_status_recorded_for_a_vote_towards_the_quorum(personas, resumes) -> None:
    from rest_framework.test import APIClient

    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2)
    client = APIClient()
    client.force_login(personas.approver)

    answer = client.post(f"/api/approvals/{request.pk}/decision/", {"decision": "approve"}, format="json")

    assert answer.status_code == 200 and answer.json()["status"] == "recorded"


def test_chat_cards_show_the_tally(personas, resumes) -> None:
    from channels_im.cards import card_facts
    from channels_im.slack.blocks import approval_blocks

    _, request, _, _ = quorum_request(personas, resumes, approvals_required=2)
    vote(request, personas.approver)

    facts = card_facts(request)

    assert re.fullmatch(r"1 of 2 approvals: april approved [0-9: -]+ UTC — waiting for one more", facts.tally)
    assert "1 of 2 approvals: april approved" in str(approval_blocks(facts))
