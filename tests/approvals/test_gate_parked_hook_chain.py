"""A parked run keeps the hook chain it started with (#9 item 15): whatever the operator changes
meanwhile, and whatever the hooks say on resume, the call waits for the human's verdict."""

from __future__ import annotations

from typing import ClassVar

import pytest

from agents import events as ev
from agents.models import RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from hooks import HookContext, HookResult, PreToolUseHook
from hooks.catalog import register_hook
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import PAY_ARGS, PAY_SCHEMA, pay_tool, paying_agent, set_policy, suspended_run
from tests.personas import make_agent, scripted

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)


SET_AMOUNT = {"name": "set_arguments", "params": {"tools": "oa__purchase_pay", "values": {"amount": 1}}}
DENY_PAY = {"name": "deny_tools", "params": {"tools": "oa__purchase_pay", "message": "Payments are frozen."}}
DENY_OTHER = {"name": "deny_tools", "params": {"tools": "oa__other", "message": "Other is frozen."}}


def two_step_agent(personas, hooks):
    """Pays (behind the gate), then calls ``oa__other``, then answers."""
    from tests.personas import make_agent, scripted

    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": dict(PAY_ARGS)}]},
        {"tool_calls": [{"name": "oa__other", "arguments": {}}]},
        {"content": "Outcome: {last}"},
        hooks=hooks,
    )
    return make_agent(personas.org, personas.operator, model_config_json=config)


def edit_hooks(agent, hooks) -> None:
    """What an operator does in admin meanwhile: the agent's declaration changes, validly."""
    agent.model_config_json = {**agent.model_config_json, "hooks": {"class_hooks": hooks}}
    agent.full_clean()
    agent.save()


@pytest.mark.parametrize(
    ("before", "after"),
    [([], [SET_AMOUNT]), ([DENY_OTHER], []), ([], [DENY_PAY])],
    ids=["operator-adds-set-arguments", "operator-removes-a-deny-hook", "operator-adds-a-deny-hook"],
)
def test_a_parked_run_resumes_with_the_chain_it_started_with_whatever_the_operator_changed(
    personas, resumes, before, after
) -> None:
    from tests.agents.engine_kit import RecordingTool

    set_policy(personas)
    pay, other = pay_tool(), RecordingTool("oa__other", result="other done")
    harness = Harness(pay, other)
    agent = two_step_agent(personas, before)
    run, request = suspended_run(personas, harness, agent)

    edit_hooks(agent, after)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(run) == RunStatus.COMPLETED

    assert pay.calls == [PAY_ARGS], "exactly the approved call ran"
    [started] = [e for e in events_of(run, ev.TOOL_STARTED) if e["tool"] == "oa__purchase_pay"]
    assert started["args_sha256"] == request.args_sha256
    run.refresh_from_db()
    if before == [DENY_OTHER]:
        assert other.calls == [] and run.output == "Outcome: Other is frozen.", "the original deny holds"
    else:
        assert other.calls == [{}] and run.output == "Outcome: other done"
    assert [
        {k: item[k] for k in ("name", "params", "priority", "timeout", "on_error")}
        for item in run.hook_chain["declared"]
    ] == [{**h, "priority": 10, "timeout": 5.0, "on_error": "block"} for h in before]
    assert "confirmation_gate" in run.hook_chain["system"]


def test_a_rejection_reaches_the_llm_even_after_the_operator_added_set_arguments(personas, resumes) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying_agent(personas)
    run, request = suspended_run(personas, harness, agent)

    edit_hooks(agent, [SET_AMOUNT])
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="over budget")
    harness.resume(run)

    run.refresh_from_db()
    assert tool.calls == []
    assert (
        run.output == "Outcome: Rejected by april: over budget. The call was not executed. Do not retry it."
    )


class FlipAmount(PreToolUseHook):
    """A hook that answers differently on each pass (an operator's clock- or state-based rule)."""

    name = "test_flip_amount"
    passes = 0

    async def execute(self, ctx: HookContext) -> HookResult:
        type(self).passes += 1
        return HookResult(modified_args={**ctx.tool_args, "amount": type(self).passes})


register_hook(FlipAmount)


@pytest.mark.parametrize(
    ("approve", "expected"),
    [
        (False, "Outcome: Rejected by april: no. The call was not executed. Do not retry it."),
        (True, "Outcome: Refused: the arguments changed after approval was requested."),
    ],
    ids=["rejected-is-told-as-rejected", "approved-with-other-arguments-is-refused"],
)
def test_the_gate_reports_the_verdict_before_any_argument_check(personas, resumes, approve, expected) -> None:
    FlipAmount.passes = 0
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(personas, harness, paying_agent(personas, hooks=["test_flip_amount"]))

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=approve, reason="no")
    harness.resume(run)

    run.refresh_from_db()
    assert tool.calls == [] and run.output.startswith(expected)


def test_turning_off_confirm_everything_meanwhile_does_not_ungate_a_parked_call(personas, resumes) -> None:
    set_policy(personas)
    tool = pay_tool()
    tool.spec = type(tool.spec)(name=tool.spec.name, description="", parameters=tool.spec.parameters)
    harness = Harness(tool)
    agent = paying_agent(personas, require_confirmation_for_all=True)
    run, request = suspended_run(personas, harness, agent)

    agent.require_confirmation_for_all = False
    agent.save()
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="no")
    harness.resume(run)

    run.refresh_from_db()
    assert tool.calls == [] and run.output.startswith("Outcome: Rejected by april: no.")


@register_hook
class AsksOnlyTheFirstTime(PreToolUseHook):
    """A hook that is not deterministic (a command hook answering "ask" once, then "allow")."""

    name = "test_asks_only_the_first_time"
    asked: ClassVar[list[str]] = []

    async def execute(self, ctx: HookContext) -> HookResult:
        key = f"{ctx.metadata['run_id']}:{ctx.metadata['tool_call_id']}"
        first = key not in self.asked
        self.asked.append(key)
        return HookResult(require_confirmation=first, confirmation_reason="first sight")


@pytest.mark.parametrize("approve", [False, True], ids=["rejected", "approved"])
def test_a_call_once_sent_to_a_human_waits_for_that_verdict_whatever_the_hooks_say_on_resume(
    personas, resumes, approve: bool
) -> None:
    set_policy(personas)
    tool = RecordingTool("oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA)
    harness = Harness(tool)
    args = {"purchase_id": "PO-2002", "amount": 10}
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": args}]},
        {"content": "Outcome: {last}"},
        hooks=["test_asks_only_the_first_time"],
    )
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    run = run_start(agent=agent, user=personas.member, input="pay PO-2002")
    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL
    request = ConfirmationRequest.objects.get(run=run)

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=approve, reason="no")
    assert harness.resume(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    if approve:
        assert tool.calls == [args]
    else:
        assert tool.calls == [] and run.output.startswith("Outcome: Rejected by april: no.")
