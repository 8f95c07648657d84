"""The demo's two-stage policy in a real Chromium (issue 26 acceptance): a 40,000 USD payment needs
one approval (april's); a 60,000 USD purchase order asks alice's team lead (lee) first, then two of
finance (april, fiona, adam), each inbox showing the stages and where the request is."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.models import ConfirmationRequest
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, sign_in
from tests.browser.test_demo_in_a_browser import demo, new_page, send  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser]


def decide(page: Page, base: str, title: str, reason: str) -> str:
    """Approve the first card titled ``title`` in this person's inbox; what the page says back."""
    page.goto(f"{base}/approvals/")
    card = page.locator(".card", has_text=title).first
    expect(card).to_be_visible(timeout=15_000)
    card.get_by_label(re.compile("^Reason")).fill(reason)
    card.get_by_role("button", name="Approve").click()
    message = page.locator(".msg")
    expect(message).to_be_visible()
    return message.inner_text()


def test_forty_thousand_needs_one_approval_and_sixty_thousand_the_lead_then_finance(
    demo: str,  # noqa: F811 - the fixture imported above
    browser: Browser,
) -> None:
    alice, april, lee, fiona = (new_page(browser, DESKTOP) for _ in range(4))
    sign_in(alice, demo, "alice")
    alice.get_by_role("link", name=re.compile("Procurement assistant")).click()
    for person, name in ((april, "april"), (lee, "lee"), (fiona, "fiona")):
        sign_in(person, demo, name)

    small = send(alice, "order 40,000 USD from Contoso for 20 laptops")
    expect(small.locator(".bubble.assistant.final")).to_contain_text(
        "Raised PO-1004: 40,000.00 USD", timeout=15_000
    )
    paying = send(alice, "pay PO-1004")
    expect(paying.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    april.goto(f"{demo}/approvals/")
    expect(april.locator(".card", has_text="Pay a purchase").locator(".stages")).to_have_count(0)
    assert "Approved" in decide(april, demo, "Pay a purchase", "within budget")
    expect(paying.locator(".bubble.assistant.final")).to_contain_text(
        "Paid PO-1004: 40,000.00 USD", timeout=15_000
    )

    large = send(alice, "order 60,000 USD from Contoso for 40 laptops")
    expect(large.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    expect(large.locator(".approval .tally")).to_contain_text("Stage 1 of 2 — Team lead: 0 of 1 approval")
    expect(large.locator(".approval .may-decide")).to_have_text(re.compile(r"^Who may decide: lee$"))
    request = ConfirmationRequest.objects.get(tool_name="oa__purchase_create")
    assert [stage["name"] for stage in request.stage_plan] == ["Team lead", "Finance"]
    april.goto(f"{demo}/approvals/")
    expect(april.locator(".card", has_text="Raise a purchase order")).to_have_count(0)

    lee.goto(f"{demo}/approvals/")
    stages = lee.locator(".card", has_text="Raise a purchase order").locator(".stages li")
    expect(stages).to_have_count(2)
    expect(stages.nth(0)).to_contain_text("Stage 1 of 2 — Team lead (1 approval): asked now")
    expect(stages.nth(1)).to_contain_text("Stage 2 of 2 — Finance (2 approvals): not asked yet")
    shoot(lee, "stages-lead-asked")
    said = decide(lee, demo, "Raise a purchase order", "the team needs them")
    assert (
        "stage 1 of 2 (Team lead) is approved, and the request now waits for stage 2 of 2 (Finance)" in said
    )
    expect(large.locator(".bubble.assistant.final")).to_have_count(0)

    said = decide(april, demo, "Raise a purchase order", "budgeted")
    assert "1 of 2 approvals" in said
    waiting = large.locator(".approval")
    expect(waiting.locator(".tally")).to_contain_text("Stage 2 of 2 — Finance: 1 of 2 approvals — april")
    expect(waiting.locator(".may-decide")).to_contain_text("april, fiona, adam")
    shoot(alice, "stages-requester-sees-finance")
    fiona.goto(f"{demo}/approvals/")
    card = fiona.locator(".card", has_text="Raise a purchase order")
    expect(card.locator(".stages li").nth(0)).to_contain_text("approved — lee approved")
    expect(card.locator(".tally")).to_contain_text("1 of 2 approvals: april approved")
    finance = card.locator(".stages li").nth(1)
    expect(finance).to_contain_text("waiting for fiona, adam")  # april voted: not waited for
    expect(finance).not_to_contain_text("april,")
    shoot(fiona, "stages-finance-asked")
    assert "Approved" in decide(fiona, demo, "Raise a purchase order", "ok")

    expect(large.locator(".bubble.assistant.final")).to_contain_text(
        "Raised PO-1005: 60,000.00 USD", timeout=20_000
    )
    fiona.goto(f"{demo}/approvals/{request.pk}/")
    expect(fiona.locator(".stages li").nth(1)).to_contain_text("Finance (2 approvals): approved")
    shoot(fiona, "stages-request-page")
