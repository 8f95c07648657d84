"""The ReAct engine: hooks around every tool call, durable steps, failing closed."""

from __future__ import annotations

from typing import Any

import pytest

from agents import events as ev
from agents.models import Run, RunStatus, ToolExecution
from agents.services import run_cancel, run_start
from hooks import HookContext, HookResult, PostToolUseHook, PreToolUseHook, SuspendRun
from hooks.catalog import register_hook
from tests.agents.engine_kit import Harness, RecordingTool, event_types, events_of
from tests.personas import make_agent, scripted

PAY_SCHEMA = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["purchase_id", "amount"],
}


@pytest.fixture
def no_dispatch(monkeypatch):
    """Runs are driven by the test itself, not handed to an executor."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


def start(personas, agent, text="pay PO-1") -> Run:
    return run_start(agent=agent, user=personas.member, input=text)


def pay_agent(personas, *turns, hooks=None, **fields):
    if not turns:
        turns = (
            {
                "tool_calls": [
                    {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-1", "amount": 5000}}
                ]
            },
            {"content": "Result: {last}"},
        )
    return make_agent(
        personas.org, personas.operator, model_config_json=scripted(*turns, hooks=hooks), **fields
    )


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


def test_a_tool_left_started_by_a_crash_is_reported_unknown_and_not_run_again(personas, no_dispatch) -> None:
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas))
    harness = Harness(pay)
    # Simulate a worker that proposed the call, recorded the start, then died mid-call.
    crashed = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)

    async def die(args):
        raise SystemExit("worker killed")

    crashed.run = die  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        Harness(crashed).execute(run)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.STARTED
    Run.objects.filter(pk=run.pk).update(lease_expires_at="2000-01-01T00:00:00Z")  # its lease ran out

    assert harness.resume(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert pay.calls == [], "a call whose outcome is unknown is never re-run"
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.UNKNOWN
    assert "Outcome unknown" in run.output
    assert ev.RUN_RESUMED in event_types(run)


def test_two_concurrent_resumes_let_exactly_one_proceed(personas, no_dispatch) -> None:
    import asyncio

    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_resume

    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.AWAITING_APPROVAL)
    harness = Harness(pay)

    async def both():
        return await asyncio.gather(
            run_resume(run.pk, reason="a", **harness.options()),
            run_resume(run.pk, reason="b", **harness.options()),
        )

    outcomes = async_to_sync(both)()
    assert sorted(outcomes, key=str) == [None, RunStatus.COMPLETED]
    assert len(pay.calls) == 1


class PauseUntilReleased(PreToolUseHook):
    """Suspends the run until the test flips ``released`` (a stand-in for a human's decision)."""

    name = "test_pause_until_released"
    released = False

    async def execute(self, ctx: HookContext) -> HookResult:
        if not type(self).released:
            raise SuspendRun("waiting for the test", detail={"tool_call_id": ctx.metadata["tool_call_id"]})
        return HookResult(side_effects=["released"])


register_hook(PauseUntilReleased)


def test_a_suspending_hook_parks_the_run_and_a_resume_finishes_it_once(personas, no_dispatch) -> None:
    PauseUntilReleased.released = False
    pay = RecordingTool("oa__purchase_pay", result="paid", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas, hooks=["test_pause_until_released"]))
    harness = Harness(pay)

    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL
    run.refresh_from_db()
    assert run.status == RunStatus.AWAITING_APPROVAL and run.lease_owner == "" and pay.calls == []
    [suspended] = events_of(run, ev.RUN_SUSPENDED)
    assert suspended["tool"] == "oa__purchase_pay" and suspended["reason"] == "waiting for the test"

    assert harness.resume(run) == RunStatus.AWAITING_APPROVAL, "still undecided: parks again"
    PauseUntilReleased.released = True
    assert Harness(pay).resume(run, reason="released") == RunStatus.COMPLETED  # a fresh engine
    assert harness.resume(run) is None, "a completed run cannot be resumed again"

    run.refresh_from_db()
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 5000}]
    assert run.output == "Result: paid"
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), "event seqs stay gap-free across suspensions"


def test_cancelling_a_suspended_run_ends_it_and_a_resume_then_does_nothing(personas, no_dispatch) -> None:
    PauseUntilReleased.released = False
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas, hooks=["test_pause_until_released"]))
    harness = Harness(pay)
    harness.execute(run)

    run_cancel(run=run, user=personas.member)
    PauseUntilReleased.released = True

    assert harness.resume(run) is None
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and pay.calls == []
    assert events_of(run, ev.RUN_FAILED)[-1]["stage"] == "cancelled"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_resumes_from_separate_connections_let_exactly_one_proceed(personas, monkeypatch) -> None:
    import threading

    from django.db import connections

    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    PauseUntilReleased.released = True
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    runs = [start(personas, pay_agent(personas, name=f"agent {i}")) for i in range(10)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(status=RunStatus.AWAITING_APPROVAL)
    harness = Harness(pay)
    outcomes: list = []
    barrier = threading.Barrier(4)

    def resume_all() -> None:
        barrier.wait()
        try:
            for run in runs:
                outcomes.append(harness.resume(run))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=resume_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert outcomes.count(RunStatus.COMPLETED) == 10 and outcomes.count(None) == 30
    assert len(pay.calls) == 10, "each run's tool ran exactly once"


def test_cancelling_a_running_run_stops_it_before_its_next_tool_runs(personas, no_dispatch) -> None:
    from asgiref.sync import sync_to_async

    holder: dict = {}

    async def cancel_me(args):
        await sync_to_async(
            lambda: run_cancel(run=Run.objects.get(pk=holder["run"].pk), user=personas.member)
        )()
        return "cancel requested"

    first = RecordingTool("t_first")
    first.run = cancel_me  # type: ignore[method-assign]
    second = RecordingTool("t_second")
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "t_first", "arguments": {}}]},
        {"tool_calls": [{"name": "t_second", "arguments": {}}]},
        {"content": "done"},
    )
    run = holder["run"] = start(personas, agent)

    assert Harness(first, second).execute(run) == RunStatus.CANCELLED

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and second.calls == []
    assert events_of(run, ev.RUN_FAILED)[-1]["stage"] == "cancelled"
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


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
    from agents.engine import store

    real = store.execution_finish

    def finish(*, status, **fields):
        change = real(status=status, **fields)
        if status != ToolExecution.Status.SUCCEEDED:
            return change
        return store.Change(change.table, "no_such_column = %s", change.where, [1, *change.params[4:]])

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
