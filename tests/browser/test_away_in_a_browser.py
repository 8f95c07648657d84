"""An approver's absence in a real Chromium (issue 26, item 3): with payments april's alone to
decide, april says she is away and that fiona decides in her place; fiona's inbox then shows
alice's payment, saying in whose place she decides; april comes back with one click. At 1280 and
390 px."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Browser, expect

from agents.demo import DEMO_ORGANIZATION
from approvals.models import ApproverPolicy
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import sign_in
from tests.browser.test_demo_in_a_browser import WIDTHS, demo, fits, new_page, send  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser]


@pytest.mark.parametrize("viewport", WIDTHS)
def test_april_goes_away_fiona_decides_in_her_place_and_april_comes_back(
    demo: str,  # noqa: F811 - the fixture imported above
    browser: Browser,
    viewport: dict[str, int],
) -> None:
    # Payments are april's alone here, so that what fiona sees is only what she stands in for.
    policy = ApproverPolicy.objects.get(organization__name=DEMO_ORGANIZATION, agent=None)
    policy.allow_org_approvers = False
    # The payment is still waiting when the test ends: suspended at once, no run holds the server's
    # loop for the inline wait after the last look.
    policy.inline_wait_seconds = 0
    policy.save()
    policy.named_users.set(get_user_model().objects.filter(username="april"))
    april, alice, fiona = (new_page(browser, viewport) for _ in range(3))
    sign_in(april, demo, "april")
    april.get_by_role("link", name="Away? Choose who decides in your place").click()
    form = april.get_by_role("form", name="Set an absence")
    until = (timezone.localtime() + dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    form.get_by_label("Away until").fill(until)
    form.get_by_label("Who decides in my place").select_option(label="fiona")
    expect(form).to_contain_text("In UTC, the server's time zone.")  # the zone, named
    shoot(april, "away-form")
    form.get_by_role("button", name="Set my absence").click()
    expect(april.locator(".msg")).to_contain_text("fiona decides in your place")
    expect(april.get_by_role("button", name="I'm back")).to_be_visible()
    assert fits(april)
    shoot(april, "away-set")
    april.goto(f"{demo}/approvals/")
    expect(april.locator(".away-banner")).to_contain_text("You are away until")
    expect(april.locator(".away-banner")).to_contain_text("fiona decides your requests in your place")
    expect(april.locator(".away-banner").get_by_role("button", name="I'm back")).to_be_visible()
    shoot(april, "away-inbox-banner")
    april.goto(f"{demo}/approvals/away/")

    sign_in(alice, demo, "alice")
    alice.get_by_role("link", name=re.compile("Procurement assistant")).click()
    paying = send(alice, "please pay the pending purchase")
    expect(paying.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)

    sign_in(fiona, demo, "fiona")
    fiona.goto(f"{demo}/approvals/")
    card = fiona.locator(".card", has_text="Pay a purchase")
    expect(card.locator(".stand-in")).to_contain_text("You decide this in the place of april")
    expect(fiona.locator(".away-banner")).to_contain_text("You stand in for april until")
    shoot(fiona, "stand-in-inbox")

    april.get_by_role("button", name="I'm back").click()
    expect(april.locator(".msg")).to_contain_text("Welcome back")
    expect(april.get_by_role("form", name="Set an absence")).to_be_visible()
