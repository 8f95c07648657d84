"""The demo operator works the hook editor in a real browser: attaches ``confirm_when`` to the
demo agent by filling the hook's parameter inputs, finds it in the effective chain before the
approval gate, and tries the chain on a large payment: approval needed, nothing opened. At a
phone's width the hook's row, the chain and the trial's steps fit the screen, nothing cut.

Screenshots go where every browser test's go (tests/browser/shots.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.demo import DEMO_AGENT_NAME, DEMO_PASSWORD, demo_setup
from agents.models import Agent, ConnectorAction, HookDeclaration
from approvals.models import ConfirmationRequest
from tests.browser.admin_pages import overflows
from tests.browser.shots import screens_folder, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_agent() -> Agent:
    """The demo agent, with paying left to its hooks: the pay action alone asks nobody, and the
    demo's own rule (large purchase orders) is not there."""
    demo_setup(base_url="http://127.0.0.1:8000")
    ConnectorAction.objects.filter(name="purchase_pay").update(requires_confirmation=False)
    HookDeclaration.objects.filter(agent__name=DEMO_AGENT_NAME).delete()
    return Agent.objects.get(name=DEMO_AGENT_NAME)


def sign_in_to_admin(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_demo_operator_attaches_confirm_when_sees_it_in_the_chain_and_tries_a_payment(
    live_server: Any, demo_agent: Agent, browser: Any, width: int
) -> None:
    page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
    base = live_server.url
    sign_in_to_admin(page, base, "oscar")
    page.goto(f"{base}/admin/agents/agent/{demo_agent.pk}/change/")
    # The organisation's enforced hooks run after the agent's own (hooks.contract.Band).
    heading = page.locator("#hook_declarations-group h2").first
    expect(heading).to_contain_text("the organisation's enforced hooks run after these")
    expect(heading).not_to_contain_text("first")

    page.get_by_role("button", name="Add another hook").click()
    row = page.locator(".inline-related.last-related.dynamic-hook_declarations").last
    row.locator('select[name$="-hook"]').select_option("confirm_when")
    params = row.locator('.hook-params[data-hook="confirm_when"]')
    expect(params).to_be_visible()
    expect(params).to_contain_text("Requires human approval when the call's arguments meet conditions")
    expect(row.locator('.hook-params[data-hook="deny_tools"]')).to_be_hidden()
    expect(row.locator(".fieldBox.field-name")).to_be_hidden()  # a catalog hook needs no label of its own
    expect(row.locator(".fieldBox.field-matcher")).to_be_hidden()  # its tools are chosen in Tools
    params.locator('[name$="__tools"]').fill("oa__purchase_pay")
    # The one condition editor: field, operator in words, value, said back in a sentence.
    params.locator('[name$="__conditions-field"]').first.fill("amount")
    params.locator('[name$="__conditions-op"]').first.select_option(label="is at least")
    params.locator('[name$="__conditions-value"]').first.fill("50000")
    expect(params.locator(".condition-words")).to_have_text("When Amount is at least 50000.")  # as typed
    params.locator('[name$="__reason"]').fill("payments of 50,000 or more")
    assert overflows(row) == [], "the hook's row fits the screen, nothing cut or scrolled"
    row_box = row.bounding_box()
    assert row_box is not None and row_box["x"] >= 0 and row_box["x"] + row_box["width"] <= width
    expect(row.locator(".inline_label")).to_have_text("#1")
    label_gap = row.locator("h3 .inline_label").bounding_box()["x"] - _right(row.locator("h3 b"))
    assert label_gap >= 3, "“Hook: #1”, a space after the colon"
    row.screenshot(path=str(screens_folder() / f"hook-editor-row-{width}.png"))
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    saved = HookDeclaration.objects.get(agent=demo_agent)
    assert saved.params["conditions"] == [{"field": "amount", "op": ">=", "value": 50000}]
    chain = page.locator("#effective-chain")
    pre_hooks = chain.locator("tr.chain-row", has_text="PreToolUse")
    # The chain comes last in a long page: wait for its rows (the message above it may be parsed
    # well before them on a busy host) instead of counting what has arrived so far.
    expect(pre_hooks).to_have_count(3)
    names = [pre_hooks.nth(i).get_attribute("data-hook") for i in range(pre_hooks.count())]
    assert names == ["read_only_guard", "confirm_when", "confirmation_gate"], names
    hook_row = chain.locator('tr[data-hook="confirm_when"]')
    expect(hook_row).to_contain_text("Agent")
    expect(hook_row).to_contain_text("oa__purchase_pay")
    expect(hook_row).to_contain_text("Conditions: Amount is at least 50,000")
    expect(chain.locator('tr[data-hook="confirmation_gate"]')).to_contain_text(
        "confirm_when asks when: Amount is at least 50,000"
    )
    assert overflows(chain) == [], "the chain reads in full within the screen"
    assert _right(chain) <= width
    shoot(page, "agent-page-with-its-chain")
    chain.screenshot(path=str(screens_folder() / f"effective-chain-{width}.png"))

    page.get_by_role("link", name="Try this chain").first.click()
    intro = page.locator(".trial-intro")
    expect(intro).to_contain_text(f"Try the hooks that a new run of {DEMO_AGENT_NAME} would use, on one call")
    expect(page.locator(".breadcrumbs")).to_contain_text("Home \u203a Agents & hooks \u203a Agents")
    # The call is typed first; "Or a recent call" follows what it stands in for.
    rows = page.locator("fieldset.module .form-row")
    expect(rows).to_have_count(4)
    assert [rows.nth(i).get_attribute("class").split()[-1] for i in range(rows.count())] == [
        "field-tool_name",
        "field-arguments",
        "field-recent_call",
        "field-sample_result",
    ]
    page.get_by_label("Tool").select_option("oa__purchase_pay")
    inputs = page.locator('.tool-args[data-tool="oa__purchase_pay"]')
    expect(inputs).to_be_visible()
    expect(page.locator('.tool-args[data-tool="oa__purchase_list"]')).to_be_hidden()
    inputs.get_by_label("Purchase", exact=True).fill("PO-1001")
    inputs.get_by_label("Amount", exact=True).fill("60000")
    shoot(page, "try-a-chain-form")
    page.get_by_role("button", name="Try the chain").click()

    outcome = page.locator("#trial-outcome")
    expect(outcome).to_contain_text("Approval needed")
    expect(outcome).to_contain_text(
        "confirm_when asked: Amount is at least 50,000 (payments of 50,000 or more)"
    )
    step = page.locator('tr.trial-step[data-hook="confirm_when"]')
    expect(step).to_contain_text("asked for approval")
    expect(page.locator('tr.trial-step[data-hook="confirmation_gate"]')).to_contain_text("approval needed")
    assert overflows(page.locator("#trial-result")) == [], "the trial's steps read in full"
    assert overflows(page.locator("#effective-chain")) == []
    shoot(page, "try-a-chain-result")
    assert not ConfirmationRequest.objects.exists(), "a dry run opens no approval request"

    page.get_by_label("Tool").select_option("oa__purchase_pay")
    inputs.get_by_label("Purchase", exact=True).fill("PO-1002")
    inputs.get_by_label("Amount", exact=True).fill("80")
    page.get_by_role("button", name="Try the chain").click()
    expect(page.locator("#trial-outcome")).to_contain_text("Allowed")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_trial_says_the_tool_is_flagged_in_its_connector_and_links_there(
    live_server: Any, demo_agent: Agent, browser: Any, width: int
) -> None:
    ConnectorAction.objects.filter(name="purchase_pay").update(requires_confirmation=True)
    pay = ConnectorAction.objects.select_related("connector").get(name="purchase_pay")
    page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
    base = live_server.url
    sign_in_to_admin(page, base, "oscar")
    page.goto(f"{base}/admin/agents/agent/{demo_agent.pk}/try-chain/")

    page.get_by_label("Tool").select_option("oa__purchase_pay")
    inputs = page.locator('.tool-args[data-tool="oa__purchase_pay"]')
    inputs.get_by_label("Purchase", exact=True).fill("PO-1001")
    inputs.get_by_label("Amount", exact=True).fill("120")
    page.get_by_role("button", name="Try the chain").click()

    outcome = page.locator("#trial-outcome")
    expect(outcome).to_contain_text("Approval needed — a person is asked because:")
    flagged = f"is flagged “requires confirmation” in connector {pay.connector.name} — change it there"
    expect(outcome).to_contain_text(flagged)
    # The same reason on the gate's step of the trial and in the chain: whole, at either width.
    gate_step = page.locator('tr.trial-step[data-hook="confirmation_gate"]')
    expect(gate_step).to_contain_text(flagged)
    expect(page.locator('#effective-chain tr[data-hook="confirmation_gate"]')).to_contain_text(flagged)
    for part in ("#trial-result", "#effective-chain"):
        assert overflows(page.locator(part)) == [], part
    assert _right(gate_step.locator(".details li").first) <= width
    shoot(page, "trial-says-why")
    outcome.get_by_role("link").first.click()
    expect(page).to_have_url(
        re.compile(rf"/admin/agents/(connector/{pay.connector_id}|connectoraction/{pay.pk})/")
    )
    shoot(page, "where-the-flag-is-changed")


def _right(locator: Any) -> float:
    """Where ``locator``'s box ends on the page, from the left edge of the screen."""
    box = locator.bounding_box()
    assert box is not None, locator
    return box["x"] + box["width"]
