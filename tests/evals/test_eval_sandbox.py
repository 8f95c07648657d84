"""Evals have no side effects, ever (docs/design.md §1.2): every tool call of an eval — its delegates' and
its DAG steps' included — is answered without reaching the outside world, unless the eval set
calls a read-only tool live; such a live call still passes the organisation's enforced hooks,
read-only mode and the audit log; and no eval ever opens an approval request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agents import events as ev
from agents.engine.runner import run_execute
from agents.models import Agent, ConnectorCallLog, ExecutionPath, Run, RunStatus, ToolExecution
from approvals.models import ConfirmationRequest
from evals.models import EvalRun, EvalSet, EvalStatus, Outcome
from evals.services import eval_run_start, eval_set_create
from fimone.errors import ServiceError
from tests.agents.engine_kit import events_of
from tests.agents.test_end_to_end import PAY_SCHEMA, Service, service
from tests.personas import make_action, make_agent, make_hook, make_http_connector, scripted
from tests.workflows.kit import dispatched

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["dispatched", "service"]

BIG = {"purchase_id": "PO-1001", "amount": 999_999}
CONFIRM_FROM_1000 = {"conditions": [{"field": "amount", "op": ">=", "value": 1000}]}


def actions(personas: Any, service: Service) -> dict[str, Any]:
    """The OA connector's list (GET) and payment (POST, not flagged for confirmation)."""
    oa = make_http_connector(personas.org, service.base_url)
    return {
        "list": make_action(oa, "purchase_list", path="purchases"),
        "pay": make_action(
            oa,
            "purchase_pay",
            method="POST",
            path="purchases/{purchase_id}/pay",
            parameters_schema=PAY_SCHEMA,
            requires_confirmation=False,
        ),
    }


def calling(personas: Any, calls: list[dict[str, Any]], *, name: str = "Payer", **fields: Any) -> Agent:
    """An agent whose model makes ``calls`` in one turn, then answers with what it read."""
    return make_agent(
        personas.org,
        personas.operator,
        name=name,
        model_config_json=scripted({"tool_calls": calls}, {"content": "Outcome: {last}"}),
        **fields,
    )


def evaluate(personas: Any, agent: Agent, **sandbox: Any) -> EvalRun:
    cases = [{"input": "Pay PO-1001", "expectation": "contains", "expected": ""}]
    eval_set = eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="Payments", cases=cases, **sandbox
    )
    eval_run = eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator)
    for _ in range(10):  # the cases, then any child run they left queued (none should wait)
        queued = list(Run.objects.filter(status=RunStatus.QUEUED).values_list("pk", flat=True))
        if not queued:
            break
        for run_id in queued:
            async_to_sync(run_execute)(run_id)
    eval_run.refresh_from_db()
    return eval_run


def case_run(eval_run: EvalRun) -> Run:
    return eval_run.results.get().run


# --- nothing reaches the outside world ----------------------------------------------------------------


@pytest.mark.parametrize(
    "enforced",
    [
        None,
        ("deny_tools", {"tools": ["oa__purchase_pay"], "message": "Payments are frozen."}),
        ("confirm_when", CONFIRM_FROM_1000),
    ],
    ids=["no-enforced-hook", "enforced-deny", "enforced-confirm-when"],
)
def test_a_payment_proposed_in_an_eval_never_reaches_the_service(
    personas, dispatched, service: Service, enforced
) -> None:
    if enforced is not None:
        make_hook(personas.org, enforced[0], params=enforced[1])
    agent = calling(personas, [{"name": "oa__purchase_pay", "arguments": BIG}])
    agent.actions.set([actions(personas, service)["pay"]])

    eval_run = evaluate(personas, agent)

    assert service.received == [], "the payments service received nothing"
    run = case_run(eval_run)
    assert run.status == RunStatus.COMPLETED and eval_run.status == EvalStatus.COMPLETED
    assert run.output.startswith("Outcome: Dry run (eval): oa__purchase_pay")
    assert "999999" in run.output, "the model reads what would have been sent"
    assert not ConfirmationRequest.objects.exists()
    [started] = events_of(run, ev.TOOL_STARTED)
    assert started["dry_run"] is True
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.SUCCEEDED


def test_a_read_only_organisation_sees_nothing_sent_by_an_eval_either(personas, dispatched, service) -> None:
    personas.org.read_only = True
    personas.org.save(update_fields=["read_only"])
    agent = calling(personas, [{"name": "oa__purchase_pay", "arguments": BIG}])
    agent.actions.set([actions(personas, service)["pay"]])

    eval_run = evaluate(personas, agent)

    assert service.received == []
    assert case_run(eval_run).status == RunStatus.COMPLETED


def test_a_recorded_answer_stands_in_for_the_tool(personas, dispatched, service) -> None:
    agent = calling(personas, [{"name": "oa__purchase_list", "arguments": {}}])
    agent.actions.set([actions(personas, service)["list"]])
    recorded = [{"id": "PO-7", "vendor": "Recorded Ltd"}]

    eval_run = evaluate(personas, agent, tool_answers={"oa__purchase_list": recorded})

    assert service.received == []
    assert case_run(eval_run).output == f"Outcome: {json.dumps(recorded, sort_keys=True)}"


def test_a_tool_that_stays_in_the_process_runs_as_it_is(personas, dispatched) -> None:
    agent = calling(
        personas, [{"name": "calculator", "arguments": {"expression": "6 * 7"}}], builtin_tools=["calculator"]
    )

    eval_run = evaluate(personas, agent)

    assert "42" in case_run(eval_run).output


# --- a live read passes what the organisation enforces ------------------------------------------------


def test_a_live_read_passes_the_organisations_enforced_hooks(personas, dispatched, service) -> None:
    make_hook(personas.org, "deny_tools", params={"tools": ["oa__purchase_list"], "message": "Not today."})
    agent = calling(personas, [{"name": "oa__purchase_list", "arguments": {}}])
    agent.actions.set([actions(personas, service)["list"]])

    eval_run = evaluate(personas, agent, live_tools=["oa__purchase_list"])

    assert service.received == []
    run = case_run(eval_run)
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools" and run.output == "Outcome: Not today."


def test_a_live_read_is_recorded_by_the_enforced_audit_log_and_runs_in_a_read_only_organisation(
    personas, dispatched, service
) -> None:
    make_hook(personas.org, "audit_log")
    personas.org.read_only = True
    personas.org.save(update_fields=["read_only"])
    agent = calling(personas, [{"name": "oa__purchase_list", "arguments": {}}])
    agent.actions.set([actions(personas, service)["list"]])

    eval_run = evaluate(personas, agent, live_tools=["oa__purchase_list"])

    assert [(method, path) for method, path, *_ in service.received] == [("GET", "/api/purchases")]
    [logged] = ConnectorCallLog.objects.all()
    assert logged.run == case_run(eval_run) and logged.outcome == ConnectorCallLog.Outcome.SUCCEEDED


def test_a_live_read_that_an_enforced_hook_sends_to_approval_is_answered_not_asked(
    personas, dispatched, service
) -> None:
    make_hook(
        personas.org, "confirm_when", params={"conditions": [{"field": "status", "op": "==", "value": "x"}]}
    )
    agent = calling(personas, [{"name": "oa__purchase_list", "arguments": {"status": "x"}}])
    listing = actions(personas, service)["list"]
    listing.parameters_schema = {"type": "object", "properties": {"status": {"type": "string"}}}
    listing.save()
    agent.actions.set([listing])

    eval_run = evaluate(personas, agent, live_tools=["oa__purchase_list"])

    assert service.received == [] and not ConfirmationRequest.objects.exists()
    [blocked] = events_of(case_run(eval_run), ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "eval_sandbox"
    assert "needs a person's approval (asked by confirm_when)" in blocked["error"]


def test_a_tool_that_writes_cannot_be_called_live(personas, dispatched, service) -> None:
    agent = calling(personas, [{"name": "oa__purchase_pay", "arguments": BIG}])
    agent.actions.set([actions(personas, service)["pay"]])
    cases = [{"input": "Pay", "expectation": "contains", "expected": ""}]
    eval_set = eval_set_create(
        user=personas.operator,
        organization_id=personas.org.pk,
        name="Live payments",
        cases=cases,
        live_tools=["oa__purchase_pay"],
    )

    with pytest.raises(ServiceError, match="oa__purchase_pay does not only read"):
        eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator)

    # A run whose sandbox names a writing tool live anyway (the tool changed after the check)
    # still answers its calls with a dry run.
    EvalSet.objects.filter(pk=eval_set.pk).update(live_tools=[])
    eval_set.refresh_from_db()
    run = case_run(eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator))
    chain = run.hook_chain
    Run.objects.filter(pk=run.pk).update(
        hook_chain={**chain, "sandbox": {**chain["sandbox"], "live_tools": ["oa__purchase_pay"]}}
    )
    async_to_sync(run_execute)(run.pk)
    run.refresh_from_db()
    assert service.received == [] and "Dry run (eval)" in run.output


# --- delegates and DAG steps inherit the sandbox ----------------------------------------------------------


def test_a_delegate_called_in_an_eval_inherits_its_sandbox_and_never_asks_a_person(
    personas, dispatched, service
) -> None:
    pay = actions(personas, service)["pay"]
    pay.requires_confirmation = True
    pay.save()
    clerk = calling(personas, [{"name": "oa__purchase_pay", "arguments": BIG}], name="Ledger clerk")
    clerk.actions.set([pay])
    make_hook(clerk, "deny_tools", params={"tools": ["*"], "message": "the clerk's own hook"})
    call = {"name": "call_agent", "arguments": {"agent": "Ledger clerk", "input": "pay PO-1001"}}
    caller = make_agent(
        personas.org,
        personas.operator,
        name="Assistant",
        model_config_json=scripted({"tool_calls": [call]}, {"content": "Delegate said: {last}"}),
    )
    caller.delegates.set([clerk])

    eval_run = evaluate(personas, caller)

    assert service.received == [] and not ConfirmationRequest.objects.exists()
    root = case_run(eval_run)
    assert root.status == RunStatus.COMPLETED, root.error
    [child] = Run.objects.filter(parent_run=root)
    assert child.execution_path == ExecutionPath.DELEGATE and child.hooks_bypassed
    assert child.hook_chain["sandbox"] == root.hook_chain["sandbox"]
    assert events_of(child, ev.TOOL_BLOCKED) == [], "the delegate's own hooks are bypassed too"
    assert "Dry run (eval): oa__purchase_pay needs a person's approval" in root.output
    assert eval_run.results.get().outcome == Outcome.PASSED


def test_a_dag_agent_is_evaluated_as_a_dag_whose_steps_inherit_the_sandbox(
    personas, dispatched, service
) -> None:
    plan = {
        "steps": [
            {"id": "list", "task": "list the purchases", "depends_on": []},
            {"id": "pay", "task": "pay the purchase", "depends_on": ["list"]},
        ]
    }
    config = {
        "provider": "scripted",
        "script": {
            "rules": [
                {"match": "^Plan this task", "turns": [{"content": json.dumps(plan)}]},
                {"match": "^Synthesise", "turns": [{"content": "Synthesised: {last}"}]},
                {"match": "^pay", "turns": [{"tool_calls": [{"name": "oa__purchase_pay", "arguments": BIG}]},
                                            {"content": "Step: {last}"}]},
                {"turns": [{"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
                           {"content": "Step: {last}"}]},
            ]
        },
    }  # fmt: skip
    made = actions(personas, service)
    agent = make_agent(personas.org, personas.operator, engine="dag", model_config_json=config)
    agent.actions.set([made["list"], made["pay"]])

    eval_run = evaluate(personas, agent, live_tools=["oa__purchase_list"])

    root = case_run(eval_run)
    assert root.status == RunStatus.COMPLETED, root.error
    assert events_of(root, ev.DAG_PLANNED), "planned as a DAG, not run as ReAct"
    steps = list(Run.objects.filter(parent_run=root).order_by("pk"))
    assert [s.execution_path for s in steps] == [ExecutionPath.DAG, ExecutionPath.DAG]
    assert all(s.hooks_bypassed and s.hook_chain["sandbox"] == root.hook_chain["sandbox"] for s in steps)
    assert [method for method, *_ in service.received] == ["GET"], "only the live read was sent"
    assert not ConfirmationRequest.objects.exists()
