"""The DAG engine: a plan, steps as child runs behind the same hooks, a synthesis."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agents import events as ev
from agents.engine.dag import PlanError, plan_parse
from agents.models import Agent, ExecutionPath, Run, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from portal.transcript import run_transcript
from tests.agents.engine_kit import Harness, RecordingTool, event_types, events_of
from tests.approvals.kit import set_policy
from tests.personas import make_agent

# Verdicts act after commit (they resume runs): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)


def plan(*steps: tuple[str, str, list[str]]) -> str:
    return json.dumps({"steps": [{"id": i, "task": t, "depends_on": d} for i, t, d in steps]})


TWO_AND_COMBINE = plan(
    ("a", "fetch alpha", []), ("b", "fetch beta", []), ("c", "combine the figures", ["a", "b"])
)


def step_rules(**extra_rules: Any) -> list[dict[str, Any]]:
    """Rules of the scripted model: planner, synthesis, then one rule per step task."""
    return [
        {"match": "^Synthesise", "turns": [{"content": "All figures are in."}]},
        {"match": "combine", "turns": [{"content": "combined"}]},
        {
            "match": "fetch alpha",
            "turns": [{"tool_calls": [{"name": "alpha", "arguments": {}}]}, {"content": "alpha is {last}"}],
        },
        {
            "match": "fetch beta",
            "turns": [{"tool_calls": [{"name": "beta", "arguments": {}}]}, {"content": "beta is {last}"}],
        },
    ]


def dag_agent(personas, *plans: str, rules: list[dict[str, Any]] | None = None, **fields) -> Agent:
    """A DAG agent whose planner answers ``plans[0]``, and ``plans[1]`` when asked to re-plan."""
    planner = [{"match": "^Plan this task", "turns": [{"content": plans[0]}]}]
    if len(plans) > 1:
        planner.insert(0, {"match": "^The plan was rejected", "turns": [{"content": plans[1]}]})
    config = {"provider": "scripted", "script": {"rules": planner + (rules or step_rules())}}
    return make_agent(personas.org, personas.operator, engine="dag", model_config_json=config, **fields)


class SlowTool(RecordingTool):
    """Takes a moment, so that concurrent steps overlap."""

    async def run(self, args: dict[str, Any]) -> Any:
        await asyncio.sleep(0.3)
        return await super().run(args)


def start(personas, agent: Agent, text: str = "report alpha and beta") -> Run:
    return run_start(agent=agent, user=personas.member, input=text)


def children(run: Run) -> dict[str, Run]:
    return {child.parent_call_id.removeprefix("step:"): child for child in run.children.order_by("pk")}


def interval(run: Run) -> tuple[Any, Any]:
    stamps = {e.type: e.created_at for e in run.events.all()}
    return stamps[ev.RUN_STARTED], stamps[ev.RUN_COMPLETED]


def test_independent_steps_run_at_the_same_time_as_child_runs_and_feed_the_step_after_them(
    personas, resumes
) -> None:
    alpha, beta = SlowTool("alpha", result=1), SlowTool("beta", result=2)
    harness = Harness(alpha, beta)
    run = start(personas, dag_agent(personas, TWO_AND_COMBINE))

    assert harness.execute(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert run.output == "All figures are in."
    steps = children(run)
    assert set(steps) == {"a", "b", "c"}
    for child in steps.values():
        assert child.status == RunStatus.COMPLETED and child.execution_path == ExecutionPath.DAG
        assert child.agent_id == run.agent_id and child.hook_chain == run.hook_chain
    (a_start, a_end), (b_start, b_end) = interval(steps["a"]), interval(steps["b"])
    assert a_start < b_end and b_start < a_end, "the independent steps overlap in time"
    assert interval(steps["c"])[0] >= max(a_end, b_end), "the dependent step starts after both"
    assert "alpha is 1" in steps["c"].input and "beta is 2" in steps["c"].input
    assert alpha.calls == [{}] and beta.calls == [{}]
    synthesis = harness.llm_requests[-1][-1]["content"]
    assert synthesis.startswith("Synthesise") and "[c] combine the figures: combined" in synthesis
    types = event_types(run)
    assert types[0] == ev.RUN_STARTED and types[-1] == ev.RUN_COMPLETED
    assert types.count(ev.DAG_STEP_STARTED) == 3 and ev.DAG_PLANNED in types


def test_every_tool_call_of_a_step_goes_through_the_agents_hooks(personas, resumes) -> None:
    alpha, beta = RecordingTool("alpha", result=1), RecordingTool("beta", result=2)
    hooks = [{"name": "deny_tools", "params": {"tools": ["beta"], "message": "beta is off limits"}}]
    agent = dag_agent(personas, TWO_AND_COMBINE)
    agent.model_config_json["hooks"] = {"class_hooks": hooks}
    agent.save()
    run = start(personas, agent)

    assert Harness(alpha, beta).execute(run) == RunStatus.COMPLETED

    assert beta.calls == [] and alpha.calls == [{}]
    [blocked] = events_of(children(run)["b"], ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools"
    assert "beta is beta is off limits" in children(run)["c"].input


def test_a_bad_plan_is_replanned_once(personas, resumes) -> None:
    cyclic = plan(("a", "fetch alpha", ["b"]), ("b", "fetch beta", ["a"]))
    alpha, beta = RecordingTool("alpha", result=1), RecordingTool("beta", result=2)
    harness = Harness(alpha, beta)
    run = start(personas, dag_agent(personas, cyclic, plan(("a", "fetch alpha", []))))

    assert harness.execute(run) == RunStatus.COMPLETED

    [rejected] = events_of(run, ev.DAG_PLAN_REJECTED)
    assert "cycle" in rejected["error"] and rejected["attempt"] == 1
    replan = harness.llm_requests[1][-1]["content"]
    assert replan.startswith("The plan was rejected") and "cycle" in replan
    assert set(children(run)) == {"a"} and beta.calls == []


@pytest.mark.parametrize(
    ("first", "second", "reason"),
    [
        ("no plan today", plan(("a", "x", ["zz"])), "unknown steps: zz"),
        (plan(("a", "x", ["b"]), ("b", "y", ["a"])), "{}", 'non-empty "steps"'),
        (
            plan(*[(str(n), "x", []) for n in range(9)]),
            plan(*[(str(n), "x", []) for n in range(9)]),
            "at most 8",
        ),
    ],
    ids=["not-json-then-unknown-id", "cycle-then-empty", "too-many-steps-twice"],
)
def test_a_plan_still_bad_after_one_replan_fails_the_run_clearly_before_any_step(
    personas, resumes, first, second, reason
) -> None:
    alpha = RecordingTool("alpha")
    harness = Harness(alpha)
    run = start(personas, dag_agent(personas, first, second))

    assert harness.execute(run) == RunStatus.FAILED

    run.refresh_from_db()
    assert run.error.startswith("the planner gave no usable plan after one re-plan") and reason in run.error
    assert [e["attempt"] for e in events_of(run, ev.DAG_PLAN_REJECTED)] == [1, 2]
    assert events_of(run, ev.RUN_FAILED)[-1]["stage"] == "plan"
    assert len(harness.llm_requests) == 2 and not run.children.exists() and alpha.calls == []


def test_a_chain_that_cannot_be_built_fails_the_dag_run_before_it_plans(personas, resumes) -> None:
    agent = dag_agent(personas, TWO_AND_COMBINE)
    agent.model_config_json["hooks"] = {"class_hooks": ["no_such_hook"]}
    agent.save()  # behind validation's back
    harness = Harness(RecordingTool("alpha"), RecordingTool("beta"))
    run = start(personas, agent)

    assert harness.execute(run) == RunStatus.FAILED

    run.refresh_from_db()
    assert "hooks cannot be built" in run.error and harness.llm_requests == []
    assert not run.children.exists()


def test_a_step_waiting_for_approval_lets_the_others_go_on_and_the_run_resumes_without_rerunning_them(
    personas, resumes
) -> None:
    set_policy(personas)
    alpha = SlowTool("alpha", result=1, requires_confirmation=True)  # paying, say: a human decides
    beta = RecordingTool("beta", result=2)
    harness = Harness(alpha, beta)
    run = start(personas, dag_agent(personas, TWO_AND_COMBINE))

    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL

    steps = children(run)
    assert steps["a"].status == RunStatus.AWAITING_APPROVAL
    assert steps["b"].status == RunStatus.COMPLETED, "the other ready step went on"
    assert "c" not in steps and alpha.calls == [] and beta.calls == [{}]
    [suspended] = events_of(run, ev.RUN_SUSPENDED)
    assert suspended["detail"]["run_ids"] == [steps["a"].pk]

    request = ConfirmationRequest.objects.get(run=steps["a"])
    [relayed] = events_of(run, ev.APPROVAL_PENDING)
    assert relayed["request_id"] == str(request.pk) and relayed["child_run_id"] == steps["a"].pk
    assert run_transcript(run=run, user=personas.approver)["decidable"] == [str(request.pk)], (
        "the DAG run's page offers the step's approval"
    )
    assert harness.resume(run) == RunStatus.AWAITING_APPROVAL  # woken early: parks again
    assert len(events_of(run, ev.APPROVAL_PENDING)) == 1, "relayed once"
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert resumes.run_ids == [steps["a"].pk], "the verdict resumes the step's run"
    assert harness.resume(steps["a"]) == RunStatus.COMPLETED
    assert resumes.run_ids == [steps["a"].pk, run.pk], "the step's ending wakes the DAG run"

    assert Harness(alpha, beta).resume(run) == RunStatus.COMPLETED  # a fresh engine, as after a restart

    run.refresh_from_db()
    assert run.output == "All figures are in."
    assert alpha.calls == [{}] and beta.calls == [{}], "no finished step ran again"
    assert run.children.count() == 3
    assert ev.RUN_RESUMED in event_types(run)


def test_a_dag_run_resumed_before_its_waiting_step_ended_parks_again(personas, resumes) -> None:
    set_policy(personas)
    alpha = RecordingTool("alpha", requires_confirmation=True)
    harness = Harness(alpha, RecordingTool("beta"))
    run = start(personas, dag_agent(personas, TWO_AND_COMBINE))
    harness.execute(run)

    Run.objects.filter(pk=run.pk).update()  # nothing decided
    assert harness.resume(run) == RunStatus.AWAITING_APPROVAL
    assert alpha.calls == [] and run.children.count() == 2


def test_a_failed_step_fails_the_run_with_its_reason(personas, resumes) -> None:
    rules = step_rules()
    rules[2]["turns"] = [{"tool_calls": [{"name": "alpha", "arguments": {}}]}] * 20
    agent = dag_agent(personas, TWO_AND_COMBINE, rules=rules, max_iterations=2)
    harness = Harness(RecordingTool("alpha"), RecordingTool("beta"))
    run = start(personas, agent)

    assert harness.execute(run) == RunStatus.FAILED

    run.refresh_from_db()
    assert run.error.startswith("step 'a' failed: the agent did not finish within 2 steps")
    assert events_of(run, ev.RUN_FAILED)[-1]["stage"] == "steps"
    assert "c" not in children(run)


def test_plan_parse_orders_steps_by_their_dependencies() -> None:
    steps = plan_parse(plan(("c", "z", ["a", "b"]), ("a", "x", []), ("b", "y", ["a"])), max_steps=5)
    assert [s["id"] for s in steps] == ["a", "b", "c"]
    with pytest.raises(PlanError, match="same id"):
        plan_parse(plan(("a", "x", []), ("a", "y", [])), max_steps=5)


def test_cancelling_a_parked_dag_run_cancels_its_waiting_step_and_withdraws_its_request(
    personas, resumes
) -> None:
    from agents.services import run_cancel

    set_policy(personas)
    alpha = RecordingTool("alpha", requires_confirmation=True)
    harness = Harness(alpha, RecordingTool("beta"))
    run = start(personas, dag_agent(personas, TWO_AND_COMBINE))
    harness.execute(run)

    run_cancel(run=run, user=personas.member)

    step = children(run)["a"]
    assert step.status == RunStatus.CANCELLED
    assert ConfirmationRequest.objects.get(run=step).status == "cancelled"
    assert harness.resume(step) is None and alpha.calls == []
    assert resumes.run_ids == [], "a cancelled parent is not woken"


def test_steps_start_from_their_own_input_and_the_next_turn_follows_the_dag_runs_answer(
    personas, resumes
) -> None:
    harness = Harness(RecordingTool("alpha", result=1), RecordingTool("beta", result=2))
    agent = dag_agent(personas, TWO_AND_COMBINE)
    run = start(personas, agent)
    harness.execute(run)

    combine = next(m for m in harness.llm_requests if "combine the figures" in m[-1]["content"])
    assert [m["role"] for m in combine] == ["system", "user"], "a step sees no other step's messages"

    follow_up = run_start(
        agent=agent, user=personas.member, input="and gamma?", conversation=run.conversation
    )
    harness.llm_requests.clear()
    harness.execute(follow_up)

    planner = harness.llm_requests[0]
    assert [m["content"] for m in planner[1:3]] == ["report alpha and beta", "All figures are in."]


def test_a_dag_run_taken_over_after_its_worker_died_finishes_the_step_that_worker_left_running(
    personas, resumes
) -> None:
    import datetime as dt

    from django.utils import timezone

    from agents.engine.runner import run_execute

    set_policy(personas)
    alpha = RecordingTool("alpha", result=1, requires_confirmation=True)
    harness = Harness(alpha, RecordingTool("beta", result=2))
    run = start(personas, dag_agent(personas, TWO_AND_COMBINE))
    harness.execute(run)
    step = children(run)["a"]
    request = ConfirmationRequest.objects.get(run=step)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    # The worker that took both runs up after the verdict died before it got anywhere.
    expired = timezone.now() - dt.timedelta(seconds=5)
    Run.objects.filter(pk__in=[run.pk, step.pk]).update(
        status=RunStatus.RUNNING, lease_owner="dead-worker", lease_expires_at=expired
    )

    from asgiref.sync import async_to_sync

    assert async_to_sync(run_execute)(run.pk, **harness.options()) == RunStatus.COMPLETED

    step.refresh_from_db()
    assert step.status == RunStatus.COMPLETED and alpha.calls == [{}]
    assert children(run)["c"].status == RunStatus.COMPLETED


def test_the_planner_learns_the_tools_and_the_agents_its_steps_may_call(personas, resumes) -> None:
    agent = dag_agent(personas, TWO_AND_COMBINE)
    agent.delegates.set([make_agent(personas.org, personas.operator, name="Ledger clerk")])
    harness = Harness(RecordingTool("alpha"), RecordingTool("beta"))

    harness.execute(start(personas, agent))

    system = harness.llm_requests[0][0]["content"]
    assert "alpha, beta, call_agent (agents: Ledger clerk)" in system
