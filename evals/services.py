"""Writes on eval sets and eval runs (HackSoft style: ``<entity>_<verb>``, keyword-only, atomic)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from agents.checks import sandbox_chain_of
from agents.models import Agent, ExecutionPath, Run, RunStatus
from agents.services import run_start, run_starts_take
from agents.tools.sandbox import SandboxSpecError, live_tool_problems, sandbox_spec
from agents.tools.toolbox import ToolboxError, tools_for_agent
from evals.grading import expectation_errors, grade
from evals.models import EvalCase, EvalResult, EvalRun, EvalSet, EvalStatus, Outcome
from fimone.errors import ServiceError
from tenancy.permissions import check_operator

log = logging.getLogger(__name__)


@transaction.atomic
def eval_set_create(
    *,
    user: Any,
    organization_id: int,
    name: str,
    cases: list[dict[str, str]],
    description: str = "",
    live_tools: list[str] | None = None,
    tool_answers: dict[str, Any] | None = None,
) -> EvalSet:
    """An eval set with its cases (``{"input", "expectation", "expected"}``), as an operator of
    the organisation, and its sandbox: the read-only tools its cases call live, and what other
    tools answer (:mod:`agents.tools.sandbox`). Refused (``invalid``) on an empty input, an
    unusable expectation or a malformed sandbox."""
    check_operator(user=user, organization_id=organization_id)
    try:
        sandbox = sandbox_spec(live_tools=live_tools or [], answers=tool_answers or {})
    except SandboxSpecError as exc:
        raise ServiceError(str(exc), field="live_tools" if "live" in str(exc) else "tool_answers") from None
    if not cases:
        raise ServiceError("an eval set needs at least one case", field="cases")
    for index, case in enumerate(cases):
        if not str(case.get("input", "")).strip():
            raise ServiceError(f"case {index + 1}: the input is empty", field="cases")
        errors = expectation_errors(case.get("expectation", "contains"), str(case.get("expected", "")))
        if errors:
            raise ServiceError(f"case {index + 1}: {errors[0]}", field="cases")
    eval_set = EvalSet.objects.create(
        organization_id=organization_id,
        name=name,
        description=description,
        live_tools=sandbox["live_tools"],
        tool_answers=tool_answers or {},
    )
    EvalCase.objects.bulk_create(
        EvalCase(
            eval_set=eval_set,
            position=i,
            input=case["input"],
            expectation=case.get("expectation", "contains"),
            expected=str(case.get("expected", "")),
        )
        for i, case in enumerate(cases)
    )
    return eval_set


@transaction.atomic
def eval_run_start(*, eval_set: EvalSet, agent: Agent, user: Any) -> EvalRun:
    """Run every case of ``eval_set`` on ``agent``, as an operator of their organisation.

    Each case is a run of the agent on its own engine (ReAct or DAG) with
    ``execution_path="eval"`` and ``hooks_bypassed=True``, keeping the sandboxed chain
    (:func:`agents.checks.sandbox_chain_of`): no tool call reaches the outside world unless the
    set calls a read-only tool live, and nothing asks a person. They start once committed.
    Refused: another organisation's set or agent (``not_found``), a set with no case or a live
    tool of this agent that does not only read (``invalid``), an archived agent (``conflict``,
    from ``run_start``), more cases than the operator's ``RUN_START_RATE`` has left
    (``throttled``; then no case is counted)."""
    check_operator(user=user, organization_id=agent.organization_id)
    if eval_set.organization_id != agent.organization_id:
        raise ServiceError("not found", code="not_found")
    cases = list(eval_set.cases.all())
    if not cases:
        raise ServiceError("this eval set has no case", field="eval_set")
    try:
        sandbox = eval_set.sandbox()
    except SandboxSpecError as exc:
        raise ServiceError(f"this eval set's sandbox is unusable: {exc}", field="eval_set") from None
    try:
        problems = live_tool_problems(tools_for_agent(agent), sandbox["live_tools"])
    except ToolboxError:
        problems = []  # each case's run fails with the reason, as any run of this agent would
    if problems:
        raise ServiceError("; ".join(problems), field="eval_set")
    archived = agent.archived_reason()
    if archived is not None:  # refused before anything is counted
        raise ServiceError(archived, code="conflict")
    # Each case is a run started for the operator: all counted against RUN_START_RATE, or none.
    run_starts_take(user=user, count=len(cases))
    eval_run = EvalRun.objects.create(
        organization_id=agent.organization_id,
        eval_set=eval_set,
        agent=agent,
        started_by=user,
        total=len(cases),
    )
    chain = sandbox_chain_of(agent, sandbox=sandbox)
    for case in cases:
        run = run_start(agent=agent, user=user, input=case.input, execution_path=ExecutionPath.EVAL)
        # Before the commit that hands the run to the executor: it never starts with hooks.
        Run.objects.filter(pk=run.pk).update(hooks_bypassed=True, hook_chain=chain)
        EvalResult.objects.create(
            eval_run=eval_run,
            case=case,
            position=case.position,
            input=case.input,
            expectation=case.expectation,
            expected=case.expected,
            run=run,
        )
    return eval_run


@transaction.atomic
def eval_result_record(*, run_id: int) -> EvalResult | None:
    """Grade the case whose run ended, and complete its eval run once every case is graded.
    Idempotent: a graded case is left as it is."""
    result = EvalResult.objects.select_for_update().filter(run_id=run_id).select_related("run").first()
    if result is None or result.outcome != Outcome.PENDING or not result.run.is_terminal:
        return result
    run = result.run
    if run.status == RunStatus.COMPLETED:
        passed, why = grade(result.expectation, result.expected, run.output)
        result.outcome = Outcome.PASSED if passed else Outcome.FAILED
        result.output, result.detail = run.output, why
    else:
        result.outcome, result.detail = Outcome.ERROR, f"the run {run.status}: {run.error}"
    result.save(update_fields=["outcome", "output", "detail"])
    eval_run = EvalRun.objects.select_for_update().get(pk=result.eval_run_id)
    counts = eval_run.results.aggregate(
        pending=Count("pk", filter=Q(outcome=Outcome.PENDING)),
        passed=Count("pk", filter=Q(outcome=Outcome.PASSED)),
    )
    eval_run.passed = counts["passed"]
    if counts["pending"] == 0 and eval_run.status != EvalStatus.COMPLETED:
        eval_run.status, eval_run.finished_at = EvalStatus.COMPLETED, timezone.now()
    eval_run.save(update_fields=["passed", "status", "finished_at"])
    return result
