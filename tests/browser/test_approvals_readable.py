"""Approvers and auditors read the demo's approvals in a real browser, as people: a card says what
the payment is for (vendor, description, amount with its currency) without internal names or
JSON, the page title counts what waits, a quorum shows who voted and when, an approver can be
notified of a new request while the tab is in the background, and the auditor's event log names
people. Each at a laptop's width and a phone's."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from agents.demo import DEMO_AGENT_NAME, DEMO_PASSWORD, demo_setup
from agents.models import Agent, ConnectorAction
from agents.services import run_start
from approvals.models import ApproverPolicy, ConfirmationRequest
from tenancy.models import Organization
from tests.browser.shots import shoot

pytestmark = [pytest.mark.browser]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
VOTED_AT = r"(\d{4}-\d\d-\d\d )?\d\d:\d\d UTC"
REASON = r"\(“PO matches the invoice”\)"
#: What must never show in the visible text of an approver's page: an internal tool id, or a JSON
#: object (the exact arguments stay behind "Technical details", closed).
INTERNAL = re.compile(r"\b[a-z0-9]+__[a-z_]+|\{\s*\"")

# A browser that announces notifications to the test instead of the desktop, in a tab the test
# can send to the background.
NOTIFICATIONS = """
window.__notes = [];
function FakeNotification(title, options) {
  window.__notes.push({ title: title, body: (options || {}).body || "" });
  this.close = function () {};
}
FakeNotification.permission = "default";
FakeNotification.requestPermission = function () {
  FakeNotification.permission = "granted";
  return Promise.resolve("granted");
};
window.Notification = FakeNotification;
Object.defineProperty(document, "hidden", { get: function () { return !!window.__hidden; } });
"""


@pytest.fixture
def demo(asgi_server, settings: Any) -> dict[str, Any]:
    """The demo, parked at once on approval, its payment described by the purchase it pays (the
    demo's own context action if it declares one, else ``GET purchases/{purchase_id}``)."""
    summary = demo_setup(base_url=asgi_server.url)
    org = Organization.objects.get(name=summary["organization"])
    ApproverPolicy.objects.update_or_create(
        organization=org, agent=None, defaults={"inline_wait_seconds": 0, "approvals_required": 1}
    )
    pay = ConnectorAction.objects.get(connector__organization=org, connector__slug="oa", name="purchase_pay")
    if pay.context_action is None or not pay.context_fields:
        get, _ = ConnectorAction.objects.get_or_create(
            connector=pay.connector,
            name="purchase_get",
            defaults={
                "method": ConnectorAction.Method.GET,
                "path_template": "purchases/{purchase_id}",
                "requires_confirmation": False,
                "is_write": False,
            },
        )
        pay.context_action = get
        pay.context_fields = ["vendor", "description", "amount"]
        pay.save()
    return {**summary, "org": org, "agent": Agent.objects.get(organization=org, name=DEMO_AGENT_NAME)}


def pay(demo: dict[str, Any], text: str = "please pay the pending purchase") -> None:
    """alice asks the demo agent to pay (the run executes on the test server)."""
    alice = get_user_model().objects.get(username="alice")
    run_start(agent=demo["agent"], user=alice, input=text)


def waiting_requests(count: int) -> list[ConfirmationRequest]:
    """The pending requests, once there are ``count`` of them."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        requests = list(ConfirmationRequest.objects.filter(status="pending").order_by("created_at"))
        if len(requests) >= count:
            return requests
        time.sleep(0.1)
    raise AssertionError(f"{count} pending request(s) expected")


def sign_in(browser: Browser, base: str, username: str, *, viewport: dict[str, int] = DESKTOP) -> Page:
    """A page of ``username``, signed in on the approvers' sign-in page (which lands in the inbox)."""
    page = browser.new_context(viewport=viewport).new_page()
    page.goto(f"{base}/approvals/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/approvals/")
    return page


def visible_text(page: Page) -> str:
    return page.locator("main").inner_text()


def fits(page: Page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_an_approver_reads_what_the_payment_is_for_and_the_title_counts_what_waits(
    asgi_server, demo, browser: Browser, viewport: dict[str, int]
) -> None:
    base = asgi_server.url
    pay(demo)
    [request] = waiting_requests(1)
    april = sign_in(browser, base, "april", viewport=viewport)

    card = april.locator(f"#request-{request.pk}")
    about = card.locator("dl.about")
    expect(about).to_contain_text("Lumen Office Supplies")
    expect(about).to_contain_text("200 reams of A4 paper and 12 toner cartridges")
    expect(about.locator("div", has_text="Amount").locator("dd")).to_have_text("1,200.00 USD")
    expect(card.locator("dl.arguments")).to_contain_text("PO-1001")
    # "What will run" says the amount with the currency "About this call" gives it.
    expect(card.locator("dl.arguments div", has_text="Amount").locator("dd")).to_have_text("1,200.00 USD")
    expect(april).to_have_title(re.compile(r"^\(1\) Inbox\b"))
    expect(april.locator("#nav-inbox .count")).to_have_text("1")
    text = visible_text(april)
    assert not INTERNAL.search(text), INTERNAL.search(text)
    assert "1200.0" not in text
    assert fits(april)
    shoot(april, "inbox-card")

    # A second request arrives while the page is open: the count and the title follow it.
    april.evaluate("window.__sameDocument = true")
    pay(demo, "pay PO-1002")
    expect(april.locator(".inbox-card")).to_have_count(2, timeout=15_000)
    expect(april).to_have_title(re.compile(r"^\(2\) Inbox\b"))
    assert april.evaluate("window.__sameDocument") is True

    card.locator("details.json summary").click()
    expect(card.locator("pre.args")).to_contain_text('"amount": 1200.0')
    expect(card.locator("details.json")).to_contain_text("oa__purchase_pay")
    shoot(april, "inbox-json-open")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_quorum_card_says_who_voted_and_when_and_the_auditor_reads_names(
    asgi_server, demo, browser: Browser, viewport: dict[str, int]
) -> None:
    ApproverPolicy.objects.filter(organization=demo["org"], agent=None).update(approvals_required=2)
    base = asgi_server.url
    pay(demo)
    [request] = waiting_requests(1)
    april = sign_in(browser, base, "april", viewport=viewport)
    tally = april.locator(f"#request-{request.pk} .tally")
    expect(tally).to_have_text("0 of 2 approvals — waiting for two more")

    adam = sign_in(browser, base, "adam", viewport=viewport)
    adam.locator(f"#request-{request.pk}").get_by_label(re.compile("^Reason")).fill("PO matches the invoice")
    adam.locator(f"#request-{request.pk}").get_by_role("button", name="Approve").click()
    expect(adam.locator(".msg")).to_contain_text("Your approval was recorded: 1 of 2 approvals")

    expect(tally).to_have_text(
        re.compile(rf"^1 of 2 approvals: adam approved {VOTED_AT} {REASON} — waiting for one more$"),
        timeout=15_000,
    )
    assert fits(april)
    shoot(april, "inbox-quorum-one-of-two")
    april.locator(f"#request-{request.pk}").get_by_role("button", name="Approve").click()
    expect(april.locator(".msg")).to_contain_text("Approved")
    request.refresh_from_db()
    assert request.status == "approved"

    aude = sign_in(browser, base, "aude", viewport=viewport)
    aude.get_by_role("link", name="History", exact=True).click()
    aude.get_by_label("Decided by").select_option(label="adam")
    aude.get_by_role("button", name="Filter").click()
    row = aude.locator("table tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("adam (approved), april (approved)")
    expect(row.locator("td.when").first).to_have_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"))
    expect(aude.locator(".lede")).to_contain_text("Dates and times are in UTC")
    expect(aude.get_by_label(re.compile("^From"))).to_have_attribute("placeholder", "yyyy-mm-dd")
    shoot(aude, "history-quorum")

    row.get_by_role("link").first.click()
    expect(aude.locator("dd.tally")).to_contain_text("2 of 2 approvals: adam approved")
    log = aude.locator("table.log")
    expect(log).to_contain_text("Could decide")
    # The demo's approvers and admins, by name (lee and fiona are approvers too).
    expect(log.locator("tbody tr", has_text="Created")).to_contain_text(
        re.compile(r"Could decide\s*april, lee, fiona, adam")
    )
    log_text = log.inner_text()
    assert '"approvers"' not in log_text and not re.search(r"\[\s*\d", log_text), log_text
    assert not INTERNAL.search(visible_text(aude)), INTERNAL.search(visible_text(aude))
    assert fits(aude)
    shoot(aude, "request-event-log")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_an_approver_who_turned_notifications_on_is_told_of_a_new_request_in_the_background(
    asgi_server, demo, browser: Browser, viewport: dict[str, int]
) -> None:
    base = asgi_server.url
    context = browser.new_context(viewport=viewport)
    context.add_init_script(NOTIFICATIONS)
    april = context.new_page()
    april.goto(f"{base}/approvals/login/")
    april.get_by_label("Username").fill("april")
    april.get_by_label("Password").fill(DEMO_PASSWORD)
    april.get_by_role("button", name="Sign in").click()
    expect(april.locator("#inbox-empty")).to_be_visible()

    april.get_by_role("button", name="Turn on notifications").click()
    expect(april.locator("#inbox-notify-state")).to_contain_text("Notifications are on")
    assert fits(april)
    shoot(april, "inbox-notifications-on")
    april.evaluate("window.__hidden = true")
    pay(demo)

    expect(april.locator(".inbox-card")).to_have_count(1, timeout=15_000)
    notes = april.evaluate("window.__notes")
    assert len(notes) == 1 and notes[0]["title"].startswith("Approval needed: "), notes
    assert "oa__" not in notes[0]["title"] and "requested by alice" in notes[0]["body"]

    # Seen while the tab is in front: no notification; turned off: none either.
    april.evaluate("window.__hidden = false")
    pay(demo, "pay PO-1002")
    expect(april.locator(".inbox-card")).to_have_count(2, timeout=15_000)
    april.get_by_role("button", name="Turn off notifications").click()
    april.evaluate("window.__hidden = true")
    pay(demo)
    expect(april.locator(".inbox-card")).to_have_count(3, timeout=15_000)
    assert len(april.evaluate("window.__notes")) == 1
