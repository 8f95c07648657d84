"""The hook editor on the agent and organisation pages: parameters typed into inputs built from the
hook's schema, mistakes told in the operator's words, and the effective chain the agent's runs execute."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agents.checks import hook_chain_of
from agents.engine.chain import registry_for_chain
from agents.models import Agent, HookDeclaration
from tenancy.models import Membership, Organization
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import hook_rows, organization_form
from tests.console.hook_editor_kit import CONFIRM_BIG_PAYMENTS, condition_inputs, editor_row, post_rows
from tests.console.hook_editor_kit import payments as payments
from tests.personas import make_hook

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000  # Python's json gives up past about 1,000 levels (RecursionError)


# --- the editor -------------------------------------------------------------------------------------


def test_the_agent_page_offers_catalog_hooks_with_their_descriptions_and_parameter_inputs(
    governed, payments
) -> None:
    page = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert "confirm_when — Requires human approval when the call's arguments meet conditions" in page
    assert 'name="hook_declarations-__prefix__-params__confirm_when__conditions-op"' in page
    assert 'name="hook_declarations-__prefix__-params__result_truncate__max_chars"' in page
    assert "default: 8000" in page  # a default shown where the value goes


def test_an_operator_attaches_confirm_when_by_filling_its_parameter_inputs(governed, payments) -> None:
    row = editor_row(
        "confirm_when",
        tools="oa__purchase_pay",
        mode="",
        reason="",
        **condition_inputs(("amount", ">=", "50000")),
    )

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

    # In the one condition editor: the field, the operator in words, the value, and the sentence.
    assert 'name="hook_declarations-0-params__confirm_when__conditions-field" value="amount"' in page
    assert 'name="hook_declarations-0-params__confirm_when__conditions-value" value="50000"' in page
    assert '<option value=">=" selected>is at least</option>' in page
    assert "When Amount is at least 50,000." in page


@pytest.mark.parametrize(
    ("hook", "inputs", "message"),
    [
        ("set_arguments", {"tools": "oa__*", "values": ""}, "Values: this parameter is required"),
        ("set_arguments", {"tools": "oa__*", "values": "EUR"}, "Values: enter JSON"),
        ("result_truncate", {"max_chars": "lots", "tools": ""}, "Max chars: enter a whole number"),
        ("result_truncate", {"max_chars": "5", "tools": ""}, "max_chars: 5 is less than the minimum of 100"),
        (
            "confirm_when",
            {"tools": "", **condition_inputs(("amount", ">=", ""))},
            "Conditions: condition 1: give a value for “amount”",
        ),
        (
            "confirm_when",
            {"tools": "", **condition_inputs(("amount", ">", "lots"))},
            "conditions[0].value must be a number",
        ),
        # JSON nested deeper than the bounded reader accepts is a mistake like any other, not a 500.
        ("set_arguments", {"tools": "oa__*", "values": DEEP}, "Values: enter JSON"),
        (
            "confirm_when",
            {"tools": "", **condition_inputs(("amount", ">", DEEP))},
            "conditions[0].value must be a number",
        ),
    ],
    ids=[
        "required",
        "not-json",
        "not-whole",
        "too-small",
        "no-value",
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


def test_an_organisation_admin_adds_an_enforced_hook_through_the_editor(governed) -> None:
    memberships = list(Membership.objects.filter(organization=governed.org).order_by("pk"))
    data = organization_form(governed.org, memberships)
    data.update(hook_rows(editor_row("deny_tools", tools="oa__purchase_delete", message="Never.")))

    response = logged_in(governed.admin).post(url(Organization, "change", governed.org.pk), data)

    assert response.status_code == 302, page_text(response)
    enforced = HookDeclaration.objects.get()
    assert enforced.is_enforced and enforced.params == {"tools": "oa__purchase_delete", "message": "Never."}


# --- one error per mistake, one place for tools (issue 23) ----------------------------------------


def test_a_missing_required_parameter_is_said_once_on_the_parameters(governed, payments) -> None:
    row = editor_row("confirm_when", tools="oa__purchase_pay", mode="", reason="", **condition_inputs())

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


# --- the effective chain ------------------------------------------------------------------------------


def chain_names(text: str) -> list[str]:
    return re.findall(r'<tr class="chain-row[^"]*" data-hook="([^"]+)"', text)


def test_the_agent_page_shows_the_effective_chain_in_the_order_the_engine_runs_it(governed, payments) -> None:
    make_hook(governed.org, "deny_tools", params={"tools": "oa__purchase_delete"})
    make_hook(payments, "confirm_when", params=CONFIRM_BIG_PAYMENTS)
    make_hook(payments, "set_arguments", params={"tools": "oa__*", "values": {"currency": "EUR"}})
    make_hook(payments, "result_truncate", params={"max_chars": 500}, mode="off")

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    registry = registry_for_chain(hook_chain_of(payments))
    engine_order = [h.hook_name for h in registry.hooks if str(h.point) == "PreToolUse"]
    shown = chain_names(text)
    assert shown[: len(engine_order)] == engine_order
    # The agent's own hooks, then the organisation's enforced one, then the gate.
    assert shown.index("set_arguments") < shown.index("confirm_when") < shown.index("deny_tools")
    assert engine_order[-1] == "confirmation_gate", "the gate is last"
    assert "Organisation-enforced" in text and "System" in text
    assert "Off, so not in the chain: result_truncate" in text


def test_a_chain_that_cannot_be_built_is_shown_as_the_reason_runs_fail(governed, payments) -> None:
    hook = make_hook(payments, "deny_tools", params={"tools": "oa__x"})
    HookDeclaration.objects.filter(pk=hook.pk).update(params={"tools": 5})

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    assert "Runs of this agent fail before any tool call: hook 'deny_tools': bad params" in text


def test_the_chain_shows_parameters_as_readable_lines_not_json(governed, payments) -> None:
    make_hook(payments, "confirm_when", params={**CONFIRM_BIG_PAYMENTS, "reason": "big payments"})

    text = page_text(logged_in(governed.operator).get(url(Agent, "change", payments.pk)))

    chain = text[text.index('id="effective-chain"') :]
    assert "<li>Tools: oa__purchase_pay</li>" not in chain, "its tools are in Runs for"
    assert '<code class="nowrap">oa__purchase_pay</code>' in chain
    assert "<li>Conditions: Amount is at least 50,000</li>" in chain  # as the condition editor says it
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
    assert "confirm_when asks when: Amount is at least 50,000" in gate


def test_what_an_operator_typed_is_shown_back_escaped(governed, payments) -> None:
    make_hook(payments, "deny_tools", params={"tools": "oa__x", "message": '"><script>alert(1)</script>'})

    text = logged_in(governed.operator).get(url(Agent, "change", payments.pk)).content.decode()

    assert "<script>alert(1)</script>" not in text


def test_a_broken_hook_module_does_not_take_the_agent_page_down(governed, payments, settings) -> None:
    settings.HOOK_MODULES = ["no.such.module"]

    response = logged_in(governed.operator).get(url(Agent, "change", payments.pk))

    assert response.status_code == 200
    assert "hook module 'no.such.module' failed to import" in page_text(response)
