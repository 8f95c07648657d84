"""The eval runner: the one path around the agent's hooks. Its runs say they bypassed them, a tool
that needs confirmation never runs (the connector's server receives nothing; the model reads a
dry-run observation), and each case is graded into a pass rate. What the sandbox promises across
enforced hooks, delegates and DAG steps: tests/evals/test_eval_sandbox.py."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agents import events as ev
from agents.engine.runner import run_execute
from agents.models import ExecutionPath, Run, RunStatus
from approvals.models import ConfirmationRequest
from evals.models import EvalRun, EvalStatus, Outcome
from evals.services import eval_run_start, eval_set_create
from tests.agents.engine_kit import events_of
from tests.agents.test_end_to_end import Service, service
from tests.approvals.kit import PAY_ARGS, PAY_SCHEMA
from tests.personas import make_action, make_agent, make_http_connector, scripted
from tests.workflows.kit import dispatched

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["dispatched", "service"]

DENY_OA = [{"name": "deny_tools", "params": {"tools": ["oa__*"], "message": "OA is off limits."}}]


def run_cases(eval_run: EvalRun) -> EvalRun:
    """Execute every case's run in-process, as a worker would; the eval run grades itself."""
    for run in Run.objects.filter(eval_result__eval_run=eval_run, status=RunStatus.QUEUED):
        async_to_sync(run_execute)(run.pk)
    eval_run.refresh_from_db()
    return eval_run


def one_case_set(personas: Any, *, expectation: str = "contains", expected: str = "", **sandbox: Any) -> Any:
    cases = [{"input": "Pay PO-1001", "expectation": expectation, "expected": expected}]
    return eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="Payments", cases=cases, **sandbox
    )


def test_an_eval_case_bypasses_the_hooks_and_its_run_says_so(personas, dispatched, service: Service) -> None:
    oa = make_http_connector(personas.org, service.base_url)
    listing = make_action(oa, "purchase_list", path="purchases")
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=[listing],
        model_config_json=scripted(
            {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
            {"content": "Found: {last}"},
            hooks=DENY_OA,
        ),
    )
    eval_set = one_case_set(personas, expected="PO-1001", live_tools=["oa__purchase_list"])
    eval_run = run_cases(eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator))

    run = eval_run.results.get().run
    assert run.hooks_bypassed is True and run.execution_path == ExecutionPath.EVAL
    assert run.hook_chain["declared"] == [], "the agent's own hooks are not in its chain"
    assert "confirmation_gate" not in run.hook_chain["system"], "an eval never asks a person"
    [note] = [e for e in events_of(run, ev.HOOK_SIDE_EFFECT) if e["hook"] == "eval_runner"]
    assert "oa__purchase_list" in note["message"]
    assert events_of(run, ev.TOOL_BLOCKED) == [], "the agent's blocking hook did not run"
    assert [r[0] for r in service.received] == ["GET"]
    assert eval_run.results.get().outcome == Outcome.PASSED


def test_a_tool_needing_confirmation_never_runs_in_an_eval(personas, dispatched, service: Service) -> None:
    oa = make_http_connector(personas.org, service.base_url)
    pay = make_action(
        oa, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay", parameters_schema=PAY_SCHEMA
    )
    assert pay.requires_confirmation
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=[pay],
        model_config_json=scripted(
            {"tool_calls": [{"name": "oa__purchase_pay", "arguments": dict(PAY_ARGS)}]},
            {"content": "Outcome: {last}"},
        ),
    )
    eval_set = one_case_set(personas, expectation="regex", expected=r"Dry run.*oa__purchase_pay.*PO-1001")
    eval_run = run_cases(eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator))

    assert service.received == [], "the connector's server received nothing"
    result = eval_run.results.get()
    assert result.outcome == Outcome.PASSED, result.detail
    assert "not executed" in result.output
    assert not ConfirmationRequest.objects.filter(run=result.run).exists()


def test_an_agent_that_confirms_everything_runs_no_tool_in_an_eval(
    personas, dispatched, service: Service
) -> None:
    oa = make_http_connector(personas.org, service.base_url)
    listing = make_action(oa, "purchase_list", path="purchases")
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=[listing],
        require_confirmation_for_all=True,
        model_config_json=scripted(
            {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]}, {"content": "Found: {last}"}
        ),
    )
    eval_run = run_cases(
        eval_run_start(
            eval_set=one_case_set(personas, expected="Dry run"), agent=agent, user=personas.operator
        )
    )
    assert service.received == []
    assert eval_run.results.get().outcome == Outcome.PASSED


def test_the_pass_rate_counts_the_cases_that_met_their_expectation(personas, dispatched) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json={
            "provider": "scripted",
            "script": {
                "rules": [
                    {"match": "json", "turns": [{"content": '{"total": 3, "currency": "EUR"}'}]},
                    {"turns": [{"content": "The invoice is paid."}]},
                ]
            },
        },
    )
    cases = [
        {"input": "state it", "expectation": "contains", "expected": "paid"},
        {"input": "state it", "expectation": "regex", "expected": r"^Refused"},
        {"input": "as json", "expectation": "json_equals", "expected": '{"currency": "EUR", "total": 3}'},
        {"input": "as json please", "expectation": "json_equals", "expected": '{"total": 4}'},
    ]
    eval_set = eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="Mixed", cases=cases
    )
    eval_run = eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator)
    assert eval_run.status == EvalStatus.RUNNING and eval_run.pass_rate is None

    eval_run = run_cases(eval_run)

    assert eval_run.status == EvalStatus.COMPLETED
    assert (eval_run.passed, eval_run.total, eval_run.pass_rate) == (2, 4, 0.5)
    outcomes = [r.outcome for r in eval_run.results.order_by("position")]
    assert outcomes == [Outcome.PASSED, Outcome.FAILED, Outcome.PASSED, Outcome.FAILED]
    assert "does not match" in eval_run.results.get(position=1).detail


def test_a_case_whose_run_fails_is_graded_as_an_error(personas, dispatched) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        max_iterations=1,
        model_config_json=scripted({"tool_calls": [{"name": "nothing", "arguments": {}}]}),
    )
    eval_run = run_cases(
        eval_run_start(eval_set=one_case_set(personas, expected="x"), agent=agent, user=personas.operator)
    )
    result = eval_run.results.get()
    assert result.outcome == Outcome.ERROR and "failed" in result.detail
    assert eval_run.pass_rate == 0.0


def test_only_operators_of_the_organisation_start_an_eval(personas, dispatched) -> None:
    from fimone.errors import ServiceError

    eval_set = one_case_set(personas, expected="Hello")
    agent = make_agent(personas.org, personas.operator)
    with pytest.raises(ServiceError) as refused:
        eval_run_start(eval_set=eval_set, agent=agent, user=personas.member)
    assert refused.value.code == "not_found"
    other_agent = make_agent(personas.other_org, personas.stranger)
    with pytest.raises(ServiceError):
        eval_run_start(eval_set=eval_set, agent=other_agent, user=personas.operator)
    assert not EvalRun.objects.exists()


def test_a_bad_expectation_is_refused_with_the_case_named(personas) -> None:
    from fimone.errors import ServiceError

    cases = [
        {"input": "a", "expectation": "contains", "expected": "x"},
        {"input": "b", "expectation": "regex", "expected": "("},
    ]
    with pytest.raises(ServiceError) as refused:
        eval_set_create(user=personas.operator, organization_id=personas.org.pk, name="Bad", cases=cases)
    assert refused.value.message.startswith("case 2: not a valid regular expression")
