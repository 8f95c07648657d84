"""Stages routed by conditions (issue 26, item 1): "from 50,000 on, the requester's team lead,
then finance (2 of 3)". A request moves on only when its current stage approves; any stage's
rejection rejects; each stage has its own people, quorum, deadline and escalation, and the one
verdict, the bound arguments and the audit chain hold as for any request (docs/design.md §1.4, §5).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.utils import timezone

from agents.models import RunStatus
from agents.services import run_start
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus, EscalationTier
from approvals.policy import ResolvedStage
from approvals.selectors import inbox_for
from approvals.selectors.queue_health import queue_health
from approvals.services import confirmation_decide, confirmation_escalate_due, confirmation_expire_due
from hooks.conditions import conditions_of
from tenancy.models import Membership, Role
from tests.admin_kit import api_logged_in, logged_in, page_text, url
from tests.agents.engine_kit import Harness, event_types
from tests.approvals.kit import set_policy
from tests.approvals.stage_kit import parked_payment, pay_tool, paying, two_stage_policy
from tests.personas import make_user

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)


def vote(request: Any, user: Any, approve: bool = True, **kw: Any) -> Any:
    return confirmation_decide(request_id=request.pk, user=user, approve=approve, **kw)


def asked(user: Any) -> list[Any]:
    return list(inbox_for(user=user).values_list("pk", flat=True))


def test_a_call_no_stage_applies_to_is_decided_by_the_policys_approvers_alone(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    harness = Harness(pay_tool())
    run, request = parked_payment(personas, harness, 40_000)

    assert request.stage_plan == []
    assert request.pk in asked(personas.approver) and request.pk in asked(staff.finn)
    outcome = vote(request, personas.approver)

    assert outcome.accepted and outcome.status == "approved"
    assert harness.resume(run) == RunStatus.COMPLETED


def test_a_large_call_asks_the_requesters_manager_then_two_of_finance(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = parked_payment(personas, harness, 60_000)

    assert [stage["name"] for stage in request.stage_plan] == ["Team lead", "Finance"]
    assert request.stage_plan[0]["user_ids"] == [staff.lee.pk]
    assert request.stage_plan[1]["user_ids"] == sorted([staff.finn.pk, staff.fiona.pk, staff.fred.pk])
    assert request.approvals_required == 1
    assert asked(staff.lee) == [request.pk]
    assert asked(staff.finn) == [] and asked(personas.approver) == [], "april is not asked at all"
    pending = run.events.get(type="approval.pending").payload
    assert [person["name"] for person in pending["approvers"]] == ["lee"], (
        "the requester is told who decides now"
    )

    early = vote(request, staff.finn)
    assert early.refused
    assert (
        "asked at stage 2 of 2 (Finance); the request is still at stage 1 of 2 (Team lead)" in early.message
    )

    lead = vote(request, staff.lee, reason="budgeted")
    assert lead.counted and not lead.accepted
    assert lead.message == (
        "Your approval was recorded: stage 1 of 2 (Team lead) is approved, and the request now "
        "waits for stage 2 of 2 (Finance)."
    )
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert request.stage_index == 1 and request.approvals_required == 2
    assert resumes.run_ids == [], "the run waits for the last stage"
    assert asked(staff.lee) == [] and asked(staff.finn) == [request.pk]
    assert harness.resume(run) == RunStatus.AWAITING_APPROVAL and tool.calls == []

    assert vote(request, staff.finn).status == "recorded"
    final = vote(request, staff.fiona)

    assert final.accepted and final.status == "approved"
    assert harness.resume(run) == RunStatus.COMPLETED
    assert len(tool.calls) == 1
    kinds = list(request.events.values_list("kind", flat=True))
    assert kinds[:1] == [Kind.CREATED] and Kind.CLICK_REFUSED in kinds
    decisions = [k for k in kinds if k in (Kind.VOTED, Kind.STAGE_OPENED, Kind.DECIDED)]
    assert decisions == [Kind.VOTED, Kind.STAGE_OPENED, Kind.VOTED, Kind.DECIDED]
    opened = request.events.get(kind=Kind.STAGE_OPENED)
    assert opened.details["stage"] == 2 and opened.details["name"] == "Finance"
    assert request.events.get(kind=Kind.DECIDED).details["required"] == 2
    assert "approval.decided" in event_types(run)


def test_any_stages_rejection_rejects_the_call(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = parked_payment(personas, harness, 75_000)
    vote(request, staff.lee)

    outcome = vote(request, staff.fred, approve=False, reason="not this quarter")

    assert outcome.accepted and outcome.status == "rejected"
    assert harness.resume(run) == RunStatus.COMPLETED
    assert tool.calls == []


def test_a_stage_that_cannot_reach_its_quorum_refuses_the_call_at_once(personas, resumes) -> None:
    staff = two_stage_policy(personas, finance_required=4)
    tool = pay_tool()
    harness = Harness(tool)

    run = run_start(agent=paying(personas, 90_000), user=personas.member, input="pay")

    assert harness.execute(run) == RunStatus.COMPLETED
    observation = run.events.filter(type="tool.blocked").values_list("payload", flat=True).first()
    assert observation is not None
    assert "stage 2 (Finance) needs 4 approvals and only 3 people may give it" in str(observation)
    assert tool.calls == [] and staff.finance.approvals_required == 4


def test_nobody_approves_two_stages_of_one_call(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    staff.finance.named_users.add(staff.lee)  # the lead is in finance too
    harness = Harness(pay_tool())
    _, request = parked_payment(personas, harness, 60_000)

    assert staff.lee.pk not in request.stage_plan[1]["user_ids"]
    vote(request, staff.lee)
    again = vote(request, staff.lee)

    assert again.refused and "your stage is over" in again.message


def test_a_requester_without_a_manager_leaves_the_lead_stage_without_approvers(personas, resumes) -> None:
    two_stage_policy(personas)
    Membership.objects.filter(user=personas.member).update(manager=None)
    harness = Harness(pay_tool())

    run = run_start(agent=paying(personas, 60_000), user=personas.member, input="pay")

    assert harness.execute(run) == RunStatus.COMPLETED
    assert "stage 1 (Team lead) needs 1 approval and only 0 people may give it" in str(
        list(run.events.values_list("payload", flat=True))
    )


def test_an_approver_who_lost_the_role_is_refused_at_their_stage(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    harness = Harness(pay_tool())
    _, request = parked_payment(personas, harness, 60_000)
    vote(request, staff.lee)
    Membership.objects.filter(user=staff.fiona).update(role=Role.MEMBER)

    outcome = vote(request, staff.fiona)

    assert outcome.refused and "no longer an approver of the organisation" in outcome.message


def test_a_vote_read_before_the_stage_moved_on_is_refused_under_the_lock(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    staff.lead.named_users.add(personas.admin)  # adam leads too: either approval ends stage 1
    harness = Harness(pay_tool())
    _, request = parked_payment(personas, harness, 60_000)
    assert sorted(request.stage_plan[0]["user_ids"]) == sorted([staff.lee.pk, personas.admin.pk])
    stale = type(request).objects.select_related("agent", "requested_by").get(pk=request.pk)

    vote(request, staff.lee)  # stage 1 approved meanwhile
    late = confirmation_decide(request_id=request.pk, user=personas.admin, approve=True, loaded=stale)

    assert late.refused and "your stage is over: the request is at stage 2 of 2 (Finance)" in late.message
    assert not request.votes.filter(user=personas.admin).exists()


def test_each_stage_has_its_own_deadline_and_escalation(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    staff.finance.timeout_seconds = 300
    staff.finance.save()
    tier = EscalationTier.objects.create(policy=staff.policy, stage=staff.finance, after_seconds=60)
    tier.named_users.set([personas.approver])
    harness = Harness(pay_tool())
    _, request = parked_payment(personas, harness, 60_000)
    assert request.escalation_plan == [], "the lead's stage has no tier"
    assert request.stage_plan[1]["tiers"][0]["user_ids"] == [personas.approver.pk]

    vote(request, staff.lee)
    request.refresh_from_db()
    opened = request.stage_opened_at
    assert request.expires_at == opened + dt.timedelta(seconds=300)
    assert request.next_escalation_at == opened + dt.timedelta(seconds=60)

    assert confirmation_escalate_due(now=opened + dt.timedelta(seconds=59)) == 0
    assert confirmation_escalate_due(now=opened + dt.timedelta(seconds=61)) == 1
    assert request.pk in asked(personas.approver), "april joins finance at its tier"
    assert vote(request, personas.approver).status == "recorded"
    assert confirmation_expire_due(now=opened + dt.timedelta(seconds=301)) == 1
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.EXPIRED


def test_a_policy_without_stages_opens_requests_as_before(personas, resumes) -> None:

    set_policy(personas)
    harness = Harness(pay_tool())
    _, request = parked_payment(personas, harness, 60_000)

    assert request.stage_plan == [] and request.stage_opened_at is None
    assert "stages" not in request.events.get(kind=Kind.CREATED).details
    assert timezone.now() < request.expires_at


def test_the_queues_health_times_each_stage_and_waits_only_for_the_current_ones(personas, resumes) -> None:

    staff = two_stage_policy(personas)
    harness = Harness(pay_tool())
    _, decided = parked_payment(personas, harness, 60_000)
    vote(decided, staff.lee)
    vote(decided, staff.finn)
    vote(decided, staff.fred)
    _, waiting = parked_payment(personas, harness, 70_000)
    auditor = make_user("audrey", personas.org, Role.AUDITOR)

    health = queue_health(user=auditor)

    stages = {t.label: t.count for t in health.by_stage}
    assert stages == {"Team lead": 1, "Finance": 1}
    total = next(t for t in health.by_agent).p50
    assert sum(t.p50 for t in health.by_stage) == pytest.approx(total, abs=0.01)
    loads = {load.label: load.waiting for load in health.approvers}
    assert loads.get("lee") == 1, "the waiting request asks its team lead"
    assert "fiona" not in loads or loads["fiona"] == 0, "finance is not waited for before its stage"
    assert waiting.status == ConfirmationStatus.PENDING


def test_the_admin_record_and_the_request_page_list_the_stages(personas, resumes, superuser) -> None:

    staff = two_stage_policy(personas)
    _, request = parked_payment(personas, Harness(pay_tool()), 60_000)
    vote(request, staff.lee, reason="fine")

    record = page_text(logged_in(superuser).get(url(ConfirmationRequest, "change", request.pk)))
    page = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", "", page_text(logged_in(staff.finn).get(f"/approvals/{request.pk}/")))
    )

    assert "Stage 1 of 2 — Team lead (1 approval): approved — lee approved" in record
    assert "Stage 2 of 2 — Finance (2 approvals): asked now" in record
    assert "Stage 1 of 2 — Team lead (1 approval): approved — lee approved" in page
    assert "asked now · waiting for finn, fiona, fred" in page

    vote(request, staff.fiona, reason="ok")
    page = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", "", page_text(logged_in(staff.finn).get(f"/approvals/{request.pk}/")))
    )
    assert "waiting for finn, fred" in page, "who voted is no longer waited for"


def test_the_api_names_the_stage_a_request_waits_for(personas, resumes) -> None:

    staff = two_stage_policy(personas)
    _, request = parked_payment(personas, Harness(pay_tool()), 60_000)
    vote(request, staff.lee)

    [listed] = api_logged_in(staff.fiona).get("/api/approvals/").json()

    assert listed["id"] == str(request.pk)
    assert listed["stage"] == {"number": 2, "of": 2, "name": "Finance", "approvals_required": 2}
    assert api_logged_in(staff.lee).get("/api/approvals/").json() == []


# --- doubt goes to a person (docs/design.md §1.16) ----------------------------------------------------

FROM_50K = ResolvedStage(
    name="Large payments", conditions=conditions_of([{"field": "amount", "op": ">=", "value": 50000}])
)
TEXT_OR_NUMBER = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": ["number", "string"]}},
}


@pytest.mark.parametrize(
    ("args", "applies"),
    [
        ({"amount": 60_000}, True),
        ({"amount": 40_000}, False),
        ({"amount": "60000"}, True),
        ({"amount": "40000"}, False),
        ({"amount": "60,000.00"}, True),  # cannot be compared: the stage's people are asked
        ({"amount": "60000 USD"}, True),
        ({"amount": {"value": 60000}}, True),
        ({"purchase_id": "PO-1"}, True),  # declared, left out, no default: what it pays is unknown
    ],
)
def test_a_stage_applies_to_a_call_its_conditions_cannot_judge(args: dict[str, Any], applies: bool) -> None:
    judged = FROM_50K.applies(tool_name="oa__purchase_pay", agent_name="P", args=args, schema=TEXT_OR_NUMBER)

    assert judged is applies


def test_a_stage_on_a_field_the_tool_does_not_have_does_not_apply() -> None:
    listing = {"type": "object", "properties": {"status": {"type": "string"}}}

    assert not FROM_50K.applies(tool_name="oa__purchases_list", agent_name="Payer", args={}, schema=listing)
