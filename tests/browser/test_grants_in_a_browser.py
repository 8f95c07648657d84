"""A standing approval in a real Chromium (issue 26, item 2): with the demo's policy allowing
them, april approves alice's first payment and also approves later payments up to 5,000 for the
agent; alice's second payment (4,800) then runs without asking anyone, and april revokes the
grant on the Standing approvals page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from agents.demo import DEMO_ORGANIZATION
from approvals.models import ApproverPolicy, ConfirmationRequest
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in
from tests.browser.test_demo_in_a_browser import PAID, demo, new_page, send  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser]


def test_april_grants_a_standing_approval_the_next_payment_needs_nobody_and_she_revokes_it(
    demo: str,  # noqa: F811 - the fixture imported above
    browser: Browser,
) -> None:
    ApproverPolicy.objects.filter(organization__name=DEMO_ORGANIZATION, agent=None).update(
        standing_grants=ApproverPolicy.Grants.AGENT
    )
    alice, april = new_page(browser, DESKTOP), new_page(browser, DESKTOP)
    sign_in(alice, demo, "alice")
    alice.get_by_role("link", name=re.compile("Procurement assistant")).click()
    sign_in(april, demo, "april")

    first = send(alice, "please pay the pending purchase")
    expect(first.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    april.goto(f"{demo}/approvals/")
    card = april.locator(".card", has_text="Pay a purchase").first
    card.get_by_text("Also approve later calls like this").click()
    card.get_by_label(re.compile("Approve later calls of this tool")).check()
    # The conditions are rows to fill in, starting from "Amount is at most" this payment's amount
    # (never its purchase id, which would cover no later call), said back in a sentence.
    sentence = card.locator(".grant-sentence")
    expect(sentence).to_have_text(
        "Approve later calls of Pay a purchase where Amount is at most 1,200.00 USD, in this "
        "conversation, for 8 hours."
    )
    expect(card.get_by_label("Field 1")).to_have_value("amount")
    expect(card.get_by_label("Operator 1")).to_have_value("<=")
    card.get_by_label("Value 1").fill("5000")
    card.get_by_label("every conversation of this agent").check()
    expect(sentence).to_have_text(
        "Approve later calls of Pay a purchase where Amount is at most 5,000.00 USD, in every "
        "conversation of this agent, for 8 hours."
    )
    shoot(april, "grant-asked")
    april.set_viewport_size(PHONE)
    shoot(april, "grant-asked")
    april.set_viewport_size(DESKTOP)
    card.get_by_role("button", name="Approve").click()
    expect(april.locator(".msg").first).to_contain_text("Approved")
    expect(april.locator(".msg").nth(1)).to_contain_text(
        "april approves Pay a purchase where Amount is at most 5,000.00 USD, in every conversation "
        "of the agent"
    )
    pattern = PAID.format(
        id="PO-1001", amount=re.escape("1,200.00"), vendor=re.escape("Lumen Office Supplies")
    )
    expect(first.locator(".bubble.assistant.final")).to_have_text(re.compile(pattern), timeout=15_000)

    second = send(alice, "please pay the pending purchase")
    pattern = PAID.format(id="PO-1002", amount=re.escape("4,800.00"), vendor=re.escape("Northwind Cloud"))
    expect(second.locator(".bubble.assistant.final")).to_have_text(re.compile(pattern), timeout=15_000)
    expect(second.locator(".approval")).to_have_count(0)
    assert ConfirmationRequest.objects.filter(grant__isnull=False).count() == 1
    shoot(alice, "paid-by-grant")

    april.goto(f"{demo}/approvals/grants/")
    row = april.locator("tr", has_text="Amount is at most 5,000.00 USD")
    expect(row.locator("td.num")).to_have_text("1")
    shoot(april, "grants-page")
    row.get_by_role("button", name="Revoke").click()
    expect(april.locator(".msg")).to_contain_text("revoked: later calls ask a person again")
    expect(april.locator("tr", has_text="Amount is at most 5,000.00 USD")).to_have_count(0)
