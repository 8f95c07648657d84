"""The ways into the portal and its looks, in a real Chromium at 1280 and 390 px: the dark scheme,
the landing page, favicon and 404 page in development, approvers landing in their inbox, auditors
told they read but do not chat."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from agents.demo import DEMO_PASSWORD
from tests.browser.chat_kit import WIDTHS, new_page, send_first
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import sign_in

pytestmark = [pytest.mark.browser]


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
