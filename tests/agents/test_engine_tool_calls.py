"""A run's tool calls in the ReAct engine: the hooks around each call, what the tool receives, what
the LLM reads and what the run records; a chain or a call that cannot go ahead fails closed."""

from __future__ import annotations

from typing import Any

import pytest

from agents import events as ev
from agents.models import RunStatus, ToolExecution
from tests.agents.engine_kit import Harness, RecordingTool, event_types, events_of
from tests.agents.run_kit import PAY_SCHEMA, pay_agent, start


def test_a_tool_call_runs_and_its_observation_reaches_the_llm(personas, no_dispatch) -> None:
    pay = RecordingTool("oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA)
    harness = Harness(pay)
    run = start(personas, pay_agent(personas))

    assert harness.execute(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 5000}]
    assert run.output == 'Result: {"status": "paid"}'
    assert event_types(run) == [
        ev.RUN_STARTED,
        ev.LLM_MESSAGE,
        ev.TOOL_PROPOSED,
        ev.TOOL_STARTED,
        ev.TOOL_FINISHED,
        ev.LLM_MESSAGE,
        ev.RUN_COMPLETED,
    ]
    execution = ToolExecution.objects.get(run=run)
    assert execution.status == ToolExecution.Status.SUCCEEDED and execution.result == {"status": "paid"}
    tool_message = harness.llm_requests[1][-1]
    assert tool_message["role"] == "tool" and "paid" in tool_message["content"]


def test_a_stream_that_hangs_or_fails_does_not_hold_or_break_the_run(
    personas, no_dispatch, monkeypatch
) -> None:
    import asyncio
    import time

    class StuckLayer:
        """A channel layer whose first send never returns and whose next ones fail."""

        def __init__(self) -> None:
            self.sends = 0

        async def group_send(self, group: str, message: dict) -> None:
            self.sends += 1
            if self.sends == 1:
                await asyncio.sleep(3600)
            raise ConnectionError("the stream is down")

    layer = StuckLayer()
    monkeypatch.setattr("agents.engine.journal.get_channel_layer", lambda: layer)
    monkeypatch.setattr("agents.engine.journal.STREAM_FLUSH_SECONDS", 0.2)
    pay = RecordingTool("oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas))

    started = time.monotonic()
    assert Harness(pay).execute(run) == RunStatus.COMPLETED

    assert time.monotonic() - started < 5, "the run does not wait on a stuck stream"
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 5000}]
    assert event_types(run)[-1] == ev.RUN_COMPLETED  # the stored events are the record


def test_a_blocking_hook_stops_the_call_and_the_llm_reads_its_error(personas, no_dispatch) -> None:
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    hooks = [{"name": "deny_tools", "params": {"tools": ["oa__*_pay"], "message": "Payments are frozen."}}]
    run = start(personas, pay_agent(personas, hooks=hooks))

    assert Harness(pay).execute(run) == RunStatus.COMPLETED

    assert pay.calls == []
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools" and blocked["error"] == "Payments are frozen."
    run.refresh_from_db()
    assert run.output == "Result: Payments are frozen."
    assert not ToolExecution.objects.filter(run=run).exists()


def test_an_argument_rewriting_hook_changes_what_the_tool_receives(personas, no_dispatch) -> None:
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    hooks = [{"name": "set_arguments", "params": {"tools": "oa__purchase_pay", "values": {"amount": 1000}}}]
    run = start(personas, pay_agent(personas, hooks=hooks))

    Harness(pay).execute(run)

    assert pay.calls == [{"purchase_id": "PO-1", "amount": 1000}]
    [proposed] = events_of(run, ev.TOOL_PROPOSED)
    [started] = events_of(run, ev.TOOL_STARTED)
    assert proposed["arguments"]["amount"] == 5000 and started["arguments"]["amount"] == 1000
    [effect] = events_of(run, ev.HOOK_SIDE_EFFECT)
    assert effect["hook"] == "set_arguments" and effect["point"] == "PreToolUse"


def test_a_result_rewriting_hook_changes_what_the_llm_reads(personas, no_dispatch) -> None:
    pay = RecordingTool("oa__purchase_pay", result={"card": "6222-0000-1111-2222"}, parameters=PAY_SCHEMA)
    hooks = [{"name": "redact_result", "params": {"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]}}]
    run = start(personas, pay_agent(personas, hooks=hooks))
    harness = Harness(pay)

    harness.execute(run)

    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert "6222" not in finished["observation"] and "[redacted]" in finished["observation"]
    assert "6222" not in harness.llm_requests[1][-1]["content"]
    assert ToolExecution.objects.get(run=run).result == {"card": "6222-0000-1111-2222"}, (
        "the raw result is audited"
    )


def test_result_truncate_cuts_what_the_llm_reads_and_the_execution_keeps_the_whole_result(
    personas, no_dispatch
) -> None:
    def rows() -> dict[str, Any]:
        return {"rows": [{"id": i, "memo": "m" * 90} for i in range(100)]}  # about 10,000 characters

    pay = RecordingTool("oa__purchase_pay", result=rows(), parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas, hooks=["result_truncate"]))
    harness = Harness(pay)

    harness.execute(run)

    [finished] = events_of(run, ev.TOOL_FINISHED)
    read = harness.llm_requests[1][-1]["content"]
    assert read == finished["observation"] and len(read) < 8_200
    kept, marker = read.split("\n", 1)
    assert len(kept) == 8_000 and "characters removed; the full result is kept" in marker
    assert ToolExecution.objects.get(run=run).result == rows()


@pytest.mark.parametrize(
    "hooks",
    [["no_such_hook"], [{"name": "deny_tools", "params": {"colour": "red"}}], "not a list"],
    ids=["unknown-name", "bad-params", "bad-shape"],
)
def test_a_registry_that_cannot_be_built_fails_the_run_before_any_llm_or_tool_call(
    personas, no_dispatch, hooks
) -> None:
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    agent = pay_agent(personas)
    agent.model_config_json["hooks"] = {"class_hooks": hooks}
    agent.save()  # saved behind validation's back, as a raw database edit would
    harness = Harness(pay)
    run = start(personas, agent)

    assert harness.execute(run) == RunStatus.FAILED

    run.refresh_from_db()
    assert "hooks cannot be built" in run.error
    assert harness.llm_requests == [] and pay.calls == []
    [failed] = events_of(run, ev.RUN_FAILED)
    assert failed["stage"] == "hooks"


def test_a_hook_module_that_fails_to_import_fails_the_run_closed(personas, no_dispatch, settings) -> None:
    settings.HOOK_MODULES = ["tests.agents.no_such_module"]
    harness = Harness(RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA))
    run = start(personas, pay_agent(personas))

    assert harness.execute(run) == RunStatus.FAILED
    run.refresh_from_db()
    assert "tests.agents.no_such_module" in run.error and harness.llm_requests == []


def test_session_start_context_reaches_the_system_prompt(personas, no_dispatch) -> None:
    hooks = [{"name": "static_context", "params": {"text": "Fiscal year starts in April."}}]
    agent = pay_agent(personas, {"content": "ok"}, hooks=hooks, instructions="You help with purchases.")
    harness = Harness()
    run = start(personas, agent)

    harness.execute(run)

    system = harness.llm_requests[0][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You help with purchases.\n\nFiscal year starts in April.")
    assert "do not retry" in system["content"]
    run.refresh_from_db()
    assert run.checkpoint["session_context"] == ["Fiscal year starts in April."]


def test_invalid_arguments_go_back_to_the_llm_without_running_hooks_or_the_tool(
    personas, no_dispatch
) -> None:
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": {"purchase_id": 7}}]},
        {"content": "{last}"},
    )
    run = start(personas, agent)

    Harness(pay).execute(run)

    run.refresh_from_db()
    assert pay.calls == []
    assert run.output.startswith("Invalid arguments for oa__purchase_pay:")
    assert "'amount' is a required property" in run.output and "7 is not of type 'string'" in run.output


def test_an_unknown_tool_is_an_observation_not_a_crash(personas, no_dispatch) -> None:
    agent = pay_agent(personas, {"tool_calls": [{"name": "rm_rf", "arguments": {}}]}, {"content": "{last}"})
    run = start(personas, agent)
    assert Harness().execute(run) == RunStatus.COMPLETED
    run.refresh_from_db()
    assert run.output.startswith("Unknown tool 'rm_rf'")


def test_several_tool_calls_of_one_turn_all_run(personas, no_dispatch) -> None:
    a, b = RecordingTool("t_a", result="A"), RecordingTool("t_b", result="B")
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "t_a", "arguments": {}}, {"name": "t_b", "arguments": {}}]},
        {"content": "done"},
    )
    harness = Harness(a, b)
    harness.execute(start(personas, agent))
    assert len(a.calls) == len(b.calls) == 1
    tool_messages = [m for m in harness.llm_requests[1] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["A", "B"]


def test_a_run_that_never_answers_stops_at_the_iteration_bound(personas, no_dispatch) -> None:
    loop_turns = [{"tool_calls": [{"name": "t_a", "arguments": {}}]}] * 10
    agent = pay_agent(personas, *loop_turns, max_iterations=3)
    run = start(personas, agent)
    assert Harness(RecordingTool("t_a")).execute(run) == RunStatus.FAILED
    run.refresh_from_db()
    assert "within 3 steps" in run.error
