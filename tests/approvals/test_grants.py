"""Standing approvals (issue 26, item 2): approving, an approver may also approve later calls of
the same tool whose arguments meet conditions they set, for this conversation or this agent, for
N hours or until revoked, as the policy allows. Later matching calls are approved by the grant
without a human, each recorded as approved by it; nothing outside its conditions, nothing after
its revocation; organisation-enforced hooks still run first."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Conversation, RunStatus
from agents.services import run_start
from approvals.event_lines import EventLine
from approvals.models import (
    ApproverPolicy,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    StandingGrant,
)
from approvals.policy import policy_for
from approvals.selectors.queue_health import queue_health
from approvals.services.grants import (
    GrantAsk,
    GrantRefused,
    confirmation_approve_granting,
    grant_for_call,
    grant_revoke,
)
from approvals.views.history import HistoryRow
from tenancy.models import Membership, Role
from tests.admin_kit import logged_in, page_text, url
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import policy_form, set_policy
from tests.approvals.stage_kit import pay_tool, paying
from tests.personas import make_agent, make_hook

Kind = ConfirmationEvent.Kind
UP_TO_5000 = [{"field": "amount", "op": "<=", "value": 5000}]

pytestmark = pytest.mark.django_db(transaction=True)


def allow_grants(personas: Any, **fields: Any) -> ApproverPolicy:
    fields.setdefault("standing_grants", ApproverPolicy.Grants.AGENT)
    return set_policy(personas, **fields)


def by_amount() -> dict[str, Any]:
    """A scripted model that pays the amount the user names (1,000 or 9,000)."""

    def paying_turns(amount: int) -> list[dict[str, Any]]:
        call = {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-7", "amount": amount}}
        return [{"tool_calls": [call]}, {"content": "Outcome: {last}"}]

    return {
        "provider": "scripted",
        "script": {"rules": [{"match": "9000", "turns": paying_turns(9000)}, {"turns": paying_turns(1000)}]},
    }


def pay_in(personas: Any, harness: Harness, agent: Any, conversation: Any = None, text: str = "pay") -> Any:
    run = run_start(agent=agent, user=personas.member, input=text, conversation=conversation)
    harness.execute(run)
    run.refresh_from_db()
    return run


def grant(
    personas: Any, request: Any, *, scope: str = "conversation", hours: int | None = 4, conditions=None
):
    ask = GrantAsk(scope=scope, hours=hours, conditions=conditions or UP_TO_5000)
    return confirmation_approve_granting(request_id=request.pk, user=personas.approver, ask=ask)


def test_a_later_call_in_the_conversation_is_approved_by_the_grant_and_recorded_so(personas, resumes) -> None:
    allow_grants(personas)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    request = ConfirmationRequest.objects.get(run=first)
    outcome, standing = grant(personas, request)
    assert outcome.accepted and standing is not None
    assert harness.resume(first) == RunStatus.COMPLETED

    second = pay_in(personas, harness, agent, conversation=first.conversation)

    assert second.status == RunStatus.COMPLETED and len(tool.calls) == 2
    later = ConfirmationRequest.objects.get(run=second)
    assert later.status == ConfirmationStatus.APPROVED and later.grant_id == standing.pk
    assert later.responded_by == personas.approver and later.reason == f"standing approval #{standing.pk}"
    decided = later.events.get(kind=Kind.DECIDED)
    assert decided.details["via"] == "grant" and decided.details["grant"] == standing.pk
    assert "approval.pending" not in list(second.events.values_list("type", flat=True))
    standing.refresh_from_db()
    assert standing.uses == 1
    assert request.events.get(kind=Kind.GRANTED).details["conditions"] == UP_TO_5000
    assert queue_health(user=personas.auditor).overall.count == 1, "a grant's approval waited for nobody"


def test_the_record_says_in_words_which_standing_approval_decided_and_its_times_never_run_backwards(
    personas, resumes
) -> None:
    allow_grants(personas)
    harness = Harness(pay_tool())
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    request = ConfirmationRequest.objects.get(run=first)
    _, standing = grant(personas, request)
    harness.resume(first)
    second = pay_in(personas, harness, agent, conversation=first.conversation)
    later = ConfirmationRequest.objects.get(run=second)

    assert later.responded_at >= later.created_at, "a verdict never comes before its question"
    [decided] = [
        line
        for line in EventLine.lines_of(later, list(later.events.all()))
        if line.event.kind == Kind.DECIDED
    ]
    assert ("Standing approval", f"#{standing.pk}") in decided.rows
    assert ("Granted by", "april") in decided.rows
    assert ("Through", "A standing approval (nobody was asked)") in decided.rows
    [granted] = [
        line
        for line in EventLine.lines_of(request, list(request.events.all()))
        if line.event.kind == Kind.GRANTED
    ]
    assert ("Conditions", "Amount is at most 5,000") in granted.rows
    assert ("For", "In one conversation") in granted.rows
    assert HistoryRow.of(later, votes=[]).time_to_decision == "instant (standing approval)"


def test_a_grant_never_covers_arguments_outside_its_conditions_or_another_conversation(
    personas, resumes
) -> None:
    allow_grants(personas)
    harness = Harness(pay_tool())
    agent = make_agent(personas.org, personas.operator, name="Payer by amount", model_config_json=by_amount())
    first = pay_in(personas, harness, agent, text="pay 1000")
    grant(personas, ConfirmationRequest.objects.get(run=first))
    harness.resume(first)

    covered = pay_in(personas, harness, agent, conversation=first.conversation, text="pay 1000")
    too_much = pay_in(personas, harness, agent, conversation=first.conversation, text="pay 9000")
    elsewhere = pay_in(personas, harness, agent, text="pay 1000")

    assert too_much.status == elsewhere.status == RunStatus.AWAITING_APPROVAL
    assert ConfirmationRequest.objects.get(run=too_much).grant_id is None
    assert covered.status == RunStatus.COMPLETED


def test_an_agent_wide_grant_covers_every_conversation_of_the_agent(personas, resumes) -> None:
    allow_grants(personas)
    harness = Harness(pay_tool())
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    grant(personas, ConfirmationRequest.objects.get(run=first), scope="agent")
    harness.resume(first)

    assert pay_in(personas, harness, agent).status == RunStatus.COMPLETED


def test_a_revoked_or_expired_grant_approves_nothing(personas, resumes) -> None:
    allow_grants(personas)
    harness = Harness(pay_tool())
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    _, standing = grant(personas, ConfirmationRequest.objects.get(run=first), scope="agent")
    harness.resume(first)

    grant_revoke(grant=standing, by=personas.approver)
    assert pay_in(personas, harness, agent).status == RunStatus.AWAITING_APPROVAL

    first2 = ConfirmationRequest.objects.filter(status="pending").get()
    _, other = grant(personas, first2, scope="agent")
    type(other).objects.filter(pk=other.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert pay_in(personas, harness, agent).status == RunStatus.AWAITING_APPROVAL


def test_a_granter_who_lost_the_role_grants_nothing_any_more(personas, resumes) -> None:
    allow_grants(personas)
    harness = Harness(pay_tool())
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    grant(personas, ConfirmationRequest.objects.get(run=first), scope="agent")
    Membership.objects.filter(user=personas.approver).update(role=Role.MEMBER)

    assert pay_in(personas, harness, agent).status == RunStatus.AWAITING_APPROVAL


@pytest.mark.parametrize(
    ("policy", "ask", "said"),
    [
        ({"standing_grants": "off"}, {}, "allows no standing approvals"),
        ({"standing_grants": "conversation"}, {"scope": "agent"}, "for this conversation only"),
        ({}, {"hours": 9}, "from 1 to 8 hours"),
        ({}, {"hours": None}, "not until revoked"),
        (
            {},
            {"conditions": [{"field": "amount", "op": "<=", "value": 10}]},
            "must cover the call you approve",
        ),
        ({}, {"conditions": [{"field": "amount", "op": "~", "value": 10}]}, "op one of"),
        ({"approvals_required": 2}, {}, "not where more than one must approve"),
    ],
)
def test_the_policy_decides_what_may_be_granted_and_a_refusal_decides_nothing(
    personas, resumes, policy, ask, said
) -> None:
    allow_grants(personas, **policy)
    run = pay_in(personas, Harness(pay_tool()), paying(personas, 1_000))
    request = ConfirmationRequest.objects.get(run=run)
    fields = {"scope": "conversation", "hours": 4, "conditions": UP_TO_5000, **ask}

    with pytest.raises(GrantRefused, match=said):
        confirmation_approve_granting(request_id=request.pk, user=personas.approver, ask=GrantAsk(**fields))

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and not request.votes.exists()


def test_organisation_enforced_hooks_still_run_before_a_grant(personas, resumes) -> None:
    allow_grants(personas)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    grant(personas, ConfirmationRequest.objects.get(run=first), scope="agent")
    harness.resume(first)
    make_hook(personas.org, "deny_tools", params={"tools": ["oa__purchase_pay"], "message": "frozen"})

    blocked = pay_in(personas, harness, agent)

    assert blocked.status == RunStatus.COMPLETED and len(tool.calls) == 1
    assert not ConfirmationRequest.objects.filter(run=blocked).exists()


def test_the_inbox_grants_with_an_approval_and_the_grants_page_revokes_it(personas, resumes) -> None:
    allow_grants(personas)
    run = pay_in(personas, Harness(pay_tool()), paying(personas, 1_000))
    request = ConfirmationRequest.objects.get(run=run)
    client = logged_in(personas.approver)
    assert "Also approve later calls like this" in client.get("/approvals/").content.decode()

    client.post(
        f"/approvals/{request.pk}/decide/",
        {
            "decision": "approve",
            "args_sha256": request.args_sha256,
            "grant": "on",
            "grant_scope": "agent",
            "grant_hours": "3",
            # The rows as the editor posts them: a field, an operator, a value as typed.
            "grant_conditions-field": ["amount", ""],
            "grant_conditions-op": ["<=", "=="],
            "grant_conditions-value": ["2,000", ""],
        },
    )

    page = client.get("/approvals/grants/").content.decode()
    assert (
        "april approves Purchase pay where Amount is at most 2,000, in every conversation of the agent"
        in page
    )
    assert request.agent.standing_grants.get().conditions == [{"field": "amount", "op": "<=", "value": 2000}]
    standing = request.agent.standing_grants.get()
    assert logged_in(personas.member).post("/approvals/grants/", {"grant": standing.pk}).status_code == 403
    client.post("/approvals/grants/", {"grant": standing.pk})
    standing.refresh_from_db()
    assert standing.revoked_at is not None and standing.revoked_by == personas.approver


def test_a_bad_grant_in_the_inbox_decides_nothing_and_says_why(personas, resumes) -> None:
    allow_grants(personas)
    run = pay_in(personas, Harness(pay_tool()), paying(personas, 1_000))
    request = ConfirmationRequest.objects.get(run=run)
    client = logged_in(personas.approver)

    answer = client.post(
        f"/approvals/{request.pk}/decide/",
        {
            "decision": "approve",
            "args_sha256": request.args_sha256,
            "grant": "on",
            "grant_conditions-field": ["amount"],
            "grant_conditions-op": ["<="],
            "grant_conditions-value": [""],
        },
        follow=True,
    )

    assert "Condition 1: give a value for “amount”." in answer.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert Conversation.objects.count() == 1


def test_a_call_no_grant_could_cover_costs_the_gate_no_look_at_the_approvers(personas, resumes) -> None:
    """Only a grant whose conditions hold needs its granter checked against the organisation."""
    allow_grants(personas)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying(personas, 1_000)
    first = pay_in(personas, harness, agent)
    grant(personas, ConfirmationRequest.objects.get(run=first))
    assert harness.resume(first) == RunStatus.COMPLETED
    run = run_start(agent=agent, user=personas.member, input="pay", conversation=first.conversation)
    policy = policy_for(agent=agent)

    def look(amount: int) -> tuple[Any, list[str]]:
        args = {"purchase_id": "PO-7", "amount": amount}
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            found = grant_for_call(
                run=run, tool_name="oa__purchase_pay", tool_args=args, policy=policy, now=timezone.now()
            )
        return found, [q["sql"] for q in queries if "agents_membership" in q["sql"]]

    assert look(9_000) == (None, []), "outside the grant's conditions: nothing else read"
    found, membership_reads = look(1_000)
    assert found is not None and len(membership_reads) >= 1


# --- doubt goes to a person (docs/design.md §1.16) ----------------------------------------------------

# A payment tool whose amount is a number or a text, as many services take money.
TEXT_OR_NUMBER_PAY = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": ["number", "string"]}},
    "required": ["purchase_id", "amount"],
}


def text_or_number_pay_tool() -> RecordingTool:
    return RecordingTool(
        "oa__purchase_pay",
        result={"status": "paid"},
        parameters=TEXT_OR_NUMBER_PAY,
        requires_confirmation=True,
    )


def paying_what_is_said(personas: Any) -> Any:
    """A scripted model that pays the amount the user writes after "pay ", as written."""

    def turns(amount: Any) -> list[dict[str, Any]]:
        call = {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-7", "amount": amount}}
        return [{"tool_calls": [call]}, {"content": "Outcome: {last}"}]

    rules = [
        {"match": "25,000.00", "turns": turns("25,000.00")},
        {"match": "25000 USD", "turns": turns("25000 USD")},
        {"match": "4000 as text", "turns": turns("4000")},
        {"turns": turns(1000)},
    ]
    config = {"provider": "scripted", "script": {"rules": rules}}
    return make_agent(personas.org, personas.operator, name="Payer as said", model_config_json=config)


@pytest.mark.parametrize("amount", ["25,000.00", "25000 USD"])
def test_a_grant_never_approves_an_amount_it_cannot_compare(personas, resumes, amount: str) -> None:
    allow_grants(personas)
    tool = text_or_number_pay_tool()
    harness = Harness(tool)
    agent = paying_what_is_said(personas)
    first = pay_in(personas, harness, agent, text="pay 1000")
    outcome, standing = grant(personas, ConfirmationRequest.objects.get(run=first), scope="agent")
    assert outcome.accepted and standing is not None
    harness.resume(first)

    later = pay_in(personas, harness, agent, conversation=first.conversation, text=f"pay {amount}")

    assert later.status == RunStatus.AWAITING_APPROVAL
    assert [call["amount"] for call in tool.calls] == [1000], "nothing ran past the person"
    request = ConfirmationRequest.objects.get(run=later)
    assert request.status == ConfirmationStatus.PENDING and request.grant_id is None
    standing.refresh_from_db()
    assert standing.uses == 0


def test_a_grant_covers_a_text_the_tools_schema_declares_numeric_and_that_spells_a_number(
    personas, resumes
) -> None:
    allow_grants(personas)
    tool = text_or_number_pay_tool()
    harness = Harness(tool)
    agent = paying_what_is_said(personas)
    first = pay_in(personas, harness, agent, text="pay 1000")
    grant(personas, ConfirmationRequest.objects.get(run=first), scope="agent")
    harness.resume(first)

    later = pay_in(personas, harness, agent, conversation=first.conversation, text="pay 4000 as text")

    assert later.status == RunStatus.COMPLETED
    assert [call["amount"] for call in tool.calls] == [1000, "4000"]


def test_no_grant_is_made_from_a_call_its_conditions_cannot_judge(personas, resumes) -> None:
    allow_grants(personas)
    harness = Harness(text_or_number_pay_tool())
    agent = paying_what_is_said(personas)
    run = pay_in(personas, harness, agent, text="pay 25,000.00")
    request = ConfirmationRequest.objects.get(run=run)

    with pytest.raises(GrantRefused, match=r'amount is "25,000.00", which is not a number'):
        grant(personas, request, conditions=[{"field": "amount", "op": "<=", "value": 30000}])

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING, "a refused grant decides nothing"
    assert not StandingGrant.objects.filter(source_request=request).exists()


# --- what widens approvers' powers belongs to organisation admins -----------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("grant_max_hours", "8760"), ("standing_grants", "agent"), ("grants_until_revoked", "on")],
)
def test_an_operator_cannot_widen_standing_approvals_even_with_a_forged_post(governed, field, value) -> None:
    policy = ApproverPolicy.objects.create(
        organization=governed.org, standing_grants=ApproverPolicy.Grants.CONVERSATION
    )
    page = page_text(logged_in(governed.operator).get(url(ApproverPolicy, "change", policy.pk)))
    assert "disabled" in page.split(f'name="{field}"')[1].split(">")[0]

    answer = logged_in(governed.operator).post(
        url(ApproverPolicy, "change", policy.pk),
        policy_form(policy, **{"standing_grants": "conversation", field: value}),
    )

    assert answer.status_code == 200
    assert "Only an organisation admin of Acme can change this." in page_text(answer)
    policy.refresh_from_db()
    assert (policy.grant_max_hours, policy.standing_grants, policy.grants_until_revoked) == (
        8,
        "conversation",
        False,
    )


def test_an_operator_saving_the_policy_keeps_the_hours_the_admin_set(governed) -> None:
    policy = ApproverPolicy.objects.create(
        organization=governed.org, standing_grants=ApproverPolicy.Grants.AGENT, grant_max_hours=24
    )
    data = policy_form(policy, standing_grants="agent", grant_max_hours="24", timeout_seconds="900")

    answer = logged_in(governed.operator).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 302, page_text(answer)[:2000]
    policy.refresh_from_db()
    assert policy.timeout_seconds == 900 and policy.grant_max_hours == 24


def test_an_admin_sets_the_hours_and_a_grant_is_held_to_them(governed, resumes) -> None:
    policy = ApproverPolicy.objects.create(
        organization=governed.org, standing_grants=ApproverPolicy.Grants.AGENT, inline_wait_seconds=0
    )
    data = policy_form(policy, standing_grants="agent", grant_max_hours="24", inline_wait_seconds="0")
    assert logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data).status_code == 302
    harness = Harness(pay_tool())
    run = pay_in(governed, harness, paying(governed, 1_000))
    request = ConfirmationRequest.objects.get(run=run)

    with pytest.raises(GrantRefused, match="from 1 to 24 hours"):
        grant(governed, request, scope="agent", hours=8760)
    outcome, standing = grant(governed, request, scope="agent", hours=24)

    assert outcome.accepted and standing is not None
