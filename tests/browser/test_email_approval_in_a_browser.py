"""An e-mail approval in a real Chromium (issue 26, item 5), at 1280 and 390 px: alice pays, april's
message carries the approve link; opened in a browser where nobody is signed in, the page decides
nothing until april asks for a code, which arrives at her address, and enters it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from playwright.sync_api import Browser, expect

from agents.demo import DEMO_ORGANIZATION
from approvals.models import ChannelConfig
from tenancy.models import Organization
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import sign_in
from tests.browser.test_demo_in_a_browser import PAID, WIDTHS, demo, fits, new_page, send  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser]


@pytest.mark.parametrize("viewport", WIDTHS)
def test_april_approves_from_her_mail_with_the_code_sent_to_her(
    demo: str,  # noqa: F811 - the fixture imported above
    browser: Browser,
    viewport: dict[str, int],
    settings,
) -> None:
    settings.SITE_URL = demo
    get_user_model().objects.filter(username="april").update(email="april@acme.test")
    organization = Organization.objects.get(name=DEMO_ORGANIZATION)
    ChannelConfig.objects.create(organization=organization, kind="email", name="E-mail", is_default=True)
    alice, mailbox_reader = new_page(browser, viewport), new_page(browser, viewport)
    sign_in(alice, demo, "alice")
    alice.get_by_role("link", name=re.compile("Procurement assistant")).click()

    paying = send(alice, "please pay the pending purchase")
    expect(paying.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    [message] = [m for m in mail.outbox if m.to == ["april@acme.test"]]
    approve = re.search(r"^Approve: (\S+)$", message.body, re.M).group(1)

    mailbox_reader.goto(approve)
    expect(mailbox_reader.locator("h1")).to_have_text("Approve “Pay a purchase”?")
    shoot(mailbox_reader, "email-link-opened")
    mailbox_reader.get_by_role("button", name="Send me a code").click()
    code = re.search(r"Your code: (\d{6})", mail.outbox[-1].subject).group(1)
    mailbox_reader.get_by_label("Code", exact=True).fill(code)
    mailbox_reader.get_by_label(re.compile("^Reason")).fill("within budget")
    shoot(mailbox_reader, "email-code-entered")
    mailbox_reader.get_by_role("button", name="Approve").click()
    expect(mailbox_reader.locator(".msg")).to_contain_text("The request was approved.")
    assert fits(mailbox_reader)

    pattern = PAID.format(
        id="PO-1001", amount=re.escape("1,200.00"), vendor=re.escape("Lumen Office Supplies")
    )
    expect(paying.locator(".bubble.assistant.final")).to_have_text(re.compile(pattern), timeout=15_000)
