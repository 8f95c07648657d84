"""The demo as a newcomer meets it after ``make run``, in a real Chromium at 1280 and 390 px:
alice says hello and is told what the assistant can do; she pays the two pending purchases (april
approves each in her inbox) and reads each payment as a sentence; the third and fourth "pay" say
plainly that nothing is pending (and no developer's command: people chat here). The demo payments
page says how to reset the demo, leads back to the portal and keeps amounts and moments on one
line; oscar's connector page in the admin fits the screen with the requires-confirmation box in
sight."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.demo import DEMO_AGENT_NAME, DEMO_PASSWORD, demo_setup
from agents.models import Connector
from demo_payments.models import Purchase
from tests.browser.shots import screens_folder as screenshots_folder
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser]

WIDTHS = [pytest.param(DESKTOP, id="1280"), pytest.param(PHONE, id="390")]
PAID = r"^Paid {id}: {amount} USD to {vendor}, reference PAY-[0-9A-F]{{8}}\.\s*$"
NOTHING_PENDING = "Nothing is pending: every purchase is paid."


@pytest.fixture
def demo(asgi_server) -> str:
    demo_setup(base_url=asgi_server.url)
    return asgi_server.url


def new_page(browser: Browser, viewport: dict[str, int]) -> Page:
    return browser.new_context(viewport=viewport).new_page()


def fits(page: Page) -> bool:
    """Whether the page needs no sideways scrolling."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def send(page: Page, text: str) -> Any:
    """Alice sends ``text`` (a new conversation's first message, or the next one); the answer's turn."""
    box = page.get_by_role("textbox", name=re.compile("^(Your message|Continue the conversation)$"))
    turns = page.locator(".turn").count()
    box.fill(text)
    box.press("Enter")
    turn = page.locator(".turn").nth(turns)
    expect(turn).to_be_visible(timeout=15_000)
    return turn


def approve_in_inbox(april: Page, base: str, reason: str) -> None:
    april.goto(f"{base}/approvals/")
    card = april.locator(".card", has_text="Pay a purchase").first
    expect(card).to_be_visible(timeout=15_000)
    card.get_by_label(re.compile("^Reason")).fill(reason)
    card.get_by_role("button", name="Approve").click()
    expect(april.locator(".msg")).to_contain_text("Approved")


@pytest.mark.parametrize("viewport", WIDTHS)
def test_hello_greets_two_payments_read_as_sentences_and_the_third_and_fourth_say_nothing_is_pending(
    demo: str, browser: Browser, viewport: dict[str, int]
) -> None:
    alice, april = new_page(browser, viewport), new_page(browser, viewport)
    sign_in(alice, demo, "alice")
    card = alice.locator(".agent-card", has_text=DEMO_AGENT_NAME)
    for title in ("List purchases", "Look up a purchase", "Pay a purchase", "Raise a purchase order"):
        expect(card).to_contain_text(title)
    shoot(alice, "home")
    alice.get_by_role("link", name=re.compile(DEMO_AGENT_NAME)).click()

    hello = send(alice, "hello")
    answer = hello.locator(".bubble.assistant.final")
    expect(answer).to_contain_text("Hello! I'm the procurement assistant of the Acme demo.", timeout=15_000)
    expect(answer.locator("li")).to_have_count(3)
    expect(answer).to_contain_text("pay the pending purchase")
    expect(hello.locator(".step")).to_have_count(0)  # a greeting, not the purchase list
    shoot(alice, "hello")

    sign_in(april, demo, "april")
    for purchase_id, amount, vendor in [
        ("PO-1001", "1,200.00", "Lumen Office Supplies"),
        ("PO-1002", "4,800.00", "Northwind Cloud"),
    ]:
        paying = send(alice, "please pay the pending purchase")
        expect(paying.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
        expect(paying).to_contain_text(
            f"Paying {purchase_id}: {amount} USD to {vendor}. An approver decides first."
        )
        shoot(alice, f"waiting-{purchase_id}")
        approve_in_inbox(april, demo, "within budget")
        final = paying.locator(".bubble.assistant.final")
        pattern = PAID.format(id=purchase_id, amount=re.escape(amount), vendor=re.escape(vendor))
        expect(final).to_have_text(re.compile(pattern), timeout=15_000)
        shoot(alice, f"paid-{purchase_id}")

    for attempt in ("third", "fourth"):
        nothing = send(alice, "please pay the pending purchase")
        final = nothing.locator(".bubble.assistant.final")
        expect(final).to_have_text(re.compile(rf"^\s*{re.escape(NOTHING_PENDING)}\s*$"), timeout=15_000)
        expect(final).not_to_contain_text("manage.py")
        expect(final).not_to_contain_text("make run")
        expect(nothing.locator(".approval")).to_have_count(0)
        expect(nothing).not_to_contain_text("blocked")
        expect(nothing).not_to_contain_text("Invalid arguments")
        shoot(alice, f"{attempt}-pay")

    assert Purchase.objects.filter(status=Purchase.Status.PENDING).count() == 0
    assert fits(alice)


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_demo_payments_page_says_how_to_reset_the_demo(
    demo: str, browser: Browser, viewport: dict[str, int]
) -> None:
    page = new_page(browser, viewport)
    page.goto(f"{demo}/demo/")

    expect(page.locator(".banner")).to_contain_text(
        "manage.py demo_setup puts the purchases (and the whole demo) back"
    )
    expect(page.locator("td.amount").first).to_have_text("1,200.00 USD")
    assert fits(page)
    shoot(page, "demo-payments")

    # Amounts, vendors, a payment's reference and its moment each read on one line.
    lines = page.evaluate(
        """[...document.querySelectorAll('td.amount, td .nowrap' + (innerWidth > 600 ? ', td.vendor' : ''))]
             .map((node) => {
               const range = document.createRange();
               range.selectNodeContents(node);
               const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
               return [node.textContent.trim(), tops.size];
             })"""
    )
    assert len(lines) >= 5 and all(count == 1 for _, count in lines), lines
    expect(page.locator("td .nowrap").filter(has_text="UTC")).to_have_count(1)
    # "Status" looks the same on every purchase: only the status word is coloured.
    labels = page.evaluate(
        """[...document.querySelectorAll('td[data-label="Status"]')].map((td) => {
             const style = getComputedStyle(td, '::before');
             return [getComputedStyle(td).color, getComputedStyle(td).fontWeight, style.fontWeight];
           })"""
    )
    assert len(labels) == 3 and len({tuple(label) for label in labels}) == 1, labels
    # A way back to where people chat.
    page.get_by_role("link", name="Back to the portal").click()
    expect(page).to_have_url(f"{demo}/")


@pytest.fixture
def connector(live_server: Any, transactional_db: None) -> Connector:
    """The demo's connector, set up before the browser starts (its event loop would be this thread's)."""
    demo_setup(base_url="http://127.0.0.1:8000")
    return Connector.objects.get(slug="oa")


@pytest.mark.parametrize("viewport", WIDTHS)
def test_oscar_edits_the_demo_connectors_actions_on_a_page_that_fits_the_screen(
    live_server: Any, connector: Connector, browser: Browser, viewport: dict[str, int]
) -> None:
    page = new_page(browser, viewport)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill("oscar")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/admin/agents/connector/{connector.pk}/change/")

    pay = page.locator(".inline-related", has=page.locator('input[value="purchase_pay"]'))
    flag = pay.get_by_label("Requires confirmation")
    expect(flag).to_have_value("true")  # "Yes"
    box = flag.bounding_box()
    assert box is not None and box["x"] + box["width"] <= viewport["width"], box
    tool = pay.locator(".field-tool .readonly")
    expect(tool).to_have_text("oa__purchase_pay")
    tool_box = tool.bounding_box()
    assert tool_box is not None and tool_box["height"] < 40, tool_box  # one line, not a letter per line
    expect(pay.get_by_label("Display name")).to_have_value("Pay a purchase")
    assert fits(page)
    shoot(page, "connector-actions")

    pay.get_by_text("What approvers see").click()
    expect(pay.get_by_label("Context action")).to_have_value(
        str(connector.actions.get(name="purchase_get").pk)
    )
    fields = pay.get_by_label("Fields approvers see")
    expect(fields).to_have_value("vendor, description, amount, currency")
    fields.fill("vendor, amount, currency")
    pay.get_by_label("Display name").fill("Pay a supplier")
    assert fits(page)
    shoot(page, "connector-actions-context-open")
    pay.screenshot(path=str(screenshots_folder() / f"pay-action-{viewport['width']}.png"))
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    saved = connector.actions.get(name="purchase_pay")
    assert (saved.title, saved.context_fields) == ("Pay a supplier", ["vendor", "amount", "currency"])
