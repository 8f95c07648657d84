"""The chat page as people use it, in a real Chromium at 1280 and 390 px: what they read (titles,
sentences, tables — never an internal id or a raw JSON object with the details closed), the
controls every chat has (Enter to send, Stop, Retry, rename, archive, search), an approval card
that counts the votes live, the dark scheme, and the ways in (the landing page, approvers in their
inbox, the portal's 404 page in development)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connections
from playwright.sync_api import Browser, Page, expect

from agents.demo import DEMO_PASSWORD, demo_setup
from agents.models import Agent, Conversation, Organization, Run, RunStatus
from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from demo_payments.models import Purchase
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in, step_of

pytestmark = [pytest.mark.browser]

WIDTHS = [pytest.param(DESKTOP, id="1280"), pytest.param(PHONE, id="390")]
INTERNAL_ID = re.compile(r"\b[A-Za-z0-9]+__[A-Za-z0-9_]+\b")
RAW_JSON = re.compile(r'[{\[]\s*"')
# A time of day as every page writes it: 24-hour, with its zone (here the browser's: "13:37 UTC").
CLOCK = r"\d\d:\d\d [A-Z][A-Za-z0-9+:-]*"

# A helper on the demo's payments connector whose answers are written for people.
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": r"\bpay",
            "turns": [
                {
                    "content": "Let me look up the pending purchases.",
                    "tool_calls": [{"name": "oa__purchase_list", "arguments": {"status": "pending"}}],
                },
                {
                    "content": "Paying the first one.",
                    "tool_calls": [
                        {
                            "name": "oa__purchase_pay",
                            "arguments": {
                                "purchase_id": "$last.0.id",
                                "amount": "$last.0.amount",
                                "note": "Paid from the chat",
                            },
                        }
                    ],
                },
                {"content": "That is all I was asked to do."},
            ],
        },
        {"turns": [{"content": "Hello! Ask me to pay the pending purchase."}]},
    ]
}


@pytest.fixture
def shop(asgi_server) -> SimpleNamespace:
    summary = demo_setup(base_url=asgi_server.url)
    org = Organization.objects.get(name=summary["organization"])
    # Requests park at once (the page follows a suspension), one approval settles them.
    ApproverPolicy.objects.update_or_create(
        organization=org, agent=None, defaults={"inline_wait_seconds": 0, "approvals_required": 1}
    )
    demo_agent = Agent.objects.get(pk=summary["agent"]["id"])
    agent = Agent.objects.create(
        organization=org,
        owner=demo_agent.owner,
        name="Purchasing helper",
        model_config_json={"provider": "scripted", "script": SCRIPT},
    )
    agent.actions.set(demo_agent.actions.filter(name__in=["purchase_list", "purchase_pay"]))
    return SimpleNamespace(url=asgi_server.url, org=org, agent=agent)


def new_page(browser: Browser, viewport: dict[str, int], **options: Any) -> Page:
    return browser.new_context(viewport=viewport, **options).new_page()


def send_first(page: Page, shop: SimpleNamespace, text: str) -> None:
    page.goto(f"{shop.url}/agents/{shop.agent.pk}/")
    page.get_by_label("Your message").fill(text)
    page.get_by_label("Your message").press("Enter")
    expect(page).to_have_url(re.compile(r"/conversations/\d+/$"))


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


# --- what people read -----------------------------------------------------------------------------


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
    expect(rows.locator("th")).to_contain_text(["Id", "Vendor"])
    listing.locator(".step-result").get_by_role("button", name="Show JSON").click()
    expect(listing.locator(".step-result pre.json")).to_contain_text('"vendor": "Lumen Office Supplies"')
    listing.get_by_text("Technical details").click()
    expect(listing.locator(".step-tech")).to_contain_text("oa__purchase_list")
    listing.get_by_text("Result").click()
    listing.get_by_text("Technical details").click()

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
    paying.get_by_text("Technical details").click()
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


# --- the controls ---------------------------------------------------------------------------------


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


# --- looks and ways in -----------------------------------------------------------------------------


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_dark_scheme_renders_the_portal_dark(shop, browser: Browser, viewport) -> None:
    alice = new_page(browser, viewport, color_scheme="dark")
    alice.goto(f"{shop.url}/")
    shoot(alice, "landing-dark")
    sign_in(alice, shop.url, "alice")
    send_first(alice, shop, "please pay the pending purchase")
    expect(alice.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)

    background = alice.evaluate("getComputedStyle(document.body).backgroundColor")
    card = alice.evaluate("getComputedStyle(document.querySelector('.approval')).backgroundColor")
    ink = alice.evaluate("getComputedStyle(document.body).color")
    assert background == "rgb(15, 20, 28)" and card != "rgb(255, 251, 235)" and ink == "rgb(230, 233, 239)"
    shoot(alice, "chat-dark")
    alice.goto(f"{shop.url}/agents/")
    shoot(alice, "home-dark")


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_landing_page_the_favicon_and_the_portal_404_page_render_in_development(
    shop, browser: Browser, viewport, settings
) -> None:
    settings.DEBUG = True  # as under make run
    visitor = new_page(browser, viewport)
    visitor.goto(f"{shop.url}/")
    expect(visitor.get_by_role("heading", level=1)).to_have_text("Agents that ask before they act")
    expect(visitor.locator("main")).to_contain_text("Approvers")
    # The demo is served here: the page says how to try it, for people (no developer's command).
    expect(visitor.locator("#demo-hint")).to_contain_text(
        "Trying the demo? Sign in as alice (chat), april (approve)"
    )
    expect(visitor.locator("main")).not_to_contain_text("make run")
    icon = visitor.locator("link[rel=icon]").get_attribute("href")
    assert icon and visitor.request.get(f"{shop.url}{icon}").ok
    shoot(visitor, "landing")

    missing = visitor.goto(f"{shop.url}/no/such/page/")
    assert missing is not None and missing.status == 404
    expect(visitor.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(visitor.locator("body")).not_to_contain_text("URLconf")
    # Signed out, there are no agents to go back to: the way on is to sign in.
    expect(visitor.locator("main").get_by_role("link", name="Sign in")).to_be_visible()
    expect(visitor.locator("main")).not_to_contain_text("Back to your agents")
    shoot(visitor, "not-found-signed-out")
    sign_in(visitor, shop.url, "alice")
    missing = visitor.goto(f"{shop.url}/conversations/999999/")
    assert missing is not None and missing.status == 404
    expect(visitor.get_by_role("heading", name="Page not found")).to_be_visible()
    shoot(visitor, "not-found")


@pytest.mark.parametrize("viewport", WIDTHS)
def test_an_approver_lands_in_the_inbox_and_finds_her_agents_under_chat(
    shop, browser: Browser, viewport
) -> None:
    april = new_page(browser, viewport)
    april.goto(f"{shop.url}/")
    april.get_by_role("link", name="Sign in").click()
    april.get_by_label("Username").fill("april")
    april.get_by_label("Password").fill(DEMO_PASSWORD)
    april.get_by_role("button", name="Sign in").click()

    expect(april).to_have_url(f"{shop.url}/approvals/")
    expect(april.get_by_role("link", name=re.compile("^Inbox"))).to_be_visible()
    shoot(april, "approver-lands-in-inbox")
    april.get_by_role("link", name="Chat").click()
    expect(april).to_have_url(f"{shop.url}/agents/")
    expect(april.get_by_role("heading", name="Your agents")).to_be_visible()


@pytest.mark.parametrize("viewport", WIDTHS)
def test_an_auditor_reads_the_agents_but_is_told_she_does_not_chat(shop, browser: Browser, viewport) -> None:
    aude = new_page(browser, viewport)
    sign_in(aude, shop.url, "aude")
    expect(aude.locator("main")).to_contain_text("You are an auditor")
    # No conversations to list or search: where she reads instead, and a tab named for it.
    expect(aude.locator("main")).not_to_contain_text("Recent conversations")
    expect(aude.get_by_role("search")).to_have_count(0)
    expect(aude.locator("#where-you-read").get_by_role("link", name="Approval history")).to_be_visible()
    expect(aude.locator("nav a.active")).to_have_text("Agents")
    shoot(aude, "auditor-home")
    aude.goto(f"{shop.url}/agents/{shop.agent.pk}/")
    expect(aude.locator("main")).to_contain_text("auditors read the record but do not chat with agents")
    expect(aude.get_by_role("button", name="Send")).to_have_count(0)
    shoot(aude, "auditor-agent")
    # The agent's page is no dead end: its approval history, filtered to it.
    aude.locator("#agent-history").click()
    expect(aude).to_have_url(f"{shop.url}/approvals/history/?agent={shop.agent.pk}")
    expect(aude.get_by_label("Agent")).to_have_value(str(shop.agent.pk))
    expect(aude.locator("main")).to_contain_text("No requests match these filters.")
    expect(aude.locator("#export-csv")).to_have_count(0)
    shoot(aude, "auditor-agent-history")
