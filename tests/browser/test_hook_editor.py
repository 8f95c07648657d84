"""The demo operator works the hook editor in a real browser: attaches ``confirm_when`` to the
demo agent by filling the hook's parameter inputs, finds it in the effective chain before the
approval gate, and tries the chain on a large payment: approval needed, nothing opened.

Screenshots go where every browser test's go (tests/browser/shots.py)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.demo import DEMO_AGENT_NAME, DEMO_PASSWORD, demo_setup
from agents.models import Agent, ConnectorAction, HookDeclaration
from approvals.models import ConfirmationRequest
from tests.browser.shots import test_folder

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_agent() -> Agent:
    """The demo agent, with paying left to its hooks: the pay action alone asks nobody."""
    demo_setup(base_url="http://127.0.0.1:8000")
    ConnectorAction.objects.filter(name="purchase_pay").update(requires_confirmation=False)
    return Agent.objects.get(name=DEMO_AGENT_NAME)


def shot(page: Page, name: str, **options: Any) -> None:
    page.screenshot(path=str(test_folder() / name), **options)


def test_the_demo_operator_attaches_confirm_when_sees_it_in_the_chain_and_tries_a_payment(
    live_server: Any, demo_agent: Agent, page: Page
) -> None:
    base = live_server.url
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill("oscar")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{base}/admin/agents/agent/{demo_agent.pk}/change/")

    page.get_by_role("button", name="Add another hook").click()
    row = page.locator(".inline-related.last-related.dynamic-hook_declarations").last
    row.locator('select[name$="-hook"]').select_option("confirm_when")
    params = row.locator('.hook-params[data-hook="confirm_when"]')
    expect(params).to_be_visible()
    expect(params).to_contain_text("Requires human approval when the call's arguments meet conditions")
    expect(row.locator('.hook-params[data-hook="deny_tools"]')).to_be_hidden()
    expect(row.locator(".fieldBox.field-name")).to_be_hidden()  # a catalog hook needs no label of its own
    params.locator('[name$="__tools"]').fill("oa__purchase_pay")
    params.locator('[name$="__conditions__0__field"]').fill("amount")
    params.locator('[name$="__conditions__0__op"]').select_option(">=")
    params.locator('[name$="__conditions__0__value"]').fill("50000")
    params.locator('[name$="__reason"]').fill("payments of 50,000 or more")
    row.screenshot(path=str(test_folder() / "hook-editor-row.png"))
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    saved = HookDeclaration.objects.get(agent=demo_agent)
    assert saved.params["conditions"] == [{"field": "amount", "op": ">=", "value": 50000}]
    chain = page.locator("#effective-chain")
    pre_hooks = chain.locator("tr.chain-row", has_text="PreToolUse")
    names = [pre_hooks.nth(i).get_attribute("data-hook") for i in range(pre_hooks.count())]
    assert names == ["read_only_guard", "confirm_when", "confirmation_gate"], names
    expect(chain.locator('tr[data-hook="confirm_when"]')).to_contain_text("Agent")
    expect(chain.locator('tr[data-hook="confirm_when"]')).to_contain_text("oa__purchase_pay")
    shot(page, "agent-page-with-its-chain.png", full_page=True)
    chain.screenshot(path=str(test_folder() / "effective-chain.png"))

    page.get_by_role("link", name="Try this chain").first.click()
    page.get_by_label("Tool").select_option("oa__purchase_pay")
    page.get_by_label("Arguments (JSON)").fill('{"purchase_id": "PO-1001", "amount": 60000}')
    page.get_by_role("button", name="Try the chain").click()

    outcome = page.locator("#trial-outcome")
    expect(outcome).to_contain_text("Approval needed")
    expect(outcome).to_contain_text("payments of 50,000 or more")
    step = page.locator('tr.trial-step[data-hook="confirm_when"]')
    expect(step).to_contain_text("asked for approval")
    expect(page.locator('tr.trial-step[data-hook="confirmation_gate"]')).to_contain_text("approval needed")
    shot(page, "try-a-chain-result.png", full_page=True)
    assert not ConfirmationRequest.objects.exists(), "a dry run opens no approval request"

    page.get_by_label("Arguments (JSON)").fill('{"purchase_id": "PO-1002", "amount": 80}')
    page.get_by_role("button", name="Try the chain").click()
    expect(page.locator("#trial-outcome")).to_contain_text("Allowed")
