"""OpenTelemetry (fimone/telemetry.py): off unless the standard environment asks; on, a span per
run drive, model call, tool call and approval request, the approval a child of the tool call that
asked and a resumed drive a child of the first, wherever the verdict and the resume happen; no
argument values unless an operator opts in, and never credentials."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor

from agents.models import RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from fimone import telemetry
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import pay_tool, set_policy
from tests.approvals.stage_kit import paying
from tests.personas import make_agent, make_hook, scripted

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_is_off_unless_the_environment_names_an_endpoint() -> None:
    assert telemetry.ENABLED is False, "the test settings name no OTLP endpoint"
    assert not telemetry.wanted({})
    assert telemetry.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert telemetry.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not telemetry.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})


def test_a_run_while_off_leaves_no_trace_in_its_checkpoint_or_requests(personas, resumes) -> None:
    set_policy(personas)
    run = run_start(agent=paying(personas, 100), user=personas.member, input="pay 100")
    assert Harness(pay_tool()).execute(run) == RunStatus.AWAITING_APPROVAL

    run.refresh_from_db()
    assert "trace" not in run.checkpoint
    assert ConfirmationRequest.objects.get(run=run).trace_context == ""


def test_a_run_is_a_span_with_its_model_calls_and_tool_calls_inside(personas, resumes, recorded) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "t_note", "arguments": {"text": "secret plans"}}]}, {"content": "done"}
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="note it")

    assert Harness(RecordingTool("t_note", result="noted")).execute(run) == RunStatus.COMPLETED

    [drive] = recorded.spans("fim.run")
    assert drive.attributes["fim.run.id"] == run.pk and drive.attributes["fim.run.status"] == "completed"
    llm_calls, [tool] = recorded.spans("fim.llm"), recorded.spans("fim.tool")
    assert len(llm_calls) == 2
    for child in [*llm_calls, tool]:
        assert child.parent.span_id == drive.context.span_id
    assert tool.attributes["fim.tool"] == "t_note" and tool.attributes["fim.tool.outcome"] == "succeeded"
    assert "fim.tool.arguments" not in tool.attributes, "argument values only when an operator opts in"
    assert "secret plans" not in repr([dict(s.attributes) for s in recorded.spans()])
    [point] = recorded.metric_points("fim.tool.duration")
    assert point.count == 1 and dict(point.attributes) == {
        "fim.tool": "t_note",
        "fim.tool.status": "succeeded",
    }


def test_an_operator_may_opt_in_to_arguments_but_credentials_stay_out(
    personas, resumes, recorded, settings
) -> None:
    settings.TELEMETRY_TOOL_ARGUMENTS = True
    arguments = {"url": "https://bob:hunter2@example.com/x", "text": "the plan"}
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "t_note", "arguments": arguments}]}, {"content": "ok"}
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="note it")

    Harness(RecordingTool("t_note")).execute(run)

    [tool] = recorded.spans("fim.tool")
    shown = tool.attributes["fim.tool.arguments"]
    assert "the plan" in shown and "hunter2" not in shown


def test_an_approval_is_the_asking_calls_child_and_the_resumed_drive_continues_the_first(
    personas, resumes, recorded
) -> None:
    set_policy(personas)
    harness = Harness(pay_tool())
    run = run_start(agent=paying(personas, 100), user=personas.member, input="pay 100")
    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL
    request = ConfirmationRequest.objects.get(run=run)
    [first_drive] = recorded.spans("fim.run")
    [asking_call] = recorded.spans("fim.tool")
    assert asking_call.attributes["fim.tool.outcome"] == "waiting"
    assert request.trace_context.split("-")[2] == format(asking_call.context.span_id, "016x")

    outcome = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert outcome.accepted
    assert harness.resume(run) == RunStatus.COMPLETED

    [approval] = recorded.spans("fim.approval")
    assert approval.parent.span_id == asking_call.context.span_id
    assert approval.context.trace_id == first_drive.context.trace_id
    assert approval.attributes["fim.approval.status"] == ConfirmationStatus.APPROVED
    assert approval.attributes["fim.approval.decided_by"] == personas.approver.pk
    resumed = [s for s in recorded.spans("fim.run") if s.attributes["fim.run.resumed"]]
    assert len(resumed) == 1 and resumed[0].parent.span_id == first_drive.context.span_id
    [point] = recorded.metric_points("fim.approval.time_to_decision")
    assert point.count == 1 and dict(point.attributes) == {"fim.approval.status": "approved"}


def test_a_rejection_is_an_approval_span_marked_as_an_error(personas, resumes, recorded) -> None:
    set_policy(personas)
    harness = Harness(pay_tool())
    run = run_start(agent=paying(personas, 100), user=personas.member, input="pay 100")
    harness.execute(run)
    request = ConfirmationRequest.objects.get(run=run)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="no")

    harness.resume(run)

    [approval] = recorded.spans("fim.approval")
    assert approval.attributes["fim.approval.status"] == "rejected"
    assert not approval.status.is_ok


def test_each_hook_is_a_span_of_the_call_with_its_decision_and_a_count(personas, resumes, recorded) -> None:
    hooks = [
        {"name": "deny_tools", "params": {"tools": "t_other"}},  # does not apply to this call
        {"name": "deny_tools", "params": {"tools": "t_note"}},
    ]
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "t_note", "arguments": {}}]}, {"content": "blocked"}, hooks=hooks
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="note it")
    tool = RecordingTool("t_note")

    assert Harness(tool).execute(run) == RunStatus.COMPLETED

    assert tool.calls == []
    [call] = recorded.spans("fim.tool")
    assert call.attributes["fim.tool.outcome"] == "blocked"
    hooks_seen = [s for s in recorded.spans("fim.hook") if s.attributes["fim.hook"] == "deny_tools"]
    decided = {s.attributes["fim.hook.decision"]: s.attributes["fim.hook.triggered"] for s in hooks_seen}
    assert decided == {"skipped": False, "block": True}
    for span in hooks_seen:
        assert span.parent.span_id == call.context.span_id
        assert span.attributes["fim.hook.point"] == "PreToolUse"
        assert span.end_time >= span.start_time >= call.start_time
    blocked = [
        p
        for p in recorded.metric_points("fim.hook.decisions")
        if p.attributes["fim.hook.decision"] == "block"
    ]
    assert [(p.attributes["fim.hook"], p.value) for p in blocked] == [("deny_tools", 1)]


def test_a_shadow_hooks_span_says_what_it_would_have_done_and_the_call_went_on(
    personas, resumes, recorded
) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "t_note", "arguments": {}}]}, {"content": "done"}
        ),
    )
    make_hook(agent, "deny_tools", params={"tools": "t_note"}, mode="shadow")
    run = run_start(agent=agent, user=personas.member, input="note it")
    tool = RecordingTool("t_note")

    assert Harness(tool).execute(run) == RunStatus.COMPLETED

    assert tool.calls == [{}]
    [call] = recorded.spans("fim.tool")
    assert call.attributes["fim.tool.outcome"] == "succeeded"
    [hook] = [s for s in recorded.spans("fim.hook") if s.attributes["fim.hook"] == "deny_tools"]
    assert hook.attributes["fim.hook.decision"] == "shadow_block"


class Exploding(SpanProcessor):
    """A span processor whose exporter fails on every span it is handed."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("collector down")

    def on_end(self, span: Any) -> None:
        raise RuntimeError("collector down")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def test_telemetry_that_fails_never_changes_a_call_or_a_run(personas, resumes) -> None:
    """Observability is not a safety check: its faults neither block (fail closed) nor crash."""
    hooks = [{"name": "deny_tools", "params": {"tools": "t_other"}}]
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "t_note", "arguments": {}}]}, {"content": "ok"}, hooks=hooks
        ),
    )
    tool = RecordingTool("t_note")
    telemetry.install(Exploding(), InMemoryMetricReader())
    try:
        run = run_start(agent=agent, user=personas.member, input="note it")
        assert Harness(tool).execute(run) == RunStatus.COMPLETED
    finally:
        telemetry.uninstall()

    assert tool.calls == [{}]
