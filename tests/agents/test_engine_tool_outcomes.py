"""What the ReAct engine does with a tool's outcome after the tool returned: results that cannot be
stored as they are, and faults in the PostToolUse chain, the record or the database; the run goes on."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.models import Run, RunStatus, ToolExecution
from hooks import HookContext, HookResult, PostToolUseHook
from hooks.catalog import register_hook
from tests.agents.engine_kit import Harness, RecordingTool, event_types, events_of
from tests.agents.run_kit import PAY_SCHEMA, pay_agent, start

# --- a tool result that cannot be serialised as it is (#9 item 10) ---------------------------------


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _cycle() -> dict:
    value: dict = {"name": "loop"}
    value["self"] = value
    return value


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


HOSTILE_RESULTS = {
    "huge-integer": lambda: {"value": 10**5000},
    "nul-in-a-string": lambda: {"note": "paid\x00; DROP TABLE"},
    "nul-in-a-key": lambda: {"k\x00": 1},
    "lone-surrogate": lambda: "half an emoji: \ud83d",
    "nan": lambda: float("nan"),
    "infinity": lambda: {"balance": float("inf"), "debt": float("-inf")},
    "deep-nesting": lambda: _nested(100_000),
    "a-cycle": lambda: _cycle(),
    "objects-json-does-not-know": lambda: {"when": {1, 2}, (1, 2): Unprintable()},
}


def assert_ended_recorded(run: Run, harness: Harness) -> ToolExecution:
    """The run completed, its execution is final and readable, the LLM read what was stored."""
    import json

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    execution = ToolExecution.objects.get(run=run)
    assert execution.status == ToolExecution.Status.SUCCEEDED and execution.finished_at is not None
    json.dumps(execution.result, allow_nan=False)  # stored as valid JSON, read back as such
    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["status"] == ToolExecution.Status.SUCCEEDED
    tool_message = harness.llm_requests[1][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == finished["observation"]
    assert "\x00" not in finished["observation"] and run.output == f"Result: {finished['observation']}"
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert event_types(run)[-1] == ev.RUN_COMPLETED
    return execution


def test_it_records_a_calculator_result_too_large_to_serialise_and_the_run_goes_on(
    personas, no_dispatch
) -> None:
    from agents.tools.builtins import Calculator

    expression = "*".join(["999999**64"] * 12)  # about 4,600 digits: json.dumps refuses it
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": expression}}]},
        {"content": "Result: {last}"},
        builtin_tools=["calculator"],
    )
    harness = Harness(Calculator())
    run = start(personas, agent, text="multiply")

    assert harness.execute(run) == RunStatus.COMPLETED

    execution = assert_ended_recorded(run, harness)
    assert execution.result["expression"] == expression
    assert execution.result["value"].startswith("[integer too large to show: about 460")
    assert "integer too large to show" in run.output


@pytest.mark.parametrize("make", HOSTILE_RESULTS.values(), ids=HOSTILE_RESULTS.keys())
def test_it_records_a_hostile_tool_result_in_a_safe_form_and_the_run_goes_on(
    personas, no_dispatch, make
) -> None:
    tool = RecordingTool("t_hostile", result=lambda args: make())
    agent = pay_agent(
        personas, {"tool_calls": [{"name": "t_hostile", "arguments": {}}]}, {"content": "Result: {last}"}
    )
    harness = Harness(tool)
    run = start(personas, agent, text="go")

    assert harness.execute(run) == RunStatus.COMPLETED

    assert len(tool.calls) == 1
    assert_ended_recorded(run, harness)


class HostileRewrite(PostToolUseHook):
    """A PostToolUse hook whose rewrite of the observation cannot be stored as it is."""

    name = "test_hostile_rewrite"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result={"total": float("nan"), "memo": "\x00\udfff", "n": 10**4400})


register_hook(HostileRewrite)


def test_it_stores_a_hostile_rewrite_by_a_post_tool_use_hook_and_the_run_goes_on(
    personas, no_dispatch
) -> None:
    tool = RecordingTool("t_plain", result={"ok": True})
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "t_plain", "arguments": {}}]},
        {"content": "Result: {last}"},
        hooks=["test_hostile_rewrite"],
    )
    harness = Harness(tool)
    run = start(personas, agent, text="go")

    assert harness.execute(run) == RunStatus.COMPLETED

    execution = assert_ended_recorded(run, harness)
    assert execution.result == {"ok": True}, "the raw result is audited"
    assert '"total": "NaN"' in run.output and "integer too large to show" in run.output


# --- whatever fails after the tool returned ------------------------------------------------------


def _post_chain_crashes(monkeypatch) -> None:
    from hooks import HookRegistry

    async def crash(self, ctx):
        raise RuntimeError("a bug after the tool returned")

    monkeypatch.setattr(HookRegistry, "run_post_tool_use", crash)


def _record_cannot_be_built(monkeypatch) -> None:
    from agents.engine import store

    real = store.execution_finish

    def finish(*, status, **fields):
        if status == ToolExecution.Status.SUCCEEDED:
            raise TypeError("the outcome cannot be recorded")
        return real(status=status, **fields)

    monkeypatch.setattr(store, "execution_finish", finish)


def _database_refuses_the_outcome(monkeypatch) -> None:
    from agents.engine import batch, store

    real = store.execution_finish

    def finish(*, status, **fields):
        change = real(status=status, **fields)
        if status != ToolExecution.Status.SUCCEEDED:
            return change
        return batch.Change(change.table, "no_such_column = %s", change.where, [1, *change.params[4:]])

    monkeypatch.setattr(store, "execution_finish", finish)


AFTER_THE_TOOL_RETURNED = {
    "the PostToolUse chain crashes": _post_chain_crashes,
    "the outcome's record cannot be built": _record_cannot_be_built,
    "the database refuses the outcome": _database_refuses_the_outcome,
}


@pytest.mark.django_db(transaction=True)  # a refused write aborts only its own transaction, as deployed
@pytest.mark.parametrize("fault", AFTER_THE_TOOL_RETURNED.values(), ids=AFTER_THE_TOOL_RETURNED.keys())
def test_whatever_fails_after_the_tool_returns_its_execution_ends_failed_and_the_llm_is_told(
    personas, no_dispatch, monkeypatch, fault
) -> None:
    pay = RecordingTool("oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA)
    harness = Harness(pay)
    run = start(personas, pay_agent(personas))
    fault(monkeypatch)

    assert harness.execute(run) == RunStatus.COMPLETED

    assert len(pay.calls) == 1
    execution = ToolExecution.objects.get(run=run)
    assert execution.status == ToolExecution.Status.FAILED and execution.finished_at is not None
    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["status"] == ToolExecution.Status.FAILED
    assert finished["observation"] == execution.result
    assert execution.result.startswith("Tool error: oa__purchase_pay ran, but its outcome could not be")
    assert "check the target system before trying again" in execution.result
    assert harness.llm_requests[1][-1]["content"] == execution.result
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert event_types(run)[-1] == ev.RUN_COMPLETED
