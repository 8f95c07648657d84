"""The chat as it reads while a run waits and after, in a real Chromium at 1280 and 390 px: the
message box and Stop stay in reach below a long transcript, a step decided by a person says how
long it waited for them as well as how long it ran, status lines read as sentences, a result's rows
fit a phone's width, and a search finds what the agent said between its calls."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from agents import events as ev
from agents.models import RunEvent
from approvals.models import ConfirmationRequest
from tests.browser.chat_kit import WIDTHS, new_page, send_first
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import PHONE, sign_in, step_of
from tests.browser.test_chat_reads_for_people_in_a_browser import assert_readable, decide

pytestmark = [pytest.mark.browser]


def assert_in_reach(page: Page, name: str) -> None:
    """``name`` (a composer button) is inside the window, wherever the page is scrolled."""
    button = page.locator("#composer").get_by_role("button", name=name, exact=True)
    for scroll in ("0", "document.documentElement.scrollHeight"):
        page.evaluate(f"window.scrollTo(0, {scroll})")
        expect(button).to_be_in_viewport(ratio=1)
        expect(page.get_by_label("Continue the conversation")).to_be_in_viewport()


@pytest.mark.parametrize("viewport", WIDTHS)
def test_a_waiting_run_keeps_stop_in_reach_and_its_step_says_how_long_a_person_took(
    shop, browser: Browser, viewport
) -> None:
    alice = new_page(browser, viewport)
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    paying = step_of(alice, "oa__purchase_pay")
    expect(paying.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    expect(alice.locator(".notice.waiting")).to_be_visible()
    # A long card above: Stop and the message box are still on the screen.
    assert_in_reach(alice, "Stop")
    shoot(alice, "waiting-composer-pinned")

    # The request was opened a minute ago (its event says so); april decides now.
    request = ConfirmationRequest.objects.get()
    RunEvent.objects.filter(run=request.run, type=ev.APPROVAL_PENDING).update(
        created_at=timezone.now() - dt.timedelta(seconds=65)
    )
    decide(request, "april", approve=True)
    expect(paying.locator(".step-status")).to_have_text("Done", timeout=15_000)
    expect(alice.locator(".notice.resumed")).to_have_text("Approved — the agent goes on.")
    alice.reload()
    expect(paying.locator(".step-duration")).to_have_text(
        re.compile(r"^waited 1 min \d+ s for a decision · ran \d+ ms$"), timeout=15_000
    )
    expect(step_of(alice, "oa__purchase_list").locator(".step-duration")).to_have_text(
        re.compile(r"^\d+ ms$")
    )
    expect(alice.locator(".notice.resumed")).to_have_text("Approved — the agent goes on.")
    assert_in_reach(alice, "Send")
    assert_readable(alice)
    shoot(alice, "approved-with-its-wait")

    # The purchases listed: on a phone each row is a block of labelled lines, none cut off;
    # the currency is said by the amounts, not by a column of its own.
    listing = step_of(alice, "oa__purchase_list")
    listing.get_by_text("Result").click()
    rows = listing.locator(".step-result table.rows")
    expect(rows.locator("td[data-label='Amount']").first).to_have_text("1,200.00 USD")
    expect(rows.locator("td[data-label='Currency']")).to_have_count(0)
    if viewport == PHONE:
        wrap = listing.locator(".step-result .rows-wrap")
        assert wrap.evaluate("n => n.scrollWidth <= n.clientWidth"), "the rows are wider than the phone"
        status = rows.locator("td[data-label='Status']").first
        expect(status).to_be_visible()
        assert status.evaluate("n => n.scrollWidth <= n.clientWidth + 1")
    shoot(alice, "result-rows")


def test_a_search_finds_what_the_agent_said_between_its_calls(shop, browser: Browser) -> None:
    alice = new_page(browser, PHONE)
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    expect(step_of(alice, "oa__purchase_pay").locator(".approval")).to_contain_text(
        "Waiting for approval", timeout=15_000
    )

    alice.goto(f"{shop.url}/agents/")
    search = alice.get_by_label("Search your conversations")
    search.fill("paying the first")  # said between the list and the payment, not a final answer
    search.press("Enter")
    expect(alice.locator("#search-results a")).to_have_text(["please pay the pending purchase"])
    search = alice.get_by_label("Search your conversations")
    search.fill("Lumen office")  # what the waiting card is about
    search.press("Enter")
    expect(alice.locator("#search-results a")).to_have_text(["please pay the pending purchase"])
    shoot(alice, "search-finds-the-agents-words")
