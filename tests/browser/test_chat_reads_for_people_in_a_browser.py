"""What people read on the chat page, in a real Chromium at 1280 and 390 px: payments approved and
rejected, what hooks did, a card that counts the votes live — titles, sentences and tables, never
an internal id or a raw JSON object with the details closed."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from zoneinfo import ZoneInfo

import pytest
from django.db import connections
from playwright.sync_api import Browser, Page, expect

from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from demo_payments.models import Purchase
from tests.browser.chat_kit import new_page, send_first
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in, step_of

pytestmark = [pytest.mark.browser]

INTERNAL_ID = re.compile(r"\b[A-Za-z0-9]+__[A-Za-z0-9_]+\b")
RAW_JSON = re.compile(r'[{\[]\s*"')
# A time of day as every page writes it: 24-hour, with its zone (here the browser's: "13:37 UTC").
CLOCK = r"\d\d:\d\d [A-Z][A-Za-z0-9+:-]*"


def decide(request: ConfirmationRequest, username: str, *, approve: bool, reason: str = "") -> None:
    """``username`` votes on ``request`` as the inbox would, from a thread of its own: Playwright's
    event loop on the test's thread would keep the service from pushing what it tells the pages."""

    def vote() -> bool:
        try:
            user = request.approvers.get(username=username)
            return confirmation_decide(
                request_id=request.pk, user=user, approve=approve, reason=reason
            ).counted
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(vote).result(timeout=30), f"{username}'s vote was not counted"


def assert_readable(page: Page) -> None:
    """No internal id and no raw JSON object in what a person sees (closed toggles stay closed)."""
    text = page.locator("main").inner_text()
    assert not INTERNAL_ID.search(text), INTERNAL_ID.search(text)
    assert not RAW_JSON.search(text), text[max(0, RAW_JSON.search(text).start() - 80) :][:200]
    assert "Do not retry" not in text and "was not executed" not in text


def test_a_payment_approved_then_one_rejected_read_as_sentences_and_tables_without_ids_or_json(
    shop, browser: Browser
) -> None:
    alice = new_page(browser, DESKTOP, timezone_id="Asia/Tokyo")
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    listing, paying = step_of(alice, "oa__purchase_list"), step_of(alice, "oa__purchase_pay")
    card = paying.locator(".approval")
    expect(card).to_contain_text("Waiting for approval", timeout=15_000)
    expect(listing.locator(".step-title")).not_to_have_text(re.compile("__"))
    expect(alice).to_have_title(re.compile(r"^\(1\) Waiting for approval — "))
    assert_readable(alice)
    shoot(alice, "payment-waiting")
    alice.set_viewport_size(PHONE)
    assert_readable(alice)
    shoot(alice, "payment-waiting")
    alice.set_viewport_size(DESKTOP)

    # The list's result reads as a table: amounts in their currency, moments in Tokyo time.
    listing.get_by_text("Result").click()
    rows = listing.locator(".step-result table.rows")
    expect(rows).to_contain_text("1,200.00 USD")
    expect(rows.locator("th")).to_contain_text(["ID", "Vendor"])
    expect(rows.locator("th", has_text="Currency")).to_have_count(0)  # the amounts say it
    listing.locator(".step-result").get_by_role("button", name="Technical details (JSON)").click()
    expect(listing.locator(".step-result pre.json")).to_contain_text('"vendor": "Lumen Office Supplies"')
    listing.get_by_text("Technical details", exact=True).click()
    expect(listing.locator(".step-tech")).to_contain_text("oa__purchase_list")
    listing.get_by_text("Result").click()
    listing.get_by_text("Technical details", exact=True).click()

    request = ConfirmationRequest.objects.get()
    april = ConfirmationRequest.objects.get().approvers.get(username="april")
    assert confirmation_decide(
        request_id=request.pk, user=april, approve=True, reason="within budget"
    ).accepted
    expect(card.locator(".verdict")).to_contain_text("Approved by april", timeout=15_000)
    expect(paying.locator(".step-status")).to_have_text("Done", timeout=15_000)
    expect(alice.locator(".bubble.assistant.final")).to_have_text("That is all I was asked to do.")
    # Paid: nothing went wrong, so nothing invites to send it again (it would read "pay again").
    expect(alice.locator(".turn-actions")).to_have_count(0)
    expect(alice.get_by_role("button", name="Retry")).to_have_count(0)
    # The verdict and the result's moments in Tokyo time, on a 24-hour clock with the zone.
    expect(card.locator(".verdict")).to_have_text(re.compile(r"^Approved by april at \d\d:\d\d GMT\+9\b"))
    paying.get_by_text("Result").click()
    paid_at = paying.locator(".step-result tr", has_text="Paid at").locator("td")
    paid = Purchase.objects.get(pk=request.tool_args["purchase_id"]).paid_at
    assert paid is not None
    expect(paid_at).to_contain_text(paid.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%H:%M") + " GMT+9")
    expect(paid_at).not_to_contain_text(re.compile(r"[AP]M"))
    paying.get_by_text("Result").click()
    expect(alice).not_to_have_title(re.compile("Waiting"))

    # The next one is rejected: people read who said no and why, not what the model was told.
    alice.get_by_label("Continue the conversation").fill("pay the next one")
    alice.get_by_label("Continue the conversation").press("Enter")
    second = alice.locator(".turn").nth(1)
    expect(second.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    rejected = ConfirmationRequest.objects.get(status=ConfirmationStatus.PENDING)
    assert confirmation_decide(
        request_id=rejected.pk, user=april, approve=False, reason="over budget"
    ).accepted
    expect(second.locator(".verdict")).to_have_text(
        re.compile(r"^Rejected by april at .*over budget"), timeout=15_000
    )
    expect(second.locator(".step").last.locator(".step-status")).to_have_text("Rejected")
    expect(second.locator(".bubble.assistant.final")).to_be_visible(timeout=15_000)
    expect(second.locator(".args-caption")).to_have_text("What was asked")
    # Rejected: the message may be worth sending again, and Retry says what it does.
    retry = second.get_by_role("button", name="Retry")
    expect(retry).to_be_visible()
    expect(retry).to_have_attribute("title", re.compile("^Send your last message again"))
    assert_readable(alice)
    shoot(alice, "approved-then-rejected")
    alice.set_viewport_size(PHONE)
    assert_readable(alice)
    shoot(alice, "approved-then-rejected")

    # Reloaded, the stored events read the same.
    alice.reload()
    expect(alice.locator(".verdict")).to_have_count(2)
    assert_readable(alice)


def test_what_hooks_did_reads_as_sentences_and_a_blocked_call_says_why(shop, browser: Browser) -> None:
    config = dict(shop.agent.model_config_json)
    config["hooks"] = {
        "class_hooks": [
            {
                "name": "set_arguments",
                "params": {"tools": ["oa__purchase_list"], "values": {"status": "pending"}},
            },
            {
                "name": "deny_tools",
                "params": {"tools": ["oa__purchase_pay"], "message": "Payments are frozen. Do not retry it."},
            },
        ]
    }
    config["script"] = {
        "turns": [
            {"tool_calls": [{"name": "oa__purchase_list", "arguments": {"status": "paid"}}]},
            {
                "tool_calls": [
                    {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-1001", "amount": 1200}}
                ]
            },
            {"content": "I could not pay it: payments are frozen."},
        ]
    }
    shop.agent.model_config_json = config
    shop.agent.full_clean()
    shop.agent.save()
    alice = new_page(browser, DESKTOP)
    sign_in(alice, shop.url, "alice")

    send_first(alice, shop, "please pay the pending purchase")

    expect(alice.locator(".bubble.assistant.final")).to_be_visible(timeout=15_000)
    listing, paying = step_of(alice, "oa__purchase_list"), step_of(alice, "oa__purchase_pay")
    expect(listing.locator(".effects li")).to_have_text(
        ["A rule of this agent changed status to “pending” before the call."]
    )
    expect(paying.locator(".step-status")).to_have_text("Blocked")
    expect(paying.locator(".effects")).to_have_text("Blocked: Payments are frozen.")
    assert_readable(alice)
    assert "deny_tools" not in alice.locator("main").inner_text()
    paying.get_by_text("Technical details", exact=True).click()
    expect(paying.locator(".step-tech")).to_contain_text("deny_tools: denied oa__purchase_pay")
    expect(paying.locator(".step-tech")).to_contain_text("Payments are frozen. Do not retry it.")
    shoot(alice, "blocked-by-a-rule")
    alice.set_viewport_size(PHONE)
    shoot(alice, "blocked-by-a-rule")


def test_a_card_counts_the_votes_live_and_its_last_line_names_every_voter(shop, browser: Browser) -> None:
    ApproverPolicy.objects.filter(organization=shop.org, agent=None).update(approvals_required=2)
    alice = new_page(browser, DESKTOP)
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    card = alice.locator(".approval")
    expect(card.locator(".tally")).to_have_text("0 of 2 approvals so far", timeout=15_000)
    alice.evaluate("window.__sameDocument = true")
    request = ConfirmationRequest.objects.get()

    decide(request, "april", approve=True)
    expect(card.locator(".tally")).to_have_text(
        re.compile(rf"^1 of 2 approvals — april approved at {CLOCK}$"), timeout=15_000
    )
    assert alice.evaluate("window.__sameDocument") is True  # live, not a reload
    shoot(alice, "one-of-two")
    alice.set_viewport_size(PHONE)
    shoot(alice, "one-of-two")
    alice.reload()  # the votes are not stored in the run's events: the page reads them again
    expect(card.locator(".tally")).to_have_text(re.compile(r"^1 of 2 approvals — april approved at"))

    # Alice turned notifications on and looks at another tab: she is told when the answer is ready.
    alice.context.grant_permissions(["notifications"])
    alice.evaluate(
        """() => {
        window.__told = [];
        window.Notification = function (title, options) { window.__told.push([title, options.body]); };
        window.Notification.permission = "granted";
        Object.defineProperty(document, "hidden", { get: () => true });
      }"""
    )
    decide(request, "adam", approve=True, reason="fine")
    expect(card.locator(".verdict")).to_have_text(
        re.compile(rf"^Approved by april at {CLOCK} and adam at {CLOCK} \(“fine”\)$"), timeout=15_000
    )
    expect(alice.locator(".bubble.assistant.final")).to_be_visible(timeout=15_000)
    assert alice.evaluate("window.__told.map((n) => n[0])") == ["The answer is ready"]
    expect(alice).to_have_title(re.compile(r"^Done — please pay the pending purchase"))
    shoot(alice, "two-of-two")
