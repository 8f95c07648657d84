"""Values no database stores — a float NaN or ±Infinity (JSON parsers read ``NaN``, ``Infinity``
and ``1e999``), a NUL character (``\\u0000``) in a string or a key — are refused where they enter,
with a sentence naming the field: never a database's message, never a 500 (docs/design.md §1.16).

The rule is one function (``fimone.storable.unstorable``); this file checks it and the edges that
ask it outside the engine and the MCP gateway (those have their own files:
``tests/agents/test_engine_unstorable_arguments.py``,
``tests/mcp_gateway/test_gateway_unstorable_arguments.py``): the REST API (any JSON body), the
web inbox's edited arguments, the portal's chat, the hook editor's "Try" panel and hook imports."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import Agent, HookDeclaration, Run
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from fimone.storable import unstorable
from tests.admin_kit import logged_in, page_text
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, pay_tool, set_policy, suspended_run
from tests.console.hook_editor_kit import payments as payments
from tests.personas import make_agent


@pytest.fixture
def no_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


# --- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "sentence"),
    [
        ({"amount": float("nan")}, "amount is not a finite number"),
        ({"amount": float("inf")}, "amount is not a finite number"),
        ({"lines": [{"amount": 1}, {"amount": float("-inf")}]}, "lines.1.amount is not a finite number"),
        ({"note": "a\x00b"}, "note contains a NUL character"),
        ({"payee": {"name": "ok", "iban": "\x00"}}, "payee.iban contains a NUL character"),
        ({"meta": {"a\x00b": 1}}, "a key of meta contains a NUL character"),
        ({"a\x00b": 1}, "a key of the arguments contains a NUL character"),
        ({"note": "\ud800"}, "note contains a character that is not valid Unicode (a lone surrogate)"),
        ([1, [2, float("nan")]], "1.1 is not a finite number"),
        (float("nan"), "the arguments is not a finite number"),
    ],
)
def test_the_rule_names_what_a_database_cannot_store_by_its_path(value: Any, sentence: str) -> None:
    assert unstorable(value, name="the arguments") == sentence


def test_the_rule_names_the_first_in_document_order() -> None:
    assert unstorable({"a": "ok", "b": float("nan"), "c\x00": 1}) == "b is not a finite number"
    assert unstorable({"a\x00": float("nan"), "b": 1}) == "a key of the value contains a NUL character"
    assert unstorable({"a": [float("inf"), "\x00"]}) == "a.0 is not a finite number"


def test_the_rule_passes_what_every_database_stores() -> None:
    stored = {"amount": 12.5, "n": 10**300, "big": 1e308, "t": "é ☃ 𝄞", "x": [None, True, {}], "": ""}
    assert unstorable(stored) is None
    assert unstorable("plain text", name="the message") is None


@pytest.mark.once
def test_the_rule_walks_any_depth_without_recursion() -> None:
    deep: Any = float("nan")
    for _ in range(50_000):
        deep = [deep]
    assert unstorable(deep) == "0.0.0.….0.0.0.0 is not a finite number"


def test_the_rule_says_a_long_key_or_a_deep_path_short() -> None:
    long_key = "k" * 5000
    assert unstorable({long_key: float("nan")}) == "k" * 39 + "… is not a finite number"
    assert unstorable({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": "\x00"}}}}}}}}}) == (
        "a.b.c.….f.g.h.i contains a NUL character"
    )


# --- the REST API --------------------------------------------------------------------------------


def api_as(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def post_raw(user: Any, url: str, body: str) -> Any:
    """A JSON body written by hand (``json.dumps`` writes NaN and Infinity; ``1e999`` reads as
    Infinity)."""
    return api_as(user).post(url, data=body, content_type="application/json")


@pytest.mark.django_db
def test_the_api_refuses_a_nul_in_the_input_with_a_400(personas, no_dispatch) -> None:
    agent = make_agent(personas.org, personas.operator)

    response = api_as(personas.member).post(
        f"/api/agents/{agent.pk}/runs/", {"input": "pay a\x00b"}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "detail": "The request holds a value that cannot be stored: input contains a NUL character."
    }
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_nan_in_a_body_naming_the_field_rather_than_a_parse_error(
    personas, no_dispatch
) -> None:
    agent = make_agent(personas.org, personas.operator)

    response = post_raw(
        personas.member, f"/api/agents/{agent.pk}/runs/", '{"input": "hi", "conversation": NaN}'
    )

    assert response.status_code == 400
    assert response.json() == {
        "detail": "The request holds a value that cannot be stored: conversation is not a finite number."
    }
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_api_still_starts_a_run_with_ordinary_text(personas, no_dispatch) -> None:
    agent = make_agent(personas.org, personas.operator)

    response = api_as(personas.member).post(
        f"/api/agents/{agent.pk}/runs/", {"input": "pay PO-1 12.5 € ☃"}, format="json"
    )

    assert response.status_code == 201, response.content
    assert Run.objects.get().input == "pay PO-1 12.5 € ☃"


def assert_undecided(request: ConfirmationRequest) -> None:
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by_id is None
    assert request.tool_args == PAY_ARGS and request.edited_by_id is None
    assert not request.events.filter(kind=ConfirmationEvent.Kind.DECIDED).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("amount", "sentence"),
    [
        ("1e999", "arguments.amount is not a finite number"),
        ("NaN", "arguments.amount is not a finite number"),
        ('"PO\\u0000"', "arguments.amount contains a NUL character"),
    ],
    ids=["infinity", "nan", "nul"],
)
def test_the_api_refuses_edited_arguments_a_database_cannot_store_with_a_400(
    personas, resumes, amount: str, sentence: str
) -> None:
    set_policy(personas, allow_edit_on_approve=True)
    _, request = suspended_run(personas, Harness(pay_tool()))
    body = f'{{"decision": "approve", "arguments": {{"purchase_id": "PO-1001", "amount": {amount}}}}}'

    response = post_raw(personas.approver, f"/api/approvals/{request.pk}/decision/", body)

    assert response.status_code == 400
    assert response.json() == {"detail": f"The request holds a value that cannot be stored: {sentence}."}
    assert_undecided(request)
    assert resumes.run_ids == []


@pytest.mark.django_db
def test_the_api_refuses_a_nul_in_a_workflows_graph_with_a_400_and_creates_nothing(personas) -> None:
    from workflows.models import Workflow

    agent = make_agent(personas.org, personas.operator)
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "step", "type": "agent", "agent": agent.pk, "input": "Pay a\x00b"},
            {"id": "end", "type": "end"},
        ],
        "edges": [{"from": "start", "to": "step"}, {"from": "step", "to": "end"}],
    }
    body = {"organization": personas.org.pk, "name": "Pay", "graph": graph}

    response = api_as(personas.operator).post("/api/workflows/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "detail": "The request holds a value that cannot be stored: "
        "graph.nodes.1.input contains a NUL character."
    }
    assert not Workflow.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_infinity_in_an_eval_sets_tool_answers_with_a_400(personas) -> None:
    from evals.models import EvalSet

    body = (
        f'{{"organization": {personas.org.pk}, "name": "G", '
        '"cases": [{"input": "hi", "expected": "Hello"}], '
        '"tool_answers": {"oa__purchase_get": {"amount": 1e999}}}'
    )

    response = post_raw(personas.operator, "/api/eval-sets/", body)

    assert response.status_code == 400
    assert response.json() == {
        "detail": "The request holds a value that cannot be stored: "
        "tool_answers.oa__purchase_get.amount is not a finite number."
    }
    assert not EvalSet.objects.exists()


# --- the web inbox, the chat ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("amount", "sentence"),
    [("NaN", "amount is not a finite number"), ('"PO\\u0000"', "amount contains a NUL character")],
    ids=["nan", "nul"],
)
def test_the_inbox_refuses_edited_arguments_a_database_cannot_store_naming_the_field(
    personas, resumes, amount: str, sentence: str
) -> None:
    set_policy(personas, allow_edit_on_approve=True)
    _, request = suspended_run(personas, Harness(pay_tool()))
    inbox = Client()
    inbox.force_login(personas.approver)
    arguments = f'{{"purchase_id": "PO-1001", "amount": {amount}}}'

    page = inbox.post(
        f"/approvals/{request.pk}/decide/", {"decision": "approve", "arguments": arguments}, follow=True
    )

    assert page.status_code == 200
    assert f"The arguments were not changed: {sentence}." in page_text(page)
    assert_undecided(request)
    assert resumes.run_ids == []


@pytest.mark.django_db
def test_the_chat_refuses_a_message_holding_a_nul_with_a_sentence(personas, no_dispatch) -> None:
    agent = make_agent(personas.org, personas.operator)
    chat = logged_in(personas.member)

    first = chat.post(f"/agents/{agent.pk}/", {"message": "pay a\x00b"}, follow=True)

    assert first.status_code == 400
    assert "Check your message: Null characters are not allowed." in page_text(first)
    assert not Run.objects.exists()

    run_started = chat.post(f"/agents/{agent.pk}/", {"message": "hello"})
    conversation = Run.objects.get().conversation_id
    assert run_started.status_code == 302
    Run.objects.update(status="completed")
    later = chat.post(f"/conversations/{conversation}/", {"message": "and\x00then"}, follow=True)

    assert "Check your message: Null characters are not allowed." in page_text(later)
    assert Run.objects.count() == 1


# --- the hook editor's "Try" panel, hook imports -----------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        ('{"purchase_id": "PO-1", "amount": NaN}', "amount is not a finite number"),
        ('{"purchase_id": "PO-1", "amount": 1e999}', "amount is not a finite number"),
        ('{"purchase_id": "PO\\u0000", "amount": 1}', "purchase_id contains a NUL character"),
    ],
    ids=["nan", "infinity", "nul"],
)
def test_the_try_panel_says_the_engine_refuses_arguments_a_database_cannot_store(
    governed, payments: Agent, arguments: str, sentence: str
) -> None:
    response = logged_in(governed.operator).post(
        reverse("admin:agents_agent_try_chain", args=[payments.pk]),
        {"tool_name": "oa__purchase_pay", "arguments": arguments},
    )

    assert response.status_code == 200
    assert f"the engine refuses these arguments before any hook: {sentence}" in page_text(response)


CLAUDE_PROJECT = Path(__file__).resolve().parent / "claude_hooks"
CLAUDE_SETTINGS_WITH_A_NUL = json.dumps(
    {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Wri\x00te",
                    "hooks": [
                        {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/file_guard.py --protect /etc'}
                    ],
                }
            ]
        }
    }
)


@pytest.mark.django_db
def test_a_hook_import_holding_a_nul_is_refused_naming_where(personas, tmp_path) -> None:
    agent = make_agent(personas.org, personas.operator)
    path = tmp_path / "settings.json"
    path.write_text(CLAUDE_SETTINGS_WITH_A_NUL)

    with pytest.raises(CommandError) as refused:
        call_command(
            "hooks",
            "import-claude",
            str(path),
            "--agent",
            str(agent.pk),
            "--project-dir",
            str(CLAUDE_PROJECT),
            stdout=io.StringIO(),
        )

    assert str(refused.value) == (
        f"{path}: cannot be stored: hooks.PreToolUse.0.matcher contains a NUL character"
    )
    assert not HookDeclaration.objects.exists()


@pytest.mark.django_db
def test_a_fim_one_hook_import_holding_a_nul_is_a_form_error_and_nothing_is_saved(governed) -> None:
    agent = make_agent(governed.org, governed.operator)
    text = '{"hooks": {"builtin": [{"name": "deny_tools", "params": {"tools": "oa__purchase_pay\\u0000"}}]}}'

    response = logged_in(governed.operator).post(
        reverse("admin:agents_agent_import_fimone", args=[agent.pk]), {"text": text}
    )

    assert response.status_code == 200
    assert "cannot be stored: hooks.builtin.0.params.tools contains a NUL character" in page_text(response)
    assert not HookDeclaration.objects.exists()


# --- the admin's JSON fields -----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "text", "sentence"),
    [
        (
            "model_config_json",
            '{"provider": "scripted", "script": {"turns": [{"content": "x"}]}, "temperature": NaN}',
            "temperature is not a finite number",
        ),
        (
            "model_config_json",
            '{"provider": "scripted", "script": {"turns": [{"content": "Hel\\u0000lo"}]}}',
            "script.turns.0.content contains a NUL character",
        ),
    ],
    ids=["nan", "nul"],
)
def test_the_agent_admin_refuses_json_a_database_cannot_store_as_a_field_error(
    superuser, personas, field: str, text: str, sentence: str
) -> None:
    from agents.models import Agent as AgentModel
    from tests.admin_kit import url
    from tests.console.admin_forms import agent_form
    from tests.personas import scripted

    data = agent_form(personas, scripted({"content": "x"}), **{field: text})

    response = logged_in(superuser).post(url(AgentModel, "add"), data)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors[field] == [f"This value cannot be stored: {sentence}."]
    assert not AgentModel.objects.exists()
