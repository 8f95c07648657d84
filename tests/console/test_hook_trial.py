"""The "Try this chain" dry run on the agent page: the agent's hook chain tried on a call typed in
or taken from a recent run, saying what each hook would do while nothing is opened, run or recorded."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from agents.models import Agent, ConnectorCallLog, Conversation, Run, ToolExecution
from agents.rate_limit import ConnectorRateLimit
from agents.tools.base import ToolSpec
from approvals.models import ConfirmationRequest
from console.chain_trial import tool_choices
from hooks.contract import HookContext
from tests.admin_kit import logged_in, page_text, url
from tests.console.hook_editor_kit import CONFIRM_BIG_PAYMENTS
from tests.console.hook_editor_kit import payments as payments
from tests.personas import make_hook, scripted

pytestmark = pytest.mark.django_db


def try_url(agent: Agent) -> str:
    return reverse("admin:agents_agent_try_chain", args=[agent.pk])


def try_call(user: Any, agent: Agent, **data: Any):
    return logged_in(user).post(try_url(agent), data)


def test_a_large_payment_needs_approval_and_nothing_is_opened_or_run(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    response = try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                        arguments='{"purchase_id": "PO-1", "amount": 60000}')  # fmt: skip

    text = page_text(response)
    assert response.status_code == 200
    assert "Approval needed" in text
    assert "confirm_when asked" in text and "Amount is at least 50,000" in text
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
    # Picked from a list that names the tool and what the call was about, not its JSON, and the
    # answer opens on the result.
    assert re.search(
        r"<option value=\"\d+\"[^>]*>\d{4}-\d\d-\d\d \d\d:\d\d · Purchase pay · PO-9 · 75,000.00", text
    )
    assert "{&quot;purchase_id&quot;" not in text and 'action="#trial-result"' in text
    assert "What the chain does with Purchase pay" in text


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


# --- why the gate asks, and the arguments typed into inputs (issue 23) ----------------------------


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
    # The picker names each tool by its title, as people read it: never its internal name.
    assert '<option value="oa__purchase_pay">Purchase pay</option>' in text
    assert "(oa__purchase_pay)" not in text


def test_two_tools_of_one_title_are_told_apart_by_their_names() -> None:
    tools = {
        "erp__pay": ToolSpec(name="erp__pay", description="", title="Pay"),
        "bank__pay": ToolSpec(name="bank__pay", description="", title="Pay"),
        "erp__list": ToolSpec(name="erp__list", description="", title="List"),
    }
    assert tool_choices(tools) == [
        ("erp__pay", "Pay (erp__pay)"),
        ("bank__pay", "Pay (bank__pay)"),
        ("erp__list", "List"),
    ]


def test_the_trial_reads_the_arguments_from_the_inputs(governed, payments) -> None:
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    text = page_text(try_call(governed.operator, payments, tool_name="oa__purchase_pay", arguments="",
                              **{"arguments__oa__purchase_pay___shown": "1",
                                 "arguments__oa__purchase_pay__purchase_id": "PO-7",
                                 "arguments__oa__purchase_pay__amount": "60000"}))  # fmt: skip

    assert "Approval needed" in text and "confirm_when asked: Amount is at least 50,000" in text
    assert '"purchase_id": "PO-7"' in text


def test_a_wrongly_typed_argument_is_told_on_its_input(governed, payments) -> None:
    response = try_call(governed.operator, payments, tool_name="oa__purchase_pay", arguments="",
                        **{"arguments__oa__purchase_pay___shown": "1",
                           "arguments__oa__purchase_pay__purchase_id": "PO-7",
                           "arguments__oa__purchase_pay__amount": "a lot"})  # fmt: skip

    assert "Amount: enter a number" in page_text(response)
    assert response.context["form"].errors["arguments"] == ["Amount: enter a number"]


# --- doubt goes to a person (docs/design.md §1.16) ----------------------------------------------------

TEXT_OR_NUMBER_PAY = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": ["number", "string"]}},
    "required": ["purchase_id", "amount"],
}


@pytest.mark.parametrize(
    ("amount", "verdict", "why"),
    [
        ('"25,000.00"', "Approval needed", 'amount is "25,000.00", which is not a number; a person decides'),
        ('"25000 USD"', "Approval needed", 'amount is "25000 USD", which is not a number; a person decides'),
        ('"60000"', "Approval needed", "amount >= 50000"),
        ('"4000"', "Allowed", ""),
    ],
)
def test_the_trial_shows_a_condition_that_cannot_compare_asking_a_person(
    governed, payments, amount: str, verdict: str, why: str
) -> None:
    payments.actions.filter(name="purchase_pay").update(parameters_schema=TEXT_OR_NUMBER_PAY)
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)

    response = try_call(governed.operator, payments, tool_name="oa__purchase_pay",
                        arguments=f'{{"purchase_id": "PO-1", "amount": {amount}}}')  # fmt: skip

    text = page_text(response).replace("&quot;", '"').replace("&gt;", ">")
    assert response.status_code == 200 and verdict in text
    assert why in text
    assert not ConfirmationRequest.objects.exists() and not Run.objects.exists()
