"""The hook editor on the agent page: parameters typed into inputs built from the hook's schema,
the effective chain the agent's runs execute, and "Try this chain" (a dry run)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from agents.checks import hook_chain_of
from agents.engine.chain import registry_for_chain
from agents.models import (
    Agent,
    ConnectorCallLog,
    Conversation,
    HookDeclaration,
    Membership,
    Organization,
    Run,
    ToolExecution,
)
from agents.rate_limit import ConnectorRateLimit
from approvals.models import ConfirmationRequest
from hooks.contract import HookContext
from tests.admin_kit import logged_in, page_text, url
from tests.agents.admin_forms import agent_form, hook_rows, organization_form
from tests.personas import make_action, make_agent, make_hook, make_http_connector, scripted

pytestmark = pytest.mark.django_db

P = "hook_declarations-0-params"
PAY_SCHEMA = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["purchase_id", "amount"],
}
DEEP = "[" * 5000 + "]" * 5000  # Python's json gives up past about 1,000 levels (RecursionError)
CONFIRM_BIG_PAYMENTS = {
    "tools": "oa__purchase_pay",
    "conditions": [{"field": "amount", "op": ">=", "value": 50000}],
}


@pytest.fixture
def payments(governed) -> Agent:
    """The operator's agent with the demo's two payment tools; paying needs no approval by
    itself, so only the hooks decide."""
    connector = make_http_connector(governed.org, "http://127.0.0.1:9/")
    actions = [
        make_action(connector, "purchase_list", path="purchases", requires_confirmation=False),
        make_action(connector, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay",
                    parameters_schema=PAY_SCHEMA, requires_confirmation=False),
    ]  # fmt: skip
    return make_agent(governed.org, governed.operator, actions=actions)


def editor_row(hook: str, **inputs: Any) -> dict[str, Any]:
    """One row as the editor posts it: the hook picked and its parameter inputs."""
    row: dict[str, Any] = {"id": "", "hook": hook, "name": "", "kind": "class", "point": "", "matcher": "",
                           "priority": "", "timeout": "", "on_error": "", "enabled": "on", "params": "{}",
                           "secret": ""}  # fmt: skip
    row.update({key: inputs.pop(key) for key in ("matcher", "priority") if key in inputs})
    if hook and not hook.startswith("own:"):
        row[f"params__{hook}___shown"] = "1"
        row.update({f"params__{hook}__{key}": value for key, value in inputs.items()})
    else:
        row.update(inputs)
    return row


def post_rows(user: Any, personas: Any, agent: Agent, *rows: dict[str, Any]):
    data = agent_form(personas, agent.model_config_json, name=agent.name, owner=agent.owner_id)
    data["actions"] = list(agent.actions.values_list("pk", flat=True))
    data.update(hook_rows(*rows))
    return logged_in(user).post(url(Agent, "change", agent.pk), data)


def try_url(agent: Agent) -> str:
    return reverse("admin:agents_agent_try_chain", args=[agent.pk])


def try_call(user: Any, agent: Agent, **data: Any):
    return logged_in(user).post(try_url(agent), data)


# --- the editor -------------------------------------------------------------------------------------


def test_the_agent_page_offers_catalog_hooks_with_their_descriptions_and_parameter_inputs(
    governed, payments
) -> None:
    page = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert "confirm_when — Requires human approval when the call's arguments meet conditions" in page
    assert 'name="hook_declarations-__prefix__-params__confirm_when__conditions__0__op"' in page
    assert 'name="hook_declarations-__prefix__-params__result_truncate__max_chars"' in page
    assert "default: 8000" in page  # a default shown where the value goes


def test_an_operator_attaches_confirm_when_by_filling_its_parameter_inputs(governed, payments) -> None:
    row = editor_row("confirm_when", tools="oa__purchase_pay", mode="", reason="",
                     conditions__0__field="amount", conditions__0__op=">=", conditions__0__value="50000",
                     conditions__1__field="", conditions__1__op="", conditions__1__value="")  # fmt: skip

    response = post_rows(governed.operator, governed, payments, row)

    assert response.status_code == 302, page_text(response)
    saved = HookDeclaration.objects.get()
    assert (saved.agent, saved.name, saved.kind, saved.point) == (
        payments,
        "confirm_when",
        "class",
        "PreToolUse",
    )
    assert saved.params == CONFIRM_BIG_PAYMENTS


def test_a_saved_hook_shows_its_parameters_back_in_its_inputs(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    page = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert re.search(
        r'name="hook_declarations-0-params__confirm_when__conditions__0__field" value="amount"', page
    )
    assert re.search(
        r'name="hook_declarations-0-params__confirm_when__conditions__0__value" value="50000"', page
    )
    assert re.search(r'<option value="&gt;=" selected>', page_text(logged_in(governed.operator).get(
        url(Agent, "change", payments.pk))).replace(">=", "&gt;="))  # fmt: skip


@pytest.mark.parametrize(
    ("hook", "inputs", "message"),
    [
        ("set_arguments", {"tools": "oa__*", "values": ""}, "Values: this parameter is required"),
        ("set_arguments", {"tools": "oa__*", "values": "EUR"}, "Values: enter JSON"),
        ("result_truncate", {"max_chars": "lots", "tools": ""}, "Max chars: enter a whole number"),
        ("result_truncate", {"max_chars": "5", "tools": ""}, "max_chars: 5 is less than the minimum of 100"),
        (
            "confirm_when",
            {
                "tools": "",
                "conditions__0__field": "amount",
                "conditions__0__op": "",
                "conditions__0__value": "1",
            },
            "Conditions: row 1: op is required",
        ),
        (
            "confirm_when",
            {
                "tools": "",
                "conditions__0__field": "amount",
                "conditions__0__op": ">",
                "conditions__0__value": "lots",
            },
            "conditions[0].value must be a number",
        ),
        # JSON nested deeper than the bounded reader accepts is a mistake like any other, not a 500.
        ("set_arguments", {"tools": "oa__*", "values": DEEP}, "Values: enter JSON"),
        (
            "confirm_when",
            {
                "tools": "",
                "conditions__0__field": "amount",
                "conditions__0__op": ">",
                "conditions__0__value": DEEP,
            },
            "conditions[0].value must be a number",
        ),
    ],
    ids=[
        "required",
        "not-json",
        "not-whole",
        "too-small",
        "no-op",
        "not-a-number",
        "deep-json",
        "deep-value",
    ],
)
def test_parameter_mistakes_are_told_in_the_operators_words(
    governed, payments, hook, inputs, message
) -> None:
    response = post_rows(governed.operator, governed, payments, editor_row(hook, **inputs))

    text = page_text(response)
    assert response.status_code == 200
    assert message in text
    assert "__init__" not in text and "Traceback" not in text
    assert not HookDeclaration.objects.exists()


def test_picking_no_hook_is_refused_with_a_message(governed, payments) -> None:
    response = post_rows(governed.operator, governed, payments, editor_row("", matcher="oa__*"))

    assert "Pick a hook from the catalog, or one of your own kinds." in page_text(response)
    assert not HookDeclaration.objects.exists()


def test_an_own_command_hook_takes_a_label_an_event_and_json_parameters(governed, payments) -> None:
    governed.operator.user_permissions.add(*_code_permission())
    row = editor_row("own:command", name="freeze", point="PostToolUse", params='{"argv": ["/bin/true"]}')

    response = post_rows(governed.operator, governed, payments, row)

    assert response.status_code == 302, page_text(response)
    saved = HookDeclaration.objects.get()
    assert (saved.kind, saved.name, saved.point, saved.params) == ("command", "freeze", "PostToolUse",
                                                                   {"argv": ["/bin/true"]})  # fmt: skip


def _code_permission() -> Any:
    from django.contrib.auth.models import Permission

    return Permission.objects.filter(codename="manage_code_hooks")


# --- the effective chain ------------------------------------------------------------------------------


def chain_names(text: str) -> list[str]:
    return re.findall(r'<tr class="chain-row[^"]*" data-hook="([^"]+)"', text)


def test_the_agent_page_shows_the_effective_chain_in_the_order_the_engine_runs_it(governed, payments) -> None:
    make_hook(governed.org, "deny_tools", params={"tools": "oa__purchase_delete"})
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)
    make_hook(payments, "set_arguments", params={"tools": "oa__*", "values": {"currency": "EUR"}})
    make_hook(payments, "result_truncate", params={"max_chars": 500}, enabled=False)

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    registry = registry_for_chain(hook_chain_of(payments))
    engine_order = [h.hook_name for h in registry.hooks if str(h.point) == "PreToolUse"]
    shown = chain_names(text)
    assert shown[: len(engine_order)] == engine_order
    # The agent's own hooks, then the organisation's enforced one, then the gate.
    assert shown.index("set_arguments") < shown.index("confirm_when") < shown.index("deny_tools")
    assert engine_order[-1] == "confirmation_gate", "the gate is last"
    assert "Organisation-enforced" in text and "System" in text
    assert "Disabled, so not in the chain: result_truncate" in text


def test_a_chain_that_cannot_be_built_is_shown_as_the_reason_runs_fail(governed, payments) -> None:
    hook = make_hook(payments, "deny_tools", params={"tools": "oa__x"})
    HookDeclaration.objects.filter(pk=hook.pk).update(params={"tools": 5})

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert "Runs of this agent fail before any tool call: hook 'deny_tools': bad params" in text


# --- try this chain --------------------------------------------------------------------------------------


def test_a_large_payment_needs_approval_and_nothing_is_opened_or_run(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    response = try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                        arguments='{"purchase_id": "PO-1", "amount": 60000}')  # fmt: skip

    text = page_text(response)
    assert response.status_code == 200
    assert "Approval needed" in text
    assert "confirm_when asked" in text and "amount >= 50000" in text
    assert not ConfirmationRequest.objects.exists()
    assert not ToolExecution.objects.exists() and not Run.objects.exists()


def test_a_small_payment_is_allowed(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                              arguments='{"purchase_id": "PO-1", "amount": 120}'))  # fmt: skip

    assert "<strong>Allowed</strong>" in text


def test_a_tool_that_requires_confirmation_needs_approval_whatever_the_hooks(governed, payments) -> None:
    payments.actions.filter(name="purchase_pay").update(requires_confirmation=True)

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                              arguments='{"purchase_id": "PO-1", "amount": 1}'))  # fmt: skip

    assert "Approval needed" in text and "requires confirmation" in text


def test_each_hook_says_what_it_did_blocked_rewritten_result_rewritten(governed, payments) -> None:
    make_hook(governed.org, "set_arguments", params={"tools": "oa__*", "values": {"note": "checked"}})
    make_hook(payments, "redact_result", params={"patterns": r"IBAN \w+"})
    make_hook(payments, "deny_tools", params={"tools": "oa__purchase_list", "message": "Lists are off."})

    paying = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                                arguments='{"purchase_id": "PO-1", "amount": 5}',
                                sample_result='"paid to IBAN DE123"'))  # fmt: skip
    listing = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_list", arguments=""))

    assert "rewrote arguments" in paying and '"note": "checked"' in paying
    assert "rewrote result" in paying and "paid to [redacted]" in paying
    assert "<strong>Blocked</strong>" in listing and "Lists are off." in listing


def test_a_command_hook_is_marked_not_tried(governed, payments) -> None:
    make_hook(payments, "freeze", kind="command", point="PreToolUse", params={"argv": ["/bin/false"]})

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                              arguments='{"purchase_id": "PO-1", "amount": 5}'))  # fmt: skip

    assert "not tried" in text and "command, python and http hooks run code of their own" in text
    assert "<strong>Allowed</strong>" in text


def test_a_recent_call_of_the_agent_can_be_tried(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)
    talk = Conversation.objects.create(organization=governed.org, agent=payments, user=governed.member)
    run = Run.objects.create(agent=payments, user=governed.member, conversation=talk, input="pay")
    big = {"purchase_id": "PO-9", "amount": 75000}
    call = ToolExecution.objects.create(
        run=run, tool_call_id="c1", tool_name="oa__purchase_pay", args=big, args_sha256="x"
    )

    text = page_text(try_call(governed.operator, payments, recent_call=str(call.pk)))

    assert "Approval needed" in text and "PO-9" in text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tool_name": "oa__purchase_pay", "arguments": "{not json"}, "Enter the arguments as a JSON object"),
        ({"tool_name": "oa__purchase_pay", "arguments": "[1]"}, "Enter the arguments as a JSON object"),
        ({"tool_name": "", "arguments": "{}"}, "Pick a tool, or a recent call."),
        (
            {"tool_name": "oa__purchase_pay", "arguments": '{"amount": 1}'},
            "the engine refuses these arguments",
        ),
    ],
)
def test_a_bad_trial_is_told_plainly(governed, payments, data, message) -> None:
    response = try_call(governed.operator, payments, **data)

    assert response.status_code == 200
    assert message in page_text(response)


def test_the_agent_page_links_operators_to_the_trial(governed, payments) -> None:
    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert f'href="{try_url(payments)}"' in text


def test_an_auditor_reads_the_chain_but_may_not_try_it(governed, payments) -> None:
    page = logged_in(governed.auditor).get(url(Agent, "change", payments.pk))
    trial = logged_in(governed.auditor).get(try_url(payments))

    assert page.status_code == 200 and "Effective hook chain" in page_text(page)
    assert try_url(payments) not in page_text(page)
    assert trial.status_code == 403


def test_another_organisations_operator_finds_no_agent(governed, payments) -> None:
    governed.other_operator.is_staff = True
    governed.other_operator.save()

    assert logged_in(governed.other_operator).get(try_url(payments)).status_code == 404
    assert (
        logged_in(governed.other_operator)
        .post(try_url(payments), {"tool_name": "oa__purchase_pay"})
        .status_code
        == 404
    )


def test_a_member_cannot_reach_the_trial(governed, payments) -> None:
    response = logged_in(governed.member).get(try_url(payments))

    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_trial_uses_the_agents_current_config_hooks_too(governed, payments) -> None:
    deny_all = {"name": "deny_tools", "params": {"tools": "oa__*"}}
    payments.model_config_json = scripted({"content": "x"}, hooks=[deny_all])
    payments.save()

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                              arguments='{"purchase_id": "PO-1", "amount": 5}'))  # fmt: skip

    assert "<strong>Blocked</strong>" in text and "Agent (model config)" in text


def test_the_audit_log_and_the_rate_limit_are_not_tried_and_nothing_is_recorded(governed, payments) -> None:
    make_hook(payments, "audit_log", params={})
    make_hook(payments, "connector_rate_limit", params={"calls": 1})

    call = {"arguments": '{"purchase_id": "PO-1", "amount": 5}', "sample_result": '{"ok": true}'}
    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay", **call))

    assert "it records calls in the call log" in text
    assert "a dry run must not use it up" in text
    assert text.count('class="verdict verdict-not-tried"') == 2
    assert not ConnectorCallLog.objects.exists()
    # The dry run used none of the quota: the first real call under calls=1 still passes.
    first = async_to_sync(ConnectorRateLimit(calls=1).execute)(
        HookContext(
            tool_name="oa__purchase_pay", user_id=governed.operator.pk, metadata={"org_id": governed.org.pk}
        )
    )
    assert first.allow


def test_what_an_operator_typed_is_shown_back_escaped(governed, payments) -> None:
    make_hook(payments, "deny_tools", params={"tools": "oa__x", "message": '"><script>alert(1)</script>'})

    text = logged_in(governed.operator).get(url(Agent, "change", payments.pk)).content.decode()

    assert "<script>alert(1)</script>" not in text


def test_an_organisation_admin_adds_an_enforced_hook_through_the_editor(governed) -> None:
    memberships = list(Membership.objects.filter(organization=governed.org).order_by("pk"))
    data = organization_form(governed.org, memberships)
    data.update(hook_rows(editor_row("deny_tools", tools="oa__purchase_delete", message="Never.")))

    response = logged_in(governed.admin).post(url(Organization, "change", governed.org.pk), data)

    assert response.status_code == 302, page_text(response)
    enforced = HookDeclaration.objects.get()
    assert enforced.is_enforced and enforced.params == {"tools": "oa__purchase_delete", "message": "Never."}


def test_a_broken_hook_module_does_not_take_the_agent_page_down(governed, payments, settings) -> None:
    settings.HOOK_MODULES = ["no.such.module"]

    response = logged_in(governed.operator).get(url(Agent, "change", payments.pk))

    assert response.status_code == 200
    assert "hook module 'no.such.module' failed to import" in page_text(response)


# --- issue 23: one error per mistake, one place for tools, readable parameters, why the gate asks --


def test_a_missing_required_parameter_is_said_once_on_the_parameters(governed, payments) -> None:
    row = editor_row("confirm_when", tools="oa__purchase_pay", mode="", reason="",
                     conditions__0__field="", conditions__0__op="", conditions__0__value="")  # fmt: skip

    response = post_rows(governed.operator, governed, payments, row)

    text = page_text(response)
    assert response.status_code == 200
    assert text.count("Conditions: this parameter is required") == 1
    assert "bad params" not in text and "is a required property" not in text


def test_a_catalog_hook_with_a_tools_parameter_takes_no_matcher(governed, payments) -> None:
    row = editor_row("deny_tools", tools="oa__purchase_list", message="", matcher="oa__*")

    response = post_rows(governed.operator, governed, payments, row)
    page = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert response.status_code == 200
    assert "This hook chooses its tools in its Tools parameter" in page_text(response)
    assert not HookDeclaration.objects.exists()
    assert 'data-hook="deny_tools" hidden data-chooses-tools="1"' in page
    assert "it runs only for the tools in its Tools parameter (it has no matcher)" in page


def test_the_chain_shows_parameters_as_readable_lines_not_json(governed, payments) -> None:
    make_hook(payments, "confirm_when", params={**CONFIRM_BIG_PAYMENTS, "reason": "big payments"})

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    chain = text[text.index('id="effective-chain"') :]
    assert "<li>Tools: oa__purchase_pay</li>" not in chain, "its tools are in Runs for"
    assert '<code class="nowrap">oa__purchase_pay</code>' in chain
    assert (
        "<li>Conditions: amount &gt;= 50000</li>" in chain or "<li>Conditions: amount >= 50000</li>" in chain
    )
    assert '{"tools"' not in chain and '"conditions"' not in chain


def test_the_gate_row_says_why_it_asks_with_a_link_to_the_connector_action(governed, payments) -> None:
    pay = payments.actions.get(name="purchase_pay")
    pay.requires_confirmation = True
    pay.save()
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    gate = text[text.index('data-hook="confirmation_gate"') :]
    assert "is flagged “requires confirmation” in connector OA — change it there" in gate
    connector_page = reverse("admin:agents_connector_change", args=[pay.connector_id])
    assert (
        f'href="{connector_page}"' in gate
        or reverse("admin:agents_connectoraction_change", args=[pay.pk]) in gate
    )
    assert (
        "confirm_when asks when: amount &gt;= 50000" in gate
        or "confirm_when asks when: amount >= 50000" in gate
    )


def test_an_agent_that_confirms_every_call_is_named_as_the_reason(governed, payments) -> None:
    payments.require_confirmation_for_all = True
    payments.save()

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                              arguments='{"purchase_id": "PO-1", "amount": 1}'))  # fmt: skip

    assert "Approval needed" in text and "the agent confirms every call" in text


def test_the_trial_reports_the_flag_with_where_to_change_it(governed, payments) -> None:
    pay = payments.actions.get(name="purchase_pay")
    pay.requires_confirmation = True
    pay.save()

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                              arguments='{"purchase_id": "PO-1", "amount": 1}'))  # fmt: skip

    outcome = text[text.index('id="trial-outcome"') :]
    assert "a person is asked because:" in outcome
    assert "is flagged “requires confirmation” in connector OA — change it there" in outcome
    assert f'href="{reverse("admin:agents_connector_change", args=[pay.connector_id])}"' in outcome or (
        reverse("admin:agents_connectoraction_change", args=[pay.pk]) in outcome
    )


def test_the_trial_offers_inputs_built_from_each_tools_schema(governed, payments) -> None:
    text = page_text(logged_in(governed.operator).get(try_url(payments)))

    assert '<div class="tool-args" data-tool="oa__purchase_pay"' in text
    assert 'name="arguments__oa__purchase_pay__purchase_id"' in text
    assert 'type="number" name="arguments__oa__purchase_pay__amount"' in text
    assert "Purchase pay (oa__purchase_pay)" in text


def test_the_trial_reads_the_arguments_from_the_inputs(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay", arguments="",
                              **{"arguments__oa__purchase_pay___shown": "1",
                                 "arguments__oa__purchase_pay__purchase_id": "PO-7",
                                 "arguments__oa__purchase_pay__amount": "60000"}))  # fmt: skip

    assert "Approval needed" in text and "confirm_when asked: amount &gt;= 50000" in text.replace(
        ">=", "&gt;="
    )
    assert '"purchase_id": "PO-7"' in text


def test_a_wrongly_typed_argument_is_told_on_its_input(governed, payments) -> None:
    response = try_call(governed.operator, payments, tool_name="oa__purchase_pay", arguments="",
                        **{"arguments__oa__purchase_pay___shown": "1",
                           "arguments__oa__purchase_pay__purchase_id": "PO-7",
                           "arguments__oa__purchase_pay__amount": "a lot"})  # fmt: skip

    assert "Amount: enter a number" in page_text(response)
    assert response.context["form"].errors["arguments"] == ["Amount: enter a number"]
