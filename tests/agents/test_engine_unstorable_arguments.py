"""A model may propose arguments no database stores: ``json.loads`` reads NaN, Infinity, ``1e999``
and ``\\u0000``. The agent is told, in words, which field is wrong, as for arguments its tool's
schema refuses; the call is not started (no hook, no execution record, no tool); and the run's own
records of the proposal (its events, its checkpoint) are still stored, on every database
(docs/design.md §1.16).

The scripted model reads such values from a tool's answer (``$last.<path>``), as a real model
would copy them from what it read."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.models import Run, RunMessage, RunStatus, ToolExecution
from tests.agents.engine_kit import Harness, RecordingTool, event_types, events_of
from tests.agents.run_kit import PAY_SCHEMA, pay_agent, start


def proposing(personas, looked_up: str, arguments: dict) -> tuple[Run, RecordingTool, Harness]:
    """A run whose model looks a purchase up (``looked_up`` is the lookup's answer, JSON text),
    proposes to pay it with ``arguments`` (references into that answer), then says what it read."""
    lookup = RecordingTool("oa__purchase_get", result=looked_up)
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "oa__purchase_get", "arguments": {}}]},
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": arguments}]},
        {"content": "{last}"},
    )
    harness = Harness(lookup, pay)
    run = start(personas, agent)
    assert harness.execute(run) == RunStatus.COMPLETED
    run.refresh_from_db()
    return run, pay, harness


def assert_not_started(run: Run, pay: RecordingTool) -> None:
    assert pay.calls == []
    assert list(ToolExecution.objects.filter(run=run).values_list("tool_name", flat=True)) == [
        "oa__purchase_get"
    ]
    blocked = events_of(run, ev.TOOL_BLOCKED)
    assert [event["tool"] for event in blocked] == ["oa__purchase_pay"]


def test_the_agent_is_told_its_arguments_hold_nan(personas, no_dispatch) -> None:
    run, pay, _ = proposing(
        personas, '{"id": "PO-1", "amount": NaN}', {"purchase_id": "$last.id", "amount": "$last.amount"}
    )

    assert run.output == "Invalid arguments for oa__purchase_pay: amount is not a finite number"
    assert_not_started(run, pay)


def test_the_agent_is_told_its_arguments_hold_infinity(personas, no_dispatch) -> None:
    run, pay, harness = proposing(
        personas, '{"id": "PO-1", "amount": 1e999}', {"purchase_id": "$last.id", "amount": "$last.amount"}
    )

    assert run.output == "Invalid arguments for oa__purchase_pay: amount is not a finite number"
    assert_not_started(run, pay)
    told = harness.llm_requests[2][-1]
    assert told["role"] == "tool" and told["content"] == run.output


def test_the_agent_is_told_its_arguments_hold_a_nul_character(personas, no_dispatch) -> None:
    run, pay, _ = proposing(
        personas,
        '{"id": "PO-1", "lines": [{"note": "ok"}, {"note": "a\\u0000b"}]}',
        {"purchase_id": "$last.id", "amount": 5, "lines": "$last.lines"},
    )

    assert run.output == "Invalid arguments for oa__purchase_pay: lines.1.note contains a NUL character"
    assert_not_started(run, pay)


def test_the_agent_is_told_a_key_of_its_arguments_holds_a_nul_character(personas, no_dispatch) -> None:
    run, pay, _ = proposing(
        personas,
        '{"id": "PO-1", "meta": {"a\\u0000b": 1}}',
        {"purchase_id": "$last.id", "amount": 5, "meta": "$last.meta"},
    )

    assert run.output == "Invalid arguments for oa__purchase_pay: a key of meta contains a NUL character"
    assert_not_started(run, pay)


def test_the_runs_records_of_an_unstorable_proposal_are_stored_and_readable(personas, no_dispatch) -> None:
    """The proposal is recorded before the call is refused (its events, the checkpoint holding the
    model's message): those writes clean what they cannot store rather than fail the run."""
    run, _, _ = proposing(
        personas,
        '{"id": "PO-1\\u0000", "amount": NaN}',
        {"purchase_id": "$last.id", "amount": "$last.amount"},
    )

    assert run.status == RunStatus.COMPLETED
    assert ev.TOOL_PROPOSED in event_types(run) and ev.TOOL_STARTED in event_types(run)
    proposed = [e for e in events_of(run, ev.TOOL_PROPOSED) if e["tool"] == "oa__purchase_pay"]
    assert proposed[0]["arguments"] == {"purchase_id": "PO-1\ufffd", "amount": "NaN"}
    # The first field in the script's order: jsonb (the agent's configuration) orders keys its way.
    assert run.output in {
        "Invalid arguments for oa__purchase_pay: purchase_id contains a NUL character",
        "Invalid arguments for oa__purchase_pay: amount is not a finite number",
    }
    stored = [m.message for m in RunMessage.objects.filter(run=run).order_by("index")]
    proposal = [m for m in stored if m["role"] == "assistant" and m.get("tool_calls")][-1]
    assert proposal["tool_calls"][0]["function"]["name"] == "oa__purchase_pay"
    assert stored[-2]["role"] == "tool" and stored[-2]["content"] == run.output


@pytest.mark.parametrize("amount", [1200, 12.5])
def test_finite_numbers_still_pay(personas, no_dispatch, amount) -> None:
    _, pay, _ = proposing(
        personas,
        f'{{"id": "PO-1", "amount": {amount}}}',
        {"purchase_id": "$last.id", "amount": "$last.amount"},
    )

    assert pay.calls == [{"purchase_id": "PO-1", "amount": amount}]
