"""The controls every chat has, in a real Chromium at 1280 and 390 px: Enter to send (Shift+Enter
for a new line), Stop and Retry, rename, archive, restore and search."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Conversation, Run, RunStatus
from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus
from tests.browser.chat_kit import WIDTHS, new_page, send_first
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser]


@pytest.mark.parametrize("viewport", WIDTHS)
def test_enter_sends_and_shift_enter_makes_a_new_line(shop, browser: Browser, viewport) -> None:
    alice = new_page(browser, viewport)
    sign_in(alice, shop.url, "alice")
    alice.goto(f"{shop.url}/agents/{shop.agent.pk}/")
    box = alice.get_by_label("Your message")
    box.fill("hello")
    box.press("Shift+Enter")
    box.press_sequentially("there")
    expect(box).to_have_value("hello\nthere")
    expect(alice).to_have_url(f"{shop.url}/agents/{shop.agent.pk}/")
    shoot(alice, "new-chat-two-lines")

    box.press("Enter")
    expect(alice).to_have_url(re.compile(r"/conversations/\d+/$"))
    expect(alice.locator(".bubble.user")).to_have_text("hello\nthere")
    expect(alice.locator(".bubble.assistant.final")).to_contain_text("Hello!", timeout=15_000)
    expect(alice.get_by_role("button", name="Retry")).to_have_count(0)  # it went well
    box = alice.get_by_label("Continue the conversation")
    box.press("Enter")  # nothing written: nothing sent
    box.fill("and again")
    box.press("Enter")
    expect(alice.locator(".turn")).to_have_count(2)
    expect(alice.locator(".bubble.assistant.final")).to_have_count(2, timeout=15_000)
    shoot(alice, "chat-after-enter")
    assert [r.input for r in Run.objects.order_by("pk")] == ["hello\nthere", "and again"]


@pytest.mark.parametrize("viewport", WIDTHS)
def test_stop_cancels_a_waiting_run_and_its_request(shop, browser: Browser, viewport) -> None:
    alice = new_page(browser, viewport)
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    card = alice.locator(".approval")
    expect(card).to_contain_text("Waiting for approval", timeout=15_000)
    expect(alice.get_by_role("button", name="Send")).to_be_hidden()
    shoot(alice, "waiting-with-stop")

    alice.get_by_role("button", name="Stop").click()

    expect(alice.locator(".notice.run-end")).to_have_text("You stopped the run.", timeout=15_000)
    expect(card.locator(".verdict")).to_have_text("Cancelled — the run was stopped")
    expect(alice.locator(".step").last.locator(".step-status")).to_have_text("Cancelled")
    expect(card.locator(".args-caption")).to_have_text("What was asked")
    expect(card).not_to_contain_text("Who may decide")
    expect(alice.get_by_role("button", name="Stop")).to_be_hidden()
    expect(alice.get_by_role("button", name="Send")).to_be_visible()
    expect(alice.get_by_role("button", name="Retry")).to_be_visible()
    expect(alice).not_to_have_title(re.compile("Waiting"))
    shoot(alice, "stopped")
    request = ConfirmationRequest.objects.get()
    assert request.status == ConfirmationStatus.CANCELLED and request.run.status == RunStatus.CANCELLED

    # The approvers' inbox no longer offers it; its page says it was cancelled.
    april = new_page(browser, viewport)
    sign_in(april, shop.url, "april")
    expect(april.locator(".inbox-card")).to_have_count(0)
    april.goto(f"{shop.url}/approvals/{request.pk}/")
    expect(april.locator("main")).to_contain_text("Cancelled")
    expect(april.get_by_role("button", name="Approve")).to_have_count(0)
    # Its log names who stopped the run, in one sentence.
    cancelled = april.locator("table.log tbody tr", has_text="Cancelled")
    expect(cancelled.locator("td.by")).to_have_text("alice")
    expect(cancelled.locator("td.details dl.kv")).to_contain_text("alice stopped the run.")
    assert "cancelled by the user" not in april.locator("main").inner_text()  # (the JSON keeps it)
    shoot(april, "request-cancelled")

    # Retry sends the same message again, in the same conversation.
    alice.get_by_role("button", name="Retry").click()
    expect(alice.locator(".turn")).to_have_count(2)
    expect(alice.locator(".turn").nth(1).locator(".approval")).to_contain_text(
        "Waiting for approval", timeout=15_000
    )
    assert [r.input for r in Run.objects.order_by("pk")] == ["please pay the pending purchase"] * 2


def test_stop_while_the_run_still_waits_inline_withdraws_the_request_at_once(shop, browser: Browser) -> None:
    """The run waits inline for a verdict (a minute here) before it parks: Stop does not wait for
    that window to end."""
    ApproverPolicy.objects.filter(organization=shop.org, agent=None).update(inline_wait_seconds=60)
    alice = new_page(browser, DESKTOP)
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    card = alice.locator(".approval")
    expect(card).to_contain_text("Waiting for approval", timeout=15_000)
    assert Run.objects.get().status == RunStatus.RUNNING

    alice.get_by_role("button", name="Stop").click()

    expect(card.locator(".verdict")).to_have_text("Cancelled — the run was stopped", timeout=15_000)
    expect(alice.locator(".notice.run-end")).to_have_text("You stopped the run.", timeout=15_000)
    assert ConfirmationRequest.objects.get().status == ConfirmationStatus.CANCELLED
    assert Run.objects.get().status == RunStatus.CANCELLED
    shoot(alice, "stopped-inline")
    alice.set_viewport_size(PHONE)
    shoot(alice, "stopped-inline")


@pytest.mark.parametrize("viewport", WIDTHS)
def test_a_member_renames_archives_restores_and_searches_her_conversations(
    shop, browser: Browser, viewport
) -> None:
    alice = new_page(browser, viewport)
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "hello")
    expect(alice.locator(".bubble.assistant.final")).to_be_visible(timeout=15_000)
    chat_url = alice.url

    alice.get_by_text("Rename or archive").click()
    shoot(alice, "conversation-menu")
    alice.get_by_label("Title").fill("Office paper order")
    alice.get_by_role("button", name="Rename").click()
    expect(alice.get_by_role("heading", level=1)).to_have_text("Office paper order")
    expect(alice).to_have_title(re.compile("^Office paper order"))

    alice.goto(f"{shop.url}/agents/")
    search = alice.get_by_label("Search your conversations")
    search.fill("paper")
    search.press("Enter")
    expect(alice.locator("#search-results a")).to_have_text(["Office paper order"])
    shoot(alice, "search-by-title")
    search = alice.get_by_label("Search your conversations")
    search.fill("ask me to pay")  # in the agent's answer
    search.press("Enter")
    expect(alice.locator("#search-results a")).to_have_text(["Office paper order"])
    search = alice.get_by_label("Search your conversations")
    search.fill("invoices from 1999")
    search.press("Enter")
    expect(alice.locator(".empty")).to_contain_text("No conversation of yours mentions")

    alice.goto(chat_url)
    alice.get_by_text("Rename or archive").click()
    alice.get_by_role("button", name="Archive").click()
    expect(alice).to_have_url(f"{shop.url}/agents/")
    expect(alice.locator(".msg")).to_have_text(
        "“Office paper order” is archived. Find it under Archived conversations."
    )
    expect(alice.locator(".msg").get_by_role("link", name="Archived conversations")).to_have_attribute(
        "href", "/conversations/?archived=1"
    )
    expect(alice.locator(".conversation-list")).to_have_count(0)
    shoot(alice, "after-archive")
    # A search still finds it, marked archived.
    alice.goto(f"{shop.url}/conversations/?q=paper")
    found = alice.locator("#search-results li")
    expect(found).to_have_count(1)
    expect(found.locator(".archived-mark")).to_have_text("Archived")
    shoot(alice, "search-finds-archived")

    alice.get_by_role("link", name="Archived conversations").click()
    alice.get_by_role("link", name="Office paper order").click()
    expect(alice).to_have_url(chat_url)
    expect(alice.locator("#archived-note")).to_contain_text(
        re.compile(r"^\s*Archived on \d{4}-\d\d-\d\d\. It is kept for the record and takes no new messages\.")
    )
    expect(alice.locator("#composer")).to_have_count(0)
    shoot(alice, "archived-conversation")
    alice.get_by_role("button", name="Restore to my list").click()
    expect(alice.locator("#composer")).to_be_visible()
    alice.goto(f"{shop.url}/agents/")
    expect(alice.locator(".conversation-list a")).to_have_text(["Office paper order"])
    assert Conversation.objects.get().archived_at is None
