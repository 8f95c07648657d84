"""Delegation: ``call_agent`` runs another agent as a child run behind that agent's own hooks."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.checks import hook_chain_of
from agents.models import Agent, ExecutionPath, Run, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import PAY_SCHEMA, set_policy
from tests.personas import make_agent, scripted

# Verdicts act after commit (they resume runs): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

PAY = {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-1", "amount": 5000}}


def asks(delegate: str, text: str = "pay PO-1") -> dict:
    return {"tool_calls": [{"name": "call_agent", "arguments": {"agent": delegate, "input": text}}]}


def caller(personas, delegate: str = "Ledger clerk", *, hooks=None, name="Assistant", **fields) -> Agent:
    config = scripted(asks(delegate), {"content": "Caller heard: {last}"}, hooks=hooks)
    return make_agent(personas.org, personas.operator, name=name, model_config_json=config, **fields)


def clerk(personas, *, hooks=None, name="Ledger clerk", **fields) -> Agent:
    config = scripted({"tool_calls": [PAY]}, {"content": "Paid: {last}"}, hooks=hooks)
    return make_agent(personas.org, personas.operator, name=name, model_config_json=config, **fields)


def pay_tool(**fields) -> RecordingTool:
    return RecordingTool("oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA, **fields)


def start(personas, agent: Agent) -> Run:
    return run_start(agent=agent, user=personas.member, input="please pay PO-1")


def observations(run: Run, tool: str = "call_agent") -> list[str]:
    return [e["observation"] for e in events_of(run, ev.TOOL_FINISHED) if e["tool"] == tool]


def test_the_delegates_hooks_apply_to_its_calls_and_the_callers_do_not(personas, resumes) -> None:
    pay = pay_tool()
    frozen = [{"name": "deny_tools", "params": {"tools": ["oa__*"], "message": "the caller forbids paying"}}]
    capped = [{"name": "set_arguments", "params": {"tools": "oa__purchase_pay", "values": {"amount": 1000}}}]
    delegate = clerk(personas, hooks=capped)
    agent = caller(personas, hooks=frozen)
    agent.delegates.set([delegate])
    run = start(personas, agent)

    assert Harness(pay).execute(run) == RunStatus.COMPLETED

    assert pay.calls == [{"purchase_id": "PO-1", "amount": 1000}], "the delegate's hook rewrote it"
    [child] = run.children.all()
    assert child.execution_path == ExecutionPath.DELEGATE and child.agent == delegate
    assert child.hook_chain == hook_chain_of(delegate) != run.hook_chain
    assert child.user == personas.member and child.input == "pay PO-1"
    assert events_of(child, ev.TOOL_BLOCKED) == [], "the caller's deny hook does not reach the delegate"
    run.refresh_from_db()
    assert run.output == 'Caller heard: Paid: {"status": "paid"}'


def test_the_gate_reads_the_delegates_own_confirm_everything_flag(personas, resumes) -> None:
    set_policy(personas)
    pay = pay_tool()  # not marked: only the delegate's flag asks for a human
    delegate = clerk(personas, require_confirmation_for_all=True)
    agent = caller(personas)
    agent.delegates.set([delegate])
    run = start(personas, agent)

    assert Harness(pay).execute(run) == RunStatus.AWAITING_APPROVAL

    [child] = run.children.all()
    request = ConfirmationRequest.objects.get()
    assert request.run == child and request.tool_name == "oa__purchase_pay" and pay.calls == []


def test_a_delegate_that_does_not_confirm_everything_is_not_gated_by_its_callers_flag(
    personas, resumes
) -> None:
    set_policy(personas)
    pay = pay_tool()
    delegate = clerk(personas)
    agent = caller(personas, require_confirmation_for_all=True)
    agent.delegates.set([delegate])
    harness = Harness(pay)
    run = start(personas, agent)
    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL  # the caller's own call_agent call
    request = ConfirmationRequest.objects.get()
    assert request.run == run and request.tool_name == "call_agent"

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert harness.resume(run) == RunStatus.COMPLETED
    assert ConfirmationRequest.objects.count() == 1, "the delegate's call needed no approval"
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 5000}]


def test_an_approval_inside_the_delegate_suspends_the_caller_and_its_verdict_resumes_both(
    personas, resumes
) -> None:
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)
    delegate = clerk(personas)
    agent = caller(personas)
    agent.delegates.set([delegate])
    harness = Harness(pay)
    run = start(personas, agent)

    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL

    [child] = run.children.all()
    assert child.status == RunStatus.AWAITING_APPROVAL and pay.calls == []
    [suspended] = events_of(run, ev.RUN_SUSPENDED)
    assert suspended["tool"] == "call_agent" and suspended["detail"]["delegate_run_id"] == child.pk

    request = ConfirmationRequest.objects.get(run=child)
    [relayed] = events_of(run, ev.APPROVAL_PENDING)
    assert relayed["request_id"] == str(request.pk) and relayed["child_run_id"] == child.pk
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert resumes.run_ids == [child.pk]
    assert harness.resume(child) == RunStatus.COMPLETED
    assert resumes.run_ids == [child.pk, run.pk], "the delegate's answer wakes the caller"
    assert Harness(pay).resume(run) == RunStatus.COMPLETED  # a fresh engine, as after a restart

    run.refresh_from_db()
    assert run.output == 'Caller heard: Paid: {"status": "paid"}'
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 5000}], "ran once"
    assert run.children.count() == 1, "re-entering the call did not start a second delegate"


def test_a_rejection_inside_the_delegate_reaches_the_caller_as_the_delegates_answer(
    personas, resumes
) -> None:
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)
    delegate = clerk(personas)
    agent = caller(personas)
    agent.delegates.set([delegate])
    harness = Harness(pay)
    run = start(personas, agent)
    harness.execute(run)
    [child] = run.children.all()

    request = ConfirmationRequest.objects.get(run=child)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="budget frozen")
    harness.resume(child)
    harness.resume(run)

    run.refresh_from_db()
    assert pay.calls == [] and run.status == RunStatus.COMPLETED
    assert "budget frozen" in run.output


def test_a_call_deeper_than_the_limit_is_refused_with_a_clear_observation(
    personas, resumes, settings
) -> None:
    settings.AGENT_DELEGATION_MAX_DEPTH = 1
    pay = pay_tool()
    third = clerk(personas, name="Third")
    second = caller(personas, "Third", name="Second")
    second.delegates.set([third])
    first = caller(personas, "Second", name="First")
    first.delegates.set([second])
    run = start(personas, first)

    assert Harness(pay).execute(run) == RunStatus.COMPLETED

    [child] = run.children.all()
    [refused] = observations(child)
    assert "nest agents 2 deep; the limit is 1" in refused
    assert not Run.objects.filter(agent=third).exists() and pay.calls == []
    run.refresh_from_db()
    assert "the limit is 1" in run.output


def test_the_default_depth_limit_is_three(personas, resumes) -> None:
    pay = pay_tool()
    agents = [clerk(personas, name="Level 4")]
    for level in (3, 2, 1, 0):
        agent = caller(personas, agents[-1].name, name=f"Level {level}")
        agent.delegates.set([agents[-1]])
        agents.append(agent)
    run = start(personas, agents[-1])

    Harness(pay).execute(run)

    assert Run.objects.filter(agent=agents[1]).exists(), "depth 3 ran"
    assert not Run.objects.filter(agent=agents[0]).exists() and pay.calls == [], "depth 4 was refused"


def test_a_call_back_up_the_chain_is_refused_as_a_cycle(personas, resumes) -> None:
    pay = pay_tool()
    first = caller(personas, "Second", name="First")
    second = caller(personas, "First", name="Second")
    first.delegates.set([second])
    second.delegates.set([first])
    run = start(personas, first)

    assert Harness(pay).execute(run) == RunStatus.COMPLETED

    [child] = run.children.all()
    [refused] = observations(child)
    assert "Refused: First is already working on this request" in refused and "cycle" in refused
    assert not child.children.exists()
    assert Run.objects.filter(agent=first).count() == 1


def test_only_declared_agents_of_the_same_organisation_may_be_called(personas, resumes) -> None:
    pay = pay_tool()
    outsider = make_agent(personas.other_org, personas.stranger, name="Ledger clerk")
    undeclared = clerk(personas, name="Undeclared")
    agent = caller(personas, "Undeclared")
    agent.delegates.set([outsider, clerk(personas)])
    run = start(personas, agent)

    Harness(pay).execute(run)

    [refused] = observations(run)
    assert "no agent named 'Undeclared' may be called; you may call: Ledger clerk" in refused
    assert not Run.objects.filter(agent__in=[outsider, undeclared]).exists()


def test_an_agent_without_delegates_has_no_call_agent_tool(personas, resumes) -> None:
    harness = Harness(pay_tool())
    run = start(personas, caller(personas))

    harness.execute(run)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["error"].startswith("Unknown tool 'call_agent'")
    assert "call_agent" not in str(harness.llm_requests[0])


def test_cancelling_a_waiting_delegate_wakes_its_caller_which_hears_it(personas, resumes) -> None:
    from agents.services import run_cancel

    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)
    agent = caller(personas)
    agent.delegates.set([clerk(personas)])
    harness = Harness(pay)
    run = start(personas, agent)
    harness.execute(run)
    [child] = run.children.all()

    run_cancel(run=child, user=personas.member)

    assert resumes.run_ids == [run.pk]
    assert harness.resume(run) == RunStatus.COMPLETED
    run.refresh_from_db()
    assert (
        run.output
        == "Caller heard: Tool error: Ledger clerk could not finish the task: cancelled by the user"
    )
    assert pay.calls == []


# --- declaring delegates in admin -----------------------------------------------------------------


def test_an_operator_declares_in_admin_which_agents_an_agent_may_call(superuser, personas) -> None:
    from tests.admin_kit import logged_in, url
    from tests.console.admin_forms import agent_form

    delegate = clerk(personas)
    data = agent_form(personas, scripted({"content": "x"}), delegates=[delegate.pk])

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 302
    assert list(Agent.objects.get(name="Invoice clerk").delegates.all()) == [delegate]


def test_the_admin_refuses_a_delegate_of_another_organisation(superuser, personas) -> None:
    from tests.admin_kit import logged_in, page_text, url
    from tests.console.admin_forms import agent_form

    outsider = make_agent(personas.other_org, personas.stranger, name="Globex clerk")
    data = agent_form(personas, scripted({"content": "x"}), delegates=[outsider.pk])

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    assert "An agent may only call agents of its own organisation." in page_text(response)
    assert not Agent.objects.filter(name="Invoice clerk").exists()
